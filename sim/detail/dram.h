#pragma once
/// @file
/// Internal: the simulated accelerator's DRAM (TapeFlow Table III: DDR4, 19.2 GB/s): one channel
/// with a bandwidth limit and a fixed access latency. Requests queue on the channel in arrival
/// order, so a streaming kernel saturates at the configured bandwidth. DramConfig is public
/// (sim/machine.h); the model is not part of the public API.
///
/// Note [Sim DRAM timing]
/// The accelerator runs at 2 GHz (Table III's clock), so 19.2 GB/s is 9.6 bytes per cycle. A
/// request of b bytes arriving at cycle t starts its transfer at s = max(t, channel free) and holds
/// the channel for b / bytes_per_cycle (fractional) cycles. A read's data is back at
/// s + b / bytes_per_cycle + latency; a write (cache writeback, FWD-S stream) is posted: it is done
/// for the requester when its transfer ends. The latency, 100 cycles (50 ns), is our choice (the
/// paper gives none): a typical DDR4 load-to-use time at this clock. Requests must arrive in
/// non-decreasing cycle order (the machine simulates forward in time).

#include <cstdint>

#include "sim/machine.h"

namespace strata::sim::detail {

class Dram {
 public:
  /// Throws strata::Error for a non-positive bandwidth or clock.
  explicit Dram(const DramConfig& config);

  const DramConfig& config() const { return config_; }

  /// Queues a read of `bytes` arriving at `cycle`; returns the cycle its data is available.
  uint64_t read(uint64_t cycle, uint64_t bytes);
  /// Queues a posted write of `bytes` arriving at `cycle`; returns the cycle its transfer ends.
  uint64_t write(uint64_t cycle, uint64_t bytes);

  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t bytes_written() const { return bytes_written_; }
  uint64_t reads() const { return reads_; }
  uint64_t writes() const { return writes_; }
  /// Cycles the channel spent transferring (sum of b / bytes_per_cycle).
  double busy_cycles() const { return busy_; }
  /// The first whole cycle at or after fractional cycle `t` (tolerating rounding in the divisions).
  static uint64_t ceil_cycle(double t);
  /// The cycle at which the channel finishes everything queued so far.
  double channel_free() const { return free_at_; }

 private:
  double transfer(uint64_t cycle, uint64_t bytes);

  DramConfig config_;
  double bpc_ = 0;
  double free_at_ = 0;
  double busy_ = 0;
  uint64_t bytes_read_ = 0, bytes_written_ = 0, reads_ = 0, writes_ = 0;
};

}  // namespace strata::sim::detail
