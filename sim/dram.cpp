#include "sim/detail/dram.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace strata::sim::detail {

Dram::Dram(const DramConfig& c) : config_(c) {
  STRATA_CHECK(std::isfinite(c.bandwidth_gbps) && c.bandwidth_gbps > 0,
               "sim::Dram: bandwidth_gbps must be a positive number, got ", c.bandwidth_gbps);
  STRATA_CHECK(std::isfinite(c.clock_ghz) && c.clock_ghz > 0, "sim::Dram: clock_ghz must be a positive number, got ",
               c.clock_ghz);
  bpc_ = c.bytes_per_cycle();
}

uint64_t Dram::ceil_cycle(double t) {
  // 9.6 bytes per cycle is not exact in binary: 96 bytes must take 10 cycles, not 11.
  return static_cast<uint64_t>(std::ceil(t - 1e-9));
}

double Dram::transfer(uint64_t cycle, uint64_t bytes) {
  const double start = std::max(static_cast<double>(cycle), free_at_);
  const double t = static_cast<double>(bytes) / bpc_;
  free_at_ = start + t;
  busy_ += t;
  return free_at_;
}

uint64_t Dram::read(uint64_t cycle, uint64_t bytes) {
  ++reads_;
  bytes_read_ += bytes;
  return ceil_cycle(transfer(cycle, bytes)) + config_.latency;
}

uint64_t Dram::write(uint64_t cycle, uint64_t bytes) {
  ++writes_;
  bytes_written_ += bytes;
  return ceil_cycle(transfer(cycle, bytes));
}

}  // namespace strata::sim::detail
