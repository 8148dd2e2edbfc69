#include "memory/tiered_memory.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>

#include "core/error.h"
#include "core/text.h"
#include "memory/copy_engine.h"
#include "memory/dram_allocator.h"

namespace strata::memory {

namespace {

// Physical memory, or 8 GiB when the OS does not say (defaults only; checks use the real value).
std::size_t physical_memory() {
  const std::size_t phys = physical_memory_bytes();
  return phys > 0 ? phys : (8ull << 30);
}

const char* backend_name(PmBackend b) {
  switch (b) {
    case PmBackend::Auto: return "auto";
    case PmBackend::Memkind: return "memkind";
    case PmBackend::Mmap: return "mmap";
    case PmBackend::Numa: return "numa";
  }
  return "?";
}

// The Allocation of one tensor storage: an Object of the data manager.
class ObjectAllocation final : public Allocation {
 public:
  ObjectAllocation(TieredMemory& memory, Object* object) : memory_(memory), object_(object) {}
  ~ObjectAllocation() override { memory_.policy().unsafe_free(object_); }
  ObjectAllocation(const ObjectAllocation&) = delete;
  ObjectAllocation& operator=(const ObjectAllocation&) = delete;

  void* data() override { return object_->primary()->data(); }
  std::size_t nbytes() const override { return object_->size(); }
  void pin(AccessMode mode, std::size_t bytes) override {
    if (mode == AccessMode::Write) object_->pin_write();
    else object_->pin_read();
    // A kernel about to use an object that lives in the slow tier reads or writes it in place:
    // count and charge the bytes it touches.
    Region* primary = object_->primary();
    if (primary->heap()->tier() == Tier::Slow && bytes > 0) {
      MemoryStats& stats = memory_.manager().stats();
      if (mode == AccessMode::Write) {
        stats.on_direct_slow_write(bytes);
        memory_.throttle().charge_write(bytes);
      } else {
        stats.on_direct_slow_read(bytes);
        memory_.throttle().charge_read(bytes);
      }
    }
  }
  void use(AccessMode mode) override {
    if (mode == AccessMode::Write) memory_.policy().write_use(object_);
    else memory_.policy().read_use(object_);
  }
  void unpin(AccessMode mode) override {
    if (mode == AccessMode::Write) object_->unpin_write();
    else object_->unpin_read();
  }
  Object* object() const { return object_; }
  const TieredMemory* owner() const { return &memory_; }

 private:
  TieredMemory& memory_;
  Object* object_;
};

}  // namespace

double positive_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return 0;
  char* end = nullptr;
  const double g = std::strtod(v, &end);
  STRATA_CHECK(end != v && *end == '\0' && g > 0 && std::isfinite(g), name, ": expected a positive number, got ",
               quote_field(v));
  return g;
}

std::size_t parse_bytes(std::string_view text, const char* what) {
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  const std::size_t digits_begin = i;
  unsigned long long value = 0;
  bool overflow = false;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    overflow = overflow || __builtin_mul_overflow(value, 10ull, &value) ||
               __builtin_add_overflow(value, static_cast<unsigned long long>(text[i] - '0'), &value);
    ++i;
  }
  const bool has_digits = i > digits_begin;
  unsigned shift = 0;
  if (i < text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[i]))) {
      case 'K': shift = 10; ++i; break;
      case 'M': shift = 20; ++i; break;
      case 'G': shift = 30; ++i; break;
      case 'T': shift = 40; ++i; break;
      default: break;
    }
    if (shift > 0 && i < text.size() && (text[i] == 'i' || text[i] == 'I')) ++i;
    if (i < text.size() && (text[i] == 'B' || text[i] == 'b')) ++i;
  }
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  STRATA_CHECK(has_digits && i == text.size(), what, ": ", quote_field(text),
               " is not a byte count (expected e.g. 1048576, 512M, 8G)");
  STRATA_CHECK(!overflow && (shift == 0 || value <= (~0ull >> shift)), what, ": ", quote_field(text), " is too large");
  return static_cast<std::size_t>(value << shift);
}

std::size_t TieredConfig::default_slow_bytes(const std::string& dir) {
  // Twice the machine's memory, but never more than 90% of the free space in the directory
  // (growing past what the disk holds fails anyway: Note [Heaps grow on demand]).
  std::size_t bytes = physical_memory() * 2;
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) == 0) {
    const auto free_bytes = static_cast<std::size_t>(fs.f_bavail) * static_cast<std::size_t>(fs.f_frsize);
    bytes = std::min(bytes, free_bytes / 10 * 9);
  }
  return bytes;
}

