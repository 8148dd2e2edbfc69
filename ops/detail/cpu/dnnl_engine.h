#pragma once
/// @file
/// The process-wide oneDNN CPU engine and stream (internal to ops/).
///
/// Note [When Strata uses oneDNN primitives]
/// PyPI's oneDNN is a SYCL build (Note [oneDNN from PyPI is a SYCL build] in ops/dnnl_info.h): the
/// engine needs Intel's OpenCL CPU runtime, which `dnnl_engine()` points the ICD loader at
/// (OCL_ICD_FILENAMES, set only if the user has not set it) before creating the engine once,
/// lazily and thread-safely. Each primitive execution pays ~25 µs of SYCL queue overhead, so ops
/// choose per call between a primitive and their own kernel (e.g. im2col + `dnnl_sgemm`, which runs
/// directly on TBB). The choice is governed by `dnnl_primitives_mode()`:
///  - Auto (default): the op's size heuristic (conv2d: primitives for typical CNN layers);
///  - Always: primitives wherever the op has them (tests use it to cover the primitive path);
///  - Never: own kernels only.
/// The environment variable STRATA_DNNL_PRIMITIVES sets the initial mode: "0" (off, never) →
/// Never, "1" (on, always) → Always, unset or "auto" → Auto; anything else is an error
/// (core/config.h environment::dnnl_primitives), thrown by the first op that consults the mode.
/// Sanitizers (measured with oneDNN 3.13): under ASan+UBSan the primitive path runs cleanly (only
/// the OpenCL ICD loader's and SYCL runtime's one-time allocations are suppressed for LSan, see
/// dnnl_engine.cpp). Under TSan, primitives executed from one thread are clean apart from the
/// execution-context bookkeeping that oneDNN allocates on the SYCL runtime's thread (suppressed
/// precisely, Note [SYCL execution contexts under TSan] in dnnl_engine.cpp), but when several
/// user threads execute primitives and exit, TSan reports races inside the uninstrumented libtbb
/// that oneDNN's SYCL CPU runtime uses (tbb::detail::r1::market::unregister_and_destroy_client) —
/// the same blindness as Note [TSan and TBB] in core/threading.cpp. So a TSan build starts in
/// Never when STRATA_DNNL_PRIMITIVES is unset (explicit, not silent: tests that force Always still
/// run the primitive path single-threaded there; the multi-threaded primitive test is skipped with
/// a message), while Release and ASan trees test both paths.

#include <oneapi/dnnl/dnnl.hpp>

#include "core/config.h"

namespace strata::ops::cpu {

using strata::DnnlPrimitives;  // Auto, Always, Never (core/config.h, where the variable is parsed)

/// The current mode (initialized from STRATA_DNNL_PRIMITIVES on first use).
DnnlPrimitives dnnl_primitives_mode();
/// Overrides the mode process-wide (tests); returns the previous one.
DnnlPrimitives set_dnnl_primitives_mode(DnnlPrimitives mode);

/// Sets the primitives mode until destroyed, then restores the previous one.
class DnnlPrimitivesGuard {
 public:
  explicit DnnlPrimitivesGuard(DnnlPrimitives mode) : previous_(set_dnnl_primitives_mode(mode)) {}
  ~DnnlPrimitivesGuard() { set_dnnl_primitives_mode(previous_); }
  DnnlPrimitivesGuard(const DnnlPrimitivesGuard&) = delete;
  DnnlPrimitivesGuard& operator=(const DnnlPrimitivesGuard&) = delete;

 private:
  DnnlPrimitives previous_;
};

/// The CPU engine, created on first use (sets OCL_ICD_FILENAMES first; see the Note).
const dnnl::engine& dnnl_engine();
/// Executes `p` on the process-wide stream (a SYCL in-order queue, created on first use and never
/// destroyed) and waits for it; executions from several threads are serialized.
void dnnl_execute(const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args);

/// Wraps `ptr` (not owned; must stay valid and pinned while used) as a memory of `md`.
dnnl::memory dnnl_wrap(const dnnl::memory::desc& md, void* ptr);

}  // namespace strata::ops::cpu
