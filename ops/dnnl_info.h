#pragma once
/// @file
/// What oneDNN Strata was built against and which library it loaded.
///
/// Note [oneDNN from PyPI is a SYCL build]
/// PyPI's `onednn` wheels (the v3 API Strata uses) are built with DNNL_CPU_RUNTIME=SYCL. Two
/// consequences the ops backend must respect:
/// - primitives need a SYCL CPU device, which Intel's OpenCL CPU runtime (`intel-opencl-rt`, a
///   dependency of the wheel) provides only when the ICD loader can find it:
///   OCL_ICD_FILENAMES=<prefix>/lib/libintelocl.so (the backend sets it before creating an engine);
/// - every primitive execution goes through a SYCL queue, measured at ~25 µs per call on this
///   machine (a 16×16 matmul; NumPy takes 2.6 µs), while `dnnl_sgemm` runs directly on TBB
///   (0.6 µs at 16³, 180 GFLOP/s at 1024³). Small ops must therefore avoid primitives.
/// libdnnl carries no RUNPATH for its Intel dependencies (libsvml, libimf, libsycl ...), which sit
/// beside it, so every binary linking it gets an old-style DT_RPATH to that directory
/// (cmake/StrataDeps.cmake).

#include <string>

namespace strata::ops {

struct DnnlInfo {
  int major = 0, minor = 0, patch = 0;  // of the loaded library
  std::string cpu_runtime;              // "SYCL", "TBB", "OMP", ... of the loaded library
  std::string header_version;           // of the headers Strata was compiled against
  std::string library_dir;              // where the build found libdnnl
};

/// Queries the loaded oneDNN (no engine is created).
DnnlInfo dnnl_info();

/// "oneDNN 3.13.2 (CPU runtime SYCL)".
std::string dnnl_summary();

}  // namespace strata::ops