TieredConfig TieredConfig::from_env() {
  using ModelMode = TieredConfig::ModelMode;
  TieredConfig c;
  const std::size_t phys = physical_memory();
  c.fast_bytes = phys / 2;
  c.fast_initial = kDefaultFastInitial;  // the default budget is a limit to grow to, not a mapping
  if (const char* v = std::getenv("STRATA_FAST_BYTES")) {
    c.fast_bytes = parse_bytes(v, "STRATA_FAST_BYTES");
    c.fast_initial = 0;
  }
  if (const char* v = std::getenv("STRATA_SLOW_DIR")) c.slow_dir = v;
  c.slow_bytes = default_slow_bytes(c.slow_dir);
  if (const char* v = std::getenv("STRATA_SLOW_BYTES")) c.slow_bytes = parse_bytes(v, "STRATA_SLOW_BYTES");
  if (const char* v = std::getenv("STRATA_SLOW_BACKEND")) {
    const std::string b = v;
    if (b == "auto") c.backend = PmBackend::Auto;
    else if (b == "memkind") c.backend = PmBackend::Memkind;
    else if (b == "mmap") c.backend = PmBackend::Mmap;
    else if (b == "numa") c.backend = PmBackend::Numa;
    else STRATA_CHECK(false, "STRATA_SLOW_BACKEND: unknown backend ", quote_field(b), " (expected auto, memkind, mmap or numa)");
  }
  if (const char* v = std::getenv("STRATA_SLOW_MODEL")) {
    const std::string m = v;
    if (m == "auto") c.model = ModelMode::Auto;
    else if (m == "off") c.model = ModelMode::Off;
    else if (m == "default") c.model = ModelMode::Default;
    else {
      double r = 0, w = 0, l = 0;
      char tail = 0;
      STRATA_CHECK(std::sscanf(v, "read=%lf,write=%lf,latency=%lf%c", &r, &w, &l, &tail) == 3,
                   "STRATA_SLOW_MODEL: expected auto, off, default or read=GB/s,write=GB/s,latency=ns, got ", quote_field(m));
      c.model = ModelMode::Custom;
      c.model_read_gbps = r;
      c.model_write_gbps = w;
      c.model_latency_ns = l;
      SlowTierModel::custom(r, w, l).validate();
    }
  }
  c.dram_gbps = positive_env("STRATA_DRAM_GBPS");
  c.dram_gather_gbps = positive_env("STRATA_DRAM_GATHER_GBPS");
  if (const char* v = std::getenv("STRATA_SLOW_NUMA_NODE")) {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    STRATA_CHECK(end != v && *end == '\0' && n >= 0 && n < 4096, "STRATA_SLOW_NUMA_NODE: expected a node number, got ",
                 quote_field(v));
    c.numa_node = static_cast<int>(n);
  }
  return c;
}

void TieredConfig::validate() const {
  const std::size_t phys = physical_memory_bytes();  // 0: unknown, the check is skipped
  STRATA_CHECK(fast_bytes > 0, "tiered memory: the fast-tier budget is zero (set STRATA_FAST_BYTES, e.g. 4G)");
  STRATA_CHECK(phys == 0 || fast_bytes <= phys, "tiered memory: the fast-tier budget of ", format_mib(fast_bytes),
               " is larger than this machine's memory (", format_mib(phys), ")");
  STRATA_CHECK(slow_bytes > 0, "tiered memory: the slow-tier capacity is zero (set STRATA_SLOW_BYTES, e.g. 64G, "
               "or point STRATA_SLOW_DIR at a filesystem with free space)");
  // Smaller tiers used to fail later, inside the heap, with a message that named no setting.
  constexpr std::size_t kMinTierBytes = std::size_t{1} << 20;
  STRATA_CHECK(fast_bytes >= kMinTierBytes, "tiered memory: the fast-tier budget of ", fast_bytes,
               " bytes is below the minimum of 1 MiB (set STRATA_FAST_BYTES, e.g. 4G)");
  STRATA_CHECK(slow_bytes >= kMinTierBytes, "tiered memory: the slow-tier capacity of ", slow_bytes,
               " bytes is below the minimum of 1 MiB (set STRATA_SLOW_BYTES, e.g. 64G, or point "
               "STRATA_SLOW_DIR at a filesystem with free space)");
}

std::string TieredConfig::describe() const {
  std::ostringstream os;
  os << "fast tier " << format_mib(fast_bytes) << " (DRAM), slow tier " << format_mib(slow_bytes) << " (" << backend_name(backend)
     << " in " << slow_dir;
  if (backend == PmBackend::Numa) os << ", node " << numa_node;
  os << ")";
  return os.str();
}

