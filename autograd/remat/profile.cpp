#include "autograd/remat/profile.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "core/factories.h"
#include "memory/tiered_memory.h"

namespace strata::remat {

OpProfiler::OpProfiler(int repeats) : repeats_(repeats) {
  STRATA_CHECK(repeats >= 1, "OpProfiler: repeats must be at least 1, got ", repeats);
}

double OpProfiler::time(const std::string& signature, const std::function<void()>& fn) {
  STRATA_CHECK(!signature.empty(), "OpProfiler::time: the signature is empty (expected op name and shapes)");
  if (auto it = times_.find(signature); it != times_.end()) return it->second;
  STRATA_CHECK(static_cast<bool>(fn), "OpProfiler::time: the closure to time for \"", signature, "\" is empty");
  fn();  // warm-up
  std::vector<double> runs;
  for (int r = 0; r < repeats_; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(runs.begin(), runs.begin() + runs.size() / 2, runs.end());
  ++measurements_;
  return times_[signature] = runs[runs.size() / 2];
}

namespace {
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

CopyBandwidth copy_bandwidth(std::size_t probe_bytes) {
  STRATA_CHECK(probe_bytes > 0, "copy_bandwidth: the probe size is 0 bytes");
  Allocator& allocator = default_allocator();
  auto* tiered = dynamic_cast<memory::TieredMemory*>(&allocator);
  if (tiered == nullptr && allocator.name() == "tiered") tiered = &memory::tiered_memory();
  STRATA_CHECK(tiered != nullptr, "copy_bandwidth: the default allocator is \"", std::string(allocator.name()),
               "\", expected the tiered memory (\"tiered\"; unset STRATA_MEMORY=dram)");
  const memory::SlowTierModel& model = tiered->throttle().model();
  Tensor probe = zeros({static_cast<int64_t>((probe_bytes + 3) / 4)}, {DType::f32, nullptr});
  const auto bytes = static_cast<double>(probe.nbytes());
  double best_out = 0, best_in = 0, best_cpu = 0;
  for (int r = 0; r < 3; ++r) {
    // The process's CPU time over a move the caller waits for (on a condition variable) is the
    // mover's: what its copy takes from the compute threads when they run (the throttle of the
    // slow-tier model sleeps; only the copy itself counts).
    const double cpu0 = process_cpu_seconds();
    memory::MoveHandle out = tiered->evict_async(probe.storage());
    out.wait();
    if (tiered->in_fast(probe.storage())) continue;  // the move did not happen: nothing timed
    memory::MoveHandle in = tiered->prefetch_async(probe.storage());
    in.wait();
    const double cpu = process_cpu_seconds() - cpu0;
    const double t_out = std::chrono::duration<double>(out.duration()).count();
    const double t_in = std::chrono::duration<double>(in.duration()).count();
    if (t_out > 0) best_out = std::max(best_out, bytes / t_out);
    if (t_in > 0 && tiered->in_fast(probe.storage())) best_in = std::max(best_in, bytes / t_in);
    if (cpu > 0 && (best_cpu == 0 || cpu < best_cpu)) best_cpu = cpu;
  }
  STRATA_CHECK(best_out > 0 && best_in > 0, "copy_bandwidth: could not time the tiered memory's moves of a ",
               probe.nbytes(), "-byte probe");
  if (model.enabled) return {model.write_gbps * 1e9, model.read_gbps * 1e9, best_cpu / bytes};
  return {best_out, best_in, best_cpu / bytes};
}

}  // namespace strata::remat
