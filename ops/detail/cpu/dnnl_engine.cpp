#include "ops/detail/cpu/dnnl_engine.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "core/config.h"

namespace strata::ops::cpu {

namespace {

DnnlPrimitives mode_from_env() {
#if defined(__SANITIZE_THREAD__)
  // Note [When Strata uses oneDNN primitives]: TSan trees default to the own kernels.
  return environment::dnnl_primitives().value_or(DnnlPrimitives::Never);
#else
  return environment::dnnl_primitives().value_or(DnnlPrimitives::Auto);
#endif
}

std::atomic<DnnlPrimitives>& mode_ref() {
  static std::atomic<DnnlPrimitives> mode{mode_from_env()};
  return mode;
}

}  // namespace

DnnlPrimitives dnnl_primitives_mode() { return mode_ref().load(std::memory_order_relaxed); }

DnnlPrimitives set_dnnl_primitives_mode(DnnlPrimitives mode) {
  return mode_ref().exchange(mode, std::memory_order_relaxed);
}

const dnnl::engine& dnnl_engine() {
  static const dnnl::engine engine = [] {
    // The ICD loader reads OCL_ICD_FILENAMES when the SYCL runtime first enumerates platforms,
    // which happens inside the engine's creation. Never overrides a user's setting.
    const std::string icd = std::string(STRATA_DNNL_LIBRARY_DIR) + "/libintelocl.so";
    setenv("OCL_ICD_FILENAMES", icd.c_str(), 0);
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return engine;
}

namespace {
// One process-wide stream, never destroyed: destroying a SYCL stream during exit (static or
// thread_local destructors) races the SYCL runtime's own cleanup thread (seen by TSan), and a
// static pointer keeps it reachable for LSan. Executions are serialized on it (each primitive
// is internally parallel).
struct SharedStream {
  std::mutex mutex;
  dnnl::stream* stream = new dnnl::stream(dnnl_engine());
};
SharedStream& shared_stream() {
  static SharedStream* s = new SharedStream;
  return *s;
}
}  // namespace

void dnnl_execute(const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args) {
  SharedStream& s = shared_stream();
  std::lock_guard lock(s.mutex);
  p.execute(*s.stream, args);
  s.stream->wait();
}

dnnl::memory dnnl_wrap(const dnnl::memory::desc& md, void* ptr) { return dnnl::memory(md, dnnl_engine(), ptr); }

}  // namespace strata::ops::cpu

#if defined(__SANITIZE_THREAD__)
// Note [SYCL execution contexts under TSan]
// A primitive executed through the SYCL runtime runs on the runtime's own host thread, which
// allocates the execution context's scratchpad bookkeeping (memory_tracking::registry_t grantors);
// `dnnl_execute` frees it on the calling thread after `stream::wait()`. The wait synchronizes
// inside the uninstrumented SYCL/Unified Runtime libraries, so TSan sees the allocation and the
// delete unordered and reports a race intermittently (about one run in two of the ops suite).
// Exactly these two oneDNN-internal sites are suppressed; races on Strata's buffers, or anywhere
// else in oneDNN, are still reported.
extern "C" const char* __tsan_default_suppressions() {
  return "race:dnnl::impl::exec_ctx_impl_t::~exec_ctx_impl_t\n"
         "race:dnnl::impl::memory_tracking::registry_t::create_grantor\n";
}
#endif

#if defined(__SANITIZE_ADDRESS__)
// Note [Third-party leaks under LSan]
// Creating the engine makes libOpenCL's ICD loader register Intel's CPU runtime in a heap record
// it never frees (khrIcdVendorAdd, ~1.3 KB once per process), and the SYCL runtime keeps its
// Unified Runtime queue/event handles (ur::opencl::urQueueCreate / createUREvent, a few hundred
// bytes: one queue per thread that ran a primitive) for its own deferred shutdown. None of it is
// Strata's memory and none of it grows with use, so ASan builds suppress exactly those third-party
// allocation sites through LSan's built-in hook; every Strata allocation stays checked.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:khrIcdVendorAdd\nleak:ur::opencl::urQueueCreate\nleak:ur::opencl::createUREvent\n";
}
#endif
