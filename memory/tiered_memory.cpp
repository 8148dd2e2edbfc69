#include "memory/tiered_memory.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/file.h"
#include "core/text.h"
#include "memory/copy_engine.h"
#include "memory/detail/dram_allocator.h"

namespace strata::memory {

namespace {

// Physical memory, or 8 GiB when the OS does not say (defaults only; checks use the real value).
std::size_t physical_memory() {
  const std::size_t phys = physical_memory_bytes();
  return phys > 0 ? phys : (8ull << 30);
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
    if (mode == AccessMode::Write)
      object_->pin_write();
    else
      object_->pin_read();
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
    if (mode == AccessMode::Write)
      memory_.policy().write_use(object_);
    else
      memory_.policy().read_use(object_);
  }
  void unpin(AccessMode mode) override {
    if (mode == AccessMode::Write)
      object_->unpin_write();
    else
      object_->unpin_read();
  }
  Object* object() const { return object_; }
  const TieredMemory* owner() const { return &memory_; }

 private:
  TieredMemory& memory_;
  Object* object_;
};

}  // namespace

std::size_t TieredConfig::default_slow_bytes(const std::string& dir) {
  // Twice the machine's memory, but never more than 90% of the free space in the directory
  // (growing past what the disk holds fails anyway: Note [Heaps grow on demand]).
  const std::size_t bytes = physical_memory() * 2;
  const std::optional<std::size_t> free_bytes = free_disk_bytes(dir);
  return free_bytes ? std::min(bytes, *free_bytes / 10 * 9) : bytes;
}

TieredConfig TieredConfig::from_env() {
  TieredConfig c;
  c.fast_bytes = physical_memory() / 2;
  c.fast_initial = kDefaultFastInitial;  // the default budget is a limit to grow to, not a mapping
  if (const std::optional<std::size_t> fast = environment::fast_bytes()) {
    c.fast_bytes = *fast;
    c.fast_initial = 0;
  }
  c.slow_dir = environment::slow_dir().value_or(c.slow_dir);
  const std::optional<std::size_t> slow = environment::slow_bytes();
  c.slow_bytes = slow ? *slow : default_slow_bytes(c.slow_dir);
  c.backend = environment::slow_backend().value_or(c.backend);
  c.model = environment::slow_model().value_or(c.model);
  c.dram_gbps = environment::dram_gbps().value_or(0);
  c.dram_gather_gbps = environment::dram_gather_gbps().value_or(0);
  c.numa_node = environment::slow_numa_node().value_or(c.numa_node);
  return c;
}

void TieredConfig::validate() const {
  const std::size_t phys = physical_memory_bytes();  // 0: unknown, the check is skipped
  STRATA_CHECK(fast_bytes > 0, "tiered memory: the fast-tier budget is zero (set STRATA_FAST_BYTES, e.g. 4G)");
  STRATA_CHECK(phys == 0 || fast_bytes <= phys, "tiered memory: the fast-tier budget of ", format_mib(fast_bytes),
               " is larger than this machine's memory (", format_mib(phys), ")");
  STRATA_CHECK(slow_bytes > 0,
               "tiered memory: the slow-tier capacity is zero (set STRATA_SLOW_BYTES, e.g. 64G, "
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
  os << "fast tier " << format_mib(fast_bytes) << " (DRAM), slow tier " << format_mib(slow_bytes) << " ("
     << pm_backend_name(backend) << " in " << slow_dir;
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

SlowTierModel TieredMemory::model_for(const SlowTierModelSpec& spec) const {
  using Mode = SlowTierModelSpec::Mode;
  switch (spec.mode) {
    case Mode::Off: return SlowTierModel::off();
    case Mode::Custom: return SlowTierModel::custom(spec.read_gbps, spec.write_gbps, spec.latency_ns);
    case Mode::Auto:
      if (real_device_) return SlowTierModel::off();
      [[fallthrough]];
    case Mode::Default:
      return SlowTierModel::defaults(
          config_.dram_gbps > 0 ? config_.dram_gbps : measure_dram_copy_gbps(),
          config_.dram_gather_gbps > 0 ? config_.dram_gather_gbps : measure_dram_gather_gbps(256));
  }
  return SlowTierModel::off();
}

SlowTierThrottle& TieredMemory::throttle() {
  std::call_once(throttle_once_, [this] {
    throttle_ = std::make_unique<SlowTierThrottle>(model_for(config_.model));
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
  using Mode = SlowTierModelSpec::Mode;
  const std::string where = manager_->slow().name() + (real_device_ ? " (real device)" : " (DRAM-backed)");
  switch (config_.model.mode) {
    case Mode::Off: return "model off, slow heap " + where;
    case Mode::Custom: return model_for(config_.model).describe() + "; slow heap " + where;
    case Mode::Auto:
      if (real_device_) return "real device, slow heap " + where;
      [[fallthrough]];
    case Mode::Default:
      return "modeled slow tier (Optane ratios to the DRAM bandwidth measured at first slow-tier use); slow heap " +
             where;
  }
  return where;
}

std::string TieredMemory::slow_tier_mode_text() const {
  const std::string where = manager_->slow().name();
  if (throttle_->enabled())
    return throttle_->model().describe() + "; slow heap " + where +
           (real_device_ ? " (real device)" : " (DRAM-backed)");
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

// The allocator in force when STRATA_MEMORY does not parse: the error cannot be thrown from the
// static initializer below (it would terminate the process before main), so the first allocation
// throws it, where configuration errors of the tiered memory surface too.
class MisconfiguredAllocator final : public Allocator {
 public:
  explicit MisconfiguredAllocator(std::string message) : message_(std::move(message)) {}
  std::unique_ptr<Allocation> allocate(std::size_t) override { throw Error(message_); }
  std::string_view name() const override { return "misconfigured"; }

 private:
  std::string message_;
};

// Note [Default allocator registration]
// core declares the allocator seam but cannot depend on memory/, so memory/ installs the default
// allocator from a static initializer: tiered memory, or the plain DRAM allocator when
// STRATA_MEMORY=dram (MisconfiguredAllocator when the value does not parse). The `strata` target
// links strata_memory as a whole archive so this object file (and the initializer) is always part
// of the link.
const bool kRegistered = [] {
  static DefaultTieredAllocator tiered;
  Allocator* chosen = &tiered;
  try {
    if (environment::memory_kind() == MemoryKind::Dram) chosen = &dram_allocator();
  } catch (const Error& e) {
    static MisconfiguredAllocator misconfigured(e.what());
    chosen = &misconfigured;
  }
  // If something installed its own allocator before this initializer ran, keep theirs.
  if (Allocator* earlier = set_default_allocator(chosen)) set_default_allocator(earlier);
  return true;
}();

}  // namespace

}  // namespace strata::memory
