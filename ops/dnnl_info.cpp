#include "ops/dnnl_info.h"

#include <oneapi/dnnl/dnnl.h>

#include <string>

namespace strata::ops {

namespace {
std::string runtime_name(unsigned runtime) {
  switch (runtime) {
    case DNNL_RUNTIME_NONE: return "NONE";
    case DNNL_RUNTIME_SEQ: return "SEQ";
    case DNNL_RUNTIME_OMP: return "OMP";
    case DNNL_RUNTIME_TBB: return "TBB";
    case DNNL_RUNTIME_THREADPOOL: return "THREADPOOL";
    case DNNL_RUNTIME_SYCL: return "SYCL";
    default: return "unknown(" + std::to_string(runtime) + ")";
  }
}
}  // namespace

DnnlInfo dnnl_info() {
  const dnnl_version_t* v = dnnl_version();
  DnnlInfo info;
  info.major = v->major;
  info.minor = v->minor;
  info.patch = v->patch;
  info.cpu_runtime = runtime_name(v->cpu_runtime);
  info.header_version = std::to_string(DNNL_VERSION_MAJOR) + "." + std::to_string(DNNL_VERSION_MINOR) + "." +
                        std::to_string(DNNL_VERSION_PATCH);
  info.library_dir = STRATA_DNNL_LIBRARY_DIR;
  return info;
}

std::string dnnl_summary() {
  const DnnlInfo i = dnnl_info();
  return "oneDNN " + std::to_string(i.major) + "." + std::to_string(i.minor) + "." + std::to_string(i.patch) +
         " (CPU runtime " + i.cpu_runtime + ")";
}

}  // namespace strata::ops