TieredMemory::TieredMemory(const TieredConfig& config) : config_(config) {
  config_.validate();
  PmHeapOptions o;
  o.capacity = config_.slow_bytes;
  o.dir = config_.slow_dir;
  o.backend = config_.backend;
  o.numa_node = config_.numa_node;
  o.initial = config_.slow_initial;
  auto slow = std::make_unique<PmHeap>(o);
  real_device_ = slow->is_real_device();
  manager_ = std::make_unique<DataManager>(std::make_unique<DramHeap>(config_.fast_bytes, config_.fast_initial),
                                           std::move(slow));
  policy_ = std::make_unique<LruPolicy>(*manager_);
  manager_->stats().set_slow_tier_mode(configured_mode_text());
  // Migrations use the copy engine (non-temporal stores into the slow tier) and pay the model.
  manager_->set_copy_function([this](void* dst, const void* src, std::size_t n, Tier from, Tier to) {
    if (from == to) {
      copy_bytes(dst, src, n, CopyKind::Normal);
    } else {
      copy_bytes_modeled(dst, src, n, copy_kind_between(from, to), &throttle());
    }
  });
}

Object* TieredMemory::checked_object(const Storage& storage, const char* op) const {
  Object* o = storage.defined() ? object_of(storage.allocation()) : nullptr;
  STRATA_CHECK(o != nullptr, op, ": the storage was not allocated by this tiered memory");
  return o;
}

MoveHandle TieredMemory::prefetch_async(const Storage& storage, bool force) {
  Object* o = checked_object(storage, "prefetch_async");
  return mover_.submit([this, o, force, keep = storage] { policy_->prefetch(o, force); });
}

MoveHandle TieredMemory::evict_async(const Storage& storage) {
  Object* o = checked_object(storage, "evict_async");
  return mover_.submit([this, o, keep = storage] { policy_->evict(o); });
}

bool TieredMemory::in_fast(const Storage& storage) const {
  return policy_->in_fast(checked_object(storage, "in_fast"));
}

SlowTierModel TieredMemory::resolve_model() const {
  using ModelMode = TieredConfig::ModelMode;
  switch (config_.model) {
    case ModelMode::Off: return SlowTierModel::off();
    case ModelMode::Custom:
      return SlowTierModel::custom(config_.model_read_gbps, config_.model_write_gbps, config_.model_latency_ns);
    case ModelMode::Auto:
      if (real_device_) return SlowTierModel::off();
      [[fallthrough]];
    case ModelMode::Default:
      return SlowTierModel::defaults(config_.dram_gbps > 0 ? config_.dram_gbps : measure_dram_copy_gbps(),
                                     config_.dram_gather_gbps > 0 ? config_.dram_gather_gbps
                                                                  : measure_dram_gather_gbps(256));
  }
  return SlowTierModel::off();
}

SlowTierThrottle& TieredMemory::throttle() {
  std::call_once(throttle_once_, [this] {
    throttle_ = std::make_unique<SlowTierThrottle>(resolve_model());
    manager_->stats().set_slow_tier_mode(slow_tier_mode_text());
  });
  return *throttle_;
}

void TieredMemory::set_slow_tier_model(const SlowTierModel& model) {
  bool created = false;
  std::call_once(throttle_once_, [&] {
    throttle_ = std::make_unique<SlowTierThrottle>(model);
    created = true;
  });
  if (!created) throttle_->set_model(model);
  manager_->stats().set_slow_tier_mode(slow_tier_mode_text());
}

std::string TieredMemory::slow_tier_mode() {
  throttle();
  return slow_tier_mode_text();
}

std::string TieredMemory::configured_mode_text() const {
  using ModelMode = TieredConfig::ModelMode;
  const std::string where = manager_->slow().name() + (real_device_ ? " (real device)" : " (DRAM-backed)");
  switch (config_.model) {
    case ModelMode::Off: return "model off, slow heap " + where;
    case ModelMode::Custom: return SlowTierModel::custom(config_.model_read_gbps, config_.model_write_gbps, config_.model_latency_ns).describe() + "; slow heap " + where;
    case ModelMode::Auto:
      if (real_device_) return "real device, slow heap " + where;
      [[fallthrough]];
    case ModelMode::Default:
      return "modeled slow tier (Optane ratios to the DRAM bandwidth measured at first slow-tier use); slow heap " + where;
  }
  return where;
}

std::string TieredMemory::slow_tier_mode_text() const {
  const std::string where = manager_->slow().name();
  if (throttle_->enabled()) return throttle_->model().describe() + "; slow heap " + where + (real_device_ ? " (real device)" : " (DRAM-backed)");
  return std::string(real_device_ ? "real device, " : "model off (DRAM-backed, not slowed), ") + where;
}

TieredMemory::~TieredMemory() = default;

