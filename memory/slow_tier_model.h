#pragma once
/// @file
/// The slow-tier model: makes a DRAM-backed "slow" heap behave like Optane persistent memory.
///
/// Note [Slow-tier model]
/// When no real PMem/CXL device is present the slow heap lives in DRAM, so moving data there would
/// cost nothing and every tiering decision would look free. A `SlowTierModel` states how slow the
/// slow tier should be (read and write bandwidth, access latency), and a `SlowTierThrottle` makes
/// each transfer to or from the slow tier take at least the time the model predicts:
///
///  * Bandwidth is a shared virtual clock per direction (one for reads, one for writes). A transfer
///    of b bytes reserves the interval [max(clock, now), max(clock, now) + b / bandwidth) with one
///    compare-and-swap and then waits until the end of its interval plus the model's latency. So
///    the aggregate throughput of all threads in one direction never exceeds the model's bandwidth
///    (there is no burst credit: an idle clock restarts at "now"), and concurrent transfers queue
///    behind each other as they would on one device.
///  * Latency is per call and overlaps between threads (it is a delay, not channel occupancy).
///  * The reservation is taken *before* the real transfer and waited for *after* it, so the real
///    copy time counts toward the modeled time instead of being added to it
///    (`reserve_*` / `complete`; `charge_*` is both in one call).
///  * No lock is held while waiting. Waits longer than ~50 µs sleep, shorter ones spin.
///  * Random row accesses (embedding rows: Access::Random) are charged at the model's random-access
///    bandwidths when they are set. Without them a random 256-byte row would cost as little as a
///    streamed one, and on a machine with few cores, whose random DRAM reads are bound by latency
///    rather than by the bus, the modeled slow tier would then be *faster* than DRAM for rows
///    (development VM: 9 GB/s modeled against 5-7 GB/s of measured DRAM gathers). The defaults scale
///    the dissertation's PM/DRAM ratio for random rows (Table 5.3: 256-byte ensemble lookups, PM
///    25.0 GB/s vs DRAM 103.6 GB/s) to this machine's measured random-gather bandwidth of DRAM at
///    the same thread count, and random writes by the write ratio (Figure 2.2b: PM writes of 256 B
///    and more run at the same bandwidth random or sequential), capped by the sequential rates.
///
/// Defaults come from the dissertation's Optane measurements (see SlowTierModel::defaults) scaled to
/// the measured DRAM copy bandwidth of the machine, so the fast/slow *ratio* is the Optane one. Every
/// report names the mode via SlowTierModel::describe().

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace strata::memory {

/// Bandwidths and latency of the slow tier, or "off" (real device, or no throttling).
struct SlowTierModel {
  /// Slow-tier read bandwidth in GB/s (1 GB = 1e9 bytes). Must be > 0 when enabled.
  double read_gbps = 0.0;
  /// Slow-tier write bandwidth in GB/s. Must be > 0 when enabled.
  double write_gbps = 0.0;
  /// Access latency charged once per transfer, in ns. Must be >= 0.
  double latency_ns = 0.0;
  /// Bandwidths for random row accesses (Access::Random), in GB/s; 0: as the sequential ones.
  double random_read_gbps = 0.0;
  double random_write_gbps = 0.0;
  /// False: the slow tier is a real device (or the model is switched off); nothing is charged.
  bool enabled = false;
  /// The measured DRAM copy bandwidth the defaults were scaled to (0 if set by hand); only reported.
  double reference_dram_gbps = 0.0;
  /// The measured DRAM random-gather bandwidth the random-access defaults were scaled to (0: none).
  double reference_dram_gather_gbps = 0.0;

  /// Optane-like model scaled to this machine: read and write bandwidth are the dissertation's
  /// Optane/DRAM bandwidth ratios times `measured_dram_gbps` (use measure_dram_copy_gbps()), the
  /// latency is its Optane/DRAM latency ratio times a nominal DRAM latency. Throws strata::Error if
  /// `measured_dram_gbps` is not a positive finite number.
  /// `measured_dram_gather_gbps` > 0 (use measure_dram_gather_gbps()) also sets the random-access
  /// bandwidths: kOptaneRandomReadRatio and kOptaneWriteRatio times it, at most the sequential ones.
  static SlowTierModel defaults(double measured_dram_gbps, double measured_dram_gather_gbps = 0.0);
  /// A model with explicit parameters (validated; see validate()).
  static SlowTierModel custom(double read_gbps, double write_gbps, double latency_ns);
  /// No model: transfers are not throttled.
  static SlowTierModel off();

  /// Throws strata::Error naming the bad field if enabled with a non-positive or non-finite
  /// bandwidth, a negative or non-finite random-access bandwidth, or a negative or non-finite latency.
  void validate() const;
  /// One line for reports: "modeled slow tier: read X GB/s, write Y GB/s, latency Z ns (Optane
  /// ratios vs measured DRAM W GB/s)" or "real device / model off".
  std::string describe() const;

  /// Optane-to-DRAM ratios used by defaults() (documented with their sources in the .cpp).
  static constexpr double kOptaneReadRatio = 30.0 / 110.0;
  static constexpr double kOptaneWriteRatio = 11.0 / 110.0;
  static constexpr double kOptaneLatencyRatio = 3.0;
  /// PM/DRAM bandwidth of random 256-byte row reads (dissertation Table 5.3).
  static constexpr double kOptaneRandomReadRatio = 25.0 / 103.6;
  /// Nominal idle load latency of server DRAM that kOptaneLatencyRatio multiplies, in ns.
  static constexpr double kNominalDramLatencyNs = 100.0;
};

/// Counters of a SlowTierThrottle (a snapshot; all fields are totals since construction or reset).
struct SlowTierCounters {
  std::uint64_t bytes_read = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t reads = 0;     ///< number of read charges
  std::uint64_t writes = 0;    ///< number of write charges
  std::uint64_t stall_ns = 0;  ///< wall time callers spent delayed by the throttle, summed over threads
};

/// How a transfer touches the slow tier: streamed (tensors, tape tiles) or as random rows.
enum class SlowTierAccess : std::uint8_t { Sequential, Random };

/// Thread-safe enforcement of a SlowTierModel (Note [Slow-tier model]).
class SlowTierThrottle {
 public:
  /// A reserved slot on one direction's virtual clock, to be passed to complete().
  struct Reservation {
    std::int64_t deadline_ns = 0;  ///< steady_clock time (ns) when the modeled transfer ends
    bool active = false;           ///< false when the model is off or nothing was reserved
  };

  /// Validates the model (strata::Error on bad parameters).
  explicit SlowTierThrottle(const SlowTierModel& model = SlowTierModel::off());
  SlowTierThrottle(const SlowTierThrottle&) = delete;
  SlowTierThrottle& operator=(const SlowTierThrottle&) = delete;

  /// The model in force. A reference stays valid for the throttle's lifetime (a replaced model is
  /// retired, not freed), but after set_model() it is the old one.
  const SlowTierModel& model() const { return *model_.load(std::memory_order_acquire); }
  bool enabled() const { return model().enabled; }
  /// Replaces the model (validated first; strata::Error on bad parameters). Charges made after it
  /// use the new one; the virtual clocks and counters carry on. One slow tier has one model: the
  /// process's tiered memory calls it when a component names the device (Note [One tiered memory
  /// per process], embeddings/dlrm.h).
  void set_model(const SlowTierModel& model);

  /// Charges a read of `bytes` from the slow tier: returns no earlier than the model allows.
  void charge_read(std::size_t bytes, SlowTierAccess access = SlowTierAccess::Sequential) {
    complete(reserve_read(bytes, access));
  }
  /// Charges a write of `bytes` to the slow tier.
  void charge_write(std::size_t bytes, SlowTierAccess access = SlowTierAccess::Sequential) {
    complete(reserve_write(bytes, access));
  }

  /// Two-phase charging: reserve before the transfer, complete() after it.
  Reservation reserve_read(std::size_t bytes, SlowTierAccess access = SlowTierAccess::Sequential);
  Reservation reserve_write(std::size_t bytes, SlowTierAccess access = SlowTierAccess::Sequential);
  /// Waits until the reservation's deadline (spinning for short waits, sleeping for long ones).
  void complete(const Reservation& r);

  SlowTierCounters counters() const;
  /// Zeroes the counters (the virtual clocks are kept).
  void reset_counters();

 private:
  /// `m` is the one model the caller read (set_model may replace it meanwhile).
  Reservation reserve(const SlowTierModel& m, std::atomic<std::int64_t>& clock_ticks, double gbps, std::size_t bytes);

  std::atomic<const SlowTierModel*> model_;
  std::mutex models_mutex_;
  std::vector<std::unique_ptr<const SlowTierModel>> models_;  // every model set, the current last
  // Virtual clocks in 1/16 ns since epoch_ns_ (sub-ns so that tiny transfers do not round away).
  alignas(64) std::atomic<std::int64_t> read_clock_ticks_{0};
  alignas(64) std::atomic<std::int64_t> write_clock_ticks_{0};
  alignas(64) std::atomic<std::uint64_t> bytes_read_{0};
  std::atomic<std::uint64_t> bytes_written_{0};
  std::atomic<std::uint64_t> reads_{0};
  std::atomic<std::uint64_t> writes_{0};
  std::atomic<std::uint64_t> stall_ns_{0};
  std::int64_t epoch_ns_ = 0;
};

}  // namespace strata::memory
