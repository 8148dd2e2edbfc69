#include "memory/slow_tier_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/error.h"

namespace strata::memory {

// Sources of the Optane ratios (Hildebrand, "A Framework for Managing Heterogeneous Memory for
// Large Scale Machine Learning Workloads", UC Davis 2022; seeds/001_9a9f15afb102b8ad.txt; page
// numbers are section start pages from its table of contents, the text has no page breaks):
//  * PM read 30 GB/s: §2.3.3 "PM Performance Results" (pp. 10-15), Figure 2.2a: sequential read
//    bandwidth of six interleaved 512 GiB Optane DIMMs "scales ... up to a maximum 30 GB/s".
//  * PM write 11 GB/s: §2.3.3, Figure 2.2b (non-temporal stores): "In summary, with this system we
//    can achieve just over 30 GB/s read and 11 GB/s write to PM."
//  * DRAM 110 GB/s: §5.3.3 (p. 107 ff.) on the same six-channel Cascade Lake platform: "close to the
//    theoretical bandwidth of 110 GB/s achieved in Figure 3.3" (Figure 3.3, §3.2.2, pp. 33-36, the
//    DRAM read/write/copy bandwidth figure).
//  * Latency 3x DRAM: §1.2 (pp. 2-5) "load/store latency is on the order of 3x higher than DRAM with
//    60% lower bandwidth", repeated in §2.1 (p. 8).
// So read = 30/110 = 0.27 and write = 11/110 = 0.10 of DRAM bandwidth, latency = 3 x DRAM latency.
// The reference we scale is measure_dram_copy_gbps(), counted like STREAM (bytes read + bytes
// written per second), i.e. the bus traffic a copy sustains, which is the quantity the 110 GB/s
// describes. The DRAM latency is not measured; kNominalDramLatencyNs (100 ns, a typical idle load
// latency of server DDR4/DDR5) stands in for it, giving 300 ns.

namespace {

constexpr std::int64_t kTicksPerNs = 16;  // virtual clocks count 1/16 ns: 18 years of range

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

SlowTierModel SlowTierModel::defaults(double measured_dram_gbps, double measured_dram_gather_gbps) {
  STRATA_CHECK(std::isfinite(measured_dram_gbps) && measured_dram_gbps > 0,
               "SlowTierModel::defaults: the measured DRAM bandwidth must be a positive number of "
               "GB/s, got ",
               measured_dram_gbps);
  SlowTierModel m;
  m.read_gbps = measured_dram_gbps * kOptaneReadRatio;
  m.write_gbps = measured_dram_gbps * kOptaneWriteRatio;
  m.latency_ns = kNominalDramLatencyNs * kOptaneLatencyRatio;
  m.enabled = true;
  m.reference_dram_gbps = measured_dram_gbps;
  STRATA_CHECK(std::isfinite(measured_dram_gather_gbps) && measured_dram_gather_gbps >= 0,
               "SlowTierModel::defaults: the measured DRAM gather bandwidth must be a non-negative number "
               "of GB/s (0: none), got ",
               measured_dram_gather_gbps);
  if (measured_dram_gather_gbps > 0) {
    m.random_read_gbps = std::min(m.read_gbps, measured_dram_gather_gbps * kOptaneRandomReadRatio);
    m.random_write_gbps = std::min(m.write_gbps, measured_dram_gather_gbps * kOptaneWriteRatio);
    m.reference_dram_gather_gbps = measured_dram_gather_gbps;
  }
  return m;
}

SlowTierModel SlowTierModel::custom(double read_gbps, double write_gbps, double latency_ns) {
  SlowTierModel m;
  m.read_gbps = read_gbps;
  m.write_gbps = write_gbps;
  m.latency_ns = latency_ns;
  m.enabled = true;
  m.validate();
  return m;
}

SlowTierModel SlowTierModel::off() { return SlowTierModel{}; }

void SlowTierModel::validate() const {
  if (!enabled) return;
  STRATA_CHECK(std::isfinite(read_gbps) && read_gbps > 0,
               "SlowTierModel: read bandwidth must be a positive number of GB/s, got ", read_gbps);
  STRATA_CHECK(std::isfinite(write_gbps) && write_gbps > 0,
               "SlowTierModel: write bandwidth must be a positive number of GB/s, got ", write_gbps);
  STRATA_CHECK(std::isfinite(latency_ns) && latency_ns >= 0,
               "SlowTierModel: latency must be a non-negative number of ns, got ", latency_ns);
  STRATA_CHECK(std::isfinite(random_read_gbps) && random_read_gbps >= 0,
               "SlowTierModel: random-read bandwidth must be a non-negative number of GB/s (0: as reads), got ",
               random_read_gbps);
  STRATA_CHECK(std::isfinite(random_write_gbps) && random_write_gbps >= 0,
               "SlowTierModel: random-write bandwidth must be a non-negative number of GB/s (0: as writes), got ",
               random_write_gbps);
}

std::string SlowTierModel::describe() const {
  if (!enabled) return "real device / model off";
  std::string s = "modeled slow tier: read " + fmt(read_gbps) + " GB/s, write " + fmt(write_gbps) + " GB/s, latency " +
                  fmt(latency_ns) + " ns";
  if (reference_dram_gbps > 0)
    s += " (Optane ratios vs measured DRAM " + fmt(reference_dram_gbps) + " GB/s)";
  else
    s += " (set explicitly)";
  if (random_read_gbps > 0 || random_write_gbps > 0) {
    s += "; random rows: read " + fmt(random_read_gbps > 0 ? random_read_gbps : read_gbps) + " GB/s, write " +
         fmt(random_write_gbps > 0 ? random_write_gbps : write_gbps) + " GB/s";
    if (reference_dram_gather_gbps > 0) s += " (vs measured DRAM gather " + fmt(reference_dram_gather_gbps) + " GB/s)";
  }
  return s;
}

SlowTierThrottle::SlowTierThrottle(const SlowTierModel& model) : model_(nullptr), epoch_ns_(now_ns()) {
  set_model(model);
}

void SlowTierThrottle::set_model(const SlowTierModel& model) {
  model.validate();
  std::lock_guard<std::mutex> lock(models_mutex_);
  models_.push_back(std::make_unique<const SlowTierModel>(model));
  model_.store(models_.back().get(), std::memory_order_release);
}

SlowTierThrottle::Reservation SlowTierThrottle::reserve(const SlowTierModel& m, std::atomic<std::int64_t>& clock,
                                                        double gbps, std::size_t bytes) {
  if (!m.enabled || bytes == 0) return {};
  // 1 GB/s is 1 byte/ns, so the transfer occupies bytes / gbps ns of its direction's clock.
  const double cost_ticks_d = static_cast<double>(bytes) * kTicksPerNs / gbps;
  const std::int64_t cost = static_cast<std::int64_t>(std::min(std::ceil(cost_ticks_d), 4e18));
  const std::int64_t now = (now_ns() - epoch_ns_) * kTicksPerNs;
  std::int64_t old = clock.load(std::memory_order_relaxed);
  std::int64_t end;
  do {
    end = std::max(old, now) + cost;  // an idle clock restarts at "now": no burst credit
  } while (!clock.compare_exchange_weak(old, end, std::memory_order_relaxed));
  Reservation r;
  r.deadline_ns = epoch_ns_ + (end + kTicksPerNs - 1) / kTicksPerNs + static_cast<std::int64_t>(m.latency_ns);
  r.active = true;
  return r;
}

SlowTierThrottle::Reservation SlowTierThrottle::reserve_read(std::size_t bytes, SlowTierAccess access) {
  bytes_read_.fetch_add(bytes, std::memory_order_relaxed);
  reads_.fetch_add(1, std::memory_order_relaxed);
  const SlowTierModel& m = model();
  const bool random = access == SlowTierAccess::Random && m.random_read_gbps > 0;
  return reserve(m, read_clock_ticks_, random ? m.random_read_gbps : m.read_gbps, bytes);
}

SlowTierThrottle::Reservation SlowTierThrottle::reserve_write(std::size_t bytes, SlowTierAccess access) {
  bytes_written_.fetch_add(bytes, std::memory_order_relaxed);
  writes_.fetch_add(1, std::memory_order_relaxed);
  const SlowTierModel& m = model();
  const bool random = access == SlowTierAccess::Random && m.random_write_gbps > 0;
  return reserve(m, write_clock_ticks_, random ? m.random_write_gbps : m.write_gbps, bytes);
}

void SlowTierThrottle::complete(const Reservation& r) {
  if (!r.active) return;
  const std::int64_t start = now_ns();
  if (start >= r.deadline_ns) return;
  // Long waits sleep (the kernel may overshoot by its timer slack, ~50 µs, so wake early), the
  // remainder spins.
  constexpr std::int64_t kSleepAboveNs = 100'000;
  constexpr std::int64_t kWakeEarlyNs = 70'000;
  std::int64_t t = start;
  while (r.deadline_ns - t > kSleepAboveNs) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(r.deadline_ns - t - kWakeEarlyNs));
    t = now_ns();
  }
  while (t < r.deadline_ns) {
    cpu_relax();
    t = now_ns();
  }
  stall_ns_.fetch_add(static_cast<std::uint64_t>(t - start), std::memory_order_relaxed);
}

SlowTierCounters SlowTierThrottle::counters() const {
  SlowTierCounters c;
  c.bytes_read = bytes_read_.load(std::memory_order_relaxed);
  c.bytes_written = bytes_written_.load(std::memory_order_relaxed);
  c.reads = reads_.load(std::memory_order_relaxed);
  c.writes = writes_.load(std::memory_order_relaxed);
  c.stall_ns = stall_ns_.load(std::memory_order_relaxed);
  return c;
}

void SlowTierThrottle::reset_counters() {
  bytes_read_.store(0, std::memory_order_relaxed);
  bytes_written_.store(0, std::memory_order_relaxed);
  reads_.store(0, std::memory_order_relaxed);
  writes_.store(0, std::memory_order_relaxed);
  stall_ns_.store(0, std::memory_order_relaxed);
}

}  // namespace strata::memory
