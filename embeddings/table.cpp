#include "embeddings/table.h"

#include <cstring>

#include "core/error.h"
#include "core/text.h"

namespace strata::emb {

std::size_t elem_size(ElemType t) { return t == ElemType::F32 ? 4 : 2; }

const char* elem_name(ElemType t) { return t == ElemType::F32 ? "f32" : "bf16"; }

ElemType parse_elem_type(std::string_view text) {
  if (text == "f32" || text == "float32" || text == "float") return ElemType::F32;
  if (text == "bf16" || text == "bfloat16") return ElemType::BF16;
  STRATA_FAIL("embedding element type ", quote_field(text), " is not supported; expected f32 or bf16");
}

Table::Table(int64_t nvectors, int64_t featuresize, ElemType type, TableMemory memory)
    : memory_(memory),
      nvectors_(nvectors),
      featuresize_(featuresize),
      elem_type_(type),
      row_bytes_(static_cast<std::size_t>(featuresize > 0 ? featuresize : 0) * elem_size(type)) {
  STRATA_CHECK(nvectors > 0, "embedding table: nvectors must be positive, got ", nvectors);
  STRATA_CHECK(featuresize > 0, "embedding table: featuresize must be positive, got ", featuresize);
}

Table::~Table() = default;

void Table::charge_slow_read(std::size_t bytes) {
  if (bytes == 0) return;
  slow_read_.fetch_add(bytes, std::memory_order_relaxed);
  if (memory_.throttle != nullptr && memory_.throttle->enabled())
    memory_.throttle->charge_read(bytes, memory::SlowTierAccess::Random);
}

void Table::charge_slow_write(std::size_t bytes) {
  if (bytes == 0) return;
  slow_written_.fetch_add(bytes, std::memory_order_relaxed);
  if (memory_.throttle != nullptr && memory_.throttle->enabled())
    memory_.throttle->charge_write(bytes, memory::SlowTierAccess::Random);
}

TableCounters Table::counters() const {
  return {slow_read_.load(std::memory_order_relaxed), slow_written_.load(std::memory_order_relaxed)};
}

void Table::reset_counters() {
  slow_read_.store(0, std::memory_order_relaxed);
  slow_written_.store(0, std::memory_order_relaxed);
}

void Table::check_row(int64_t row) const {
  STRATA_CHECK(row >= 0 && row < nvectors_, "embedding ", name_, ": row ", row, " is out of range [0, ", nvectors_,
               ")");
}

namespace {

void load_row(const std::byte* p, ElemType t, int64_t n, float* dst) {
  if (t == ElemType::F32) {
    std::memcpy(dst, p, static_cast<std::size_t>(n) * sizeof(float));
    return;
  }
  const auto* b = reinterpret_cast<const uint16_t*>(p);
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(BFloat16::from_bits(b[i]));
}

void store_row(std::byte* p, ElemType t, int64_t n, const float* src) {
  if (t == ElemType::F32) {
    std::memcpy(p, src, static_cast<std::size_t>(n) * sizeof(float));
    return;
  }
  auto* b = reinterpret_cast<uint16_t*>(p);
  for (int64_t i = 0; i < n; ++i) b[i] = BFloat16::round_from_float(src[i]);
}

}  // namespace

void Table::read_row(int64_t row, float* dst) {
  check_row(row);
  const std::byte* p = rowpointer(row, AccessContext::Read);
  if (in_slow(p)) charge_slow_read(row_bytes_);
  load_row(p, elem_type_, featuresize_, dst);
}

void Table::write_row(int64_t row, const float* src) {
  check_row(row);
  std::byte* p = rowpointer(row, AccessContext::Update);
  if (in_slow(p)) charge_slow_write(row_bytes_);
  store_row(p, elem_type_, featuresize_, src);
}

void Table::copy_to(float* dst) {
  for (int64_t r = 0; r < nvectors_; ++r) read_row(r, dst + r * featuresize_);
}

void Table::copy_from(const float* src) {
  for (int64_t r = 0; r < nvectors_; ++r) write_row(r, src + r * featuresize_);
}

SimpleTable::SimpleTable(int64_t nvectors, int64_t featuresize, ElemType type, TableMemory memory)
    : Table(nvectors, featuresize, type, memory) {
  STRATA_CHECK(memory.heap != nullptr, "SimpleTable: no heap given for its rows");
  const std::size_t bytes = static_cast<std::size_t>(nvectors) * row_bytes();
  region_ = memory.heap->allocate(bytes, nullptr);
  STRATA_CHECK(region_ != nullptr, "SimpleTable: the ", memory.heap->name(), " heap has no room for ", nvectors,
               " rows of ", row_bytes(), " bytes (", bytes, " bytes asked, largest free block ",
               memory.heap->largest_free(), " of ", memory.heap->capacity(), ")");
  base_ = static_cast<std::byte*>(region_->data());
  slow_ = memory.heap->tier() == memory::Tier::Slow;
  std::memset(base_, 0, bytes);
}

SimpleTable::~SimpleTable() {
  if (region_ != nullptr) memory_.heap->free(region_);
}

}  // namespace strata::emb