namespace {
thread_local std::size_t t_slow_placement_bytes = 0;  // Note [Slow placement]
thread_local AllocationLog* t_allocation_log = nullptr;
}  // namespace

AllocationLog::AllocationLog() : previous_(t_allocation_log) { t_allocation_log = this; }
AllocationLog::~AllocationLog() { t_allocation_log = previous_; }
AllocationLog* AllocationLog::current() { return t_allocation_log; }

SlowPlacement::SlowPlacement(std::size_t bytes) : previous_(t_slow_placement_bytes) { t_slow_placement_bytes = bytes; }
SlowPlacement::~SlowPlacement() { t_slow_placement_bytes = previous_; }
std::size_t SlowPlacement::current() { return t_slow_placement_bytes; }

std::unique_ptr<Allocation> TieredMemory::allocate(std::size_t nbytes) {
  if (t_allocation_log != nullptr) t_allocation_log->record(nbytes);
  Object* o = nbytes != 0 && nbytes == t_slow_placement_bytes ? policy_->alloc_slow(nbytes)  // Note [Slow placement]
                                                               : policy_->alloc_fast(nbytes, true);
  if (o == nullptr) o = policy_->alloc_slow(nbytes);  // larger than the fast tier, or all of it pinned
  return std::make_unique<ObjectAllocation>(*this, o);
}

Object* TieredMemory::object_of(const Allocation* allocation) const {
  const auto* a = dynamic_cast<const ObjectAllocation*>(allocation);
  return a != nullptr && a->owner() == this ? a->object() : nullptr;
}

std::string_view where(const Storage& storage) {
  if (!storage.defined()) return "none";
  const auto* a = dynamic_cast<const ObjectAllocation*>(storage.allocation());
  if (a == nullptr) return "dram";
  Object* o = a->object();
  o->pin_read();  // the primary cannot change (or be freed) while we look at it
  const bool fast = o->primary()->heap()->tier() == Tier::Fast;
  o->unpin_read();
  return fast ? "fast" : "slow";
}

namespace {

// The process-wide instance. Never destroyed: tensors held by static objects may outlive any
// destruction order. Created once, under the mutex; read lock-free afterwards.
std::atomic<TieredMemory*> g_instance{nullptr};
std::mutex g_instance_mutex;

}  // namespace

TieredMemory& tiered_memory() {
  if (TieredMemory* m = g_instance.load(std::memory_order_acquire)) return *m;
  std::lock_guard<std::mutex> lock(g_instance_mutex);
  TieredMemory* m = g_instance.load(std::memory_order_relaxed);
  if (m == nullptr) {
    m = new TieredMemory(TieredConfig::from_env());
    g_instance.store(m, std::memory_order_release);
  }
  return *m;
}

bool tiered_memory_created() { return g_instance.load(std::memory_order_acquire) != nullptr; }

TieredMemory& configure_tiered_memory(const TieredConfig& config) {
  std::lock_guard<std::mutex> lock(g_instance_mutex);
  STRATA_CHECK(g_instance.load(std::memory_order_relaxed) == nullptr,
               "tiered memory: already created (by the first tensor or an earlier configuration) with ",
               g_instance.load(std::memory_order_relaxed)->config().describe(),
               "; configure it before the first tensor is allocated");
  auto* m = new TieredMemory(config);
  g_instance.store(m, std::memory_order_release);
  return *m;
}

}  // namespace strata::memory

namespace strata::memory {

namespace {

// Forwards to tiered_memory(), which is built on the first allocation: configuration errors then
// surface as strata::Error where a tensor is created, not during static initialization.
class DefaultTieredAllocator final : public Allocator {
 public:
  std::unique_ptr<Allocation> allocate(std::size_t nbytes) override { return tiered_memory().allocate(nbytes); }
  std::string_view name() const override { return "tiered"; }
};

// Note [Default allocator registration]
// core declares the allocator seam but cannot depend on memory/, so memory/ installs the default
// allocator from a static initializer: tiered memory, or the plain DRAM allocator when
// STRATA_MEMORY=dram. The `strata` target links strata_memory as a whole archive so this object
// file (and the initializer) is always part of the link.
const bool kRegistered = [] {
  static DefaultTieredAllocator tiered;
  const char* mode = std::getenv("STRATA_MEMORY");
  Allocator* chosen = &tiered;
  if (mode != nullptr && std::string_view(mode) == "dram") chosen = &dram_allocator();
  // If something installed its own allocator before this initializer ran, keep theirs.
  if (Allocator* earlier = set_default_allocator(chosen)) set_default_allocator(earlier);
  return true;
}();

}  // namespace

}  // namespace strata::memory
