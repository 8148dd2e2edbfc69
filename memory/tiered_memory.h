#pragma once
/// @file
/// TieredMemory: the allocator behind every tensor. Each Storage is an Object of the data manager,
/// allocated fast-first by the LRU policy (forced: other objects are evicted to make room; objects
/// larger than the fast tier start in the slow tier), pinned while kernels use it (PinSet), and
/// freed without write-back when the last tensor lets go of it.
///
/// Configuration: TieredConfig in C++, strata.memory.configure() in Python, or the environment
/// (STRATA_FAST_BYTES, STRATA_SLOW_BYTES, STRATA_SLOW_DIR, STRATA_SLOW_BACKEND,
/// STRATA_SLOW_NUMA_NODE, STRATA_SLOW_MODEL, STRATA_DRAM_GBPS, STRATA_DRAM_GATHER_GBPS: their
/// spellings and defaults are the table in docs/CONFIG.md), read by TieredConfig::from_env() when
/// the default allocator is first used (Note [One configuration layer], core/config.h).

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/allocator.h"
#include "core/config.h"
#include "core/storage.h"
#include "memory/copy_engine.h"
#include "memory/data_manager.h"
#include "memory/heap.h"
#include "memory/policy.h"
#include "memory/slow_tier_model.h"

namespace strata::memory {

struct TieredConfig {
  static constexpr std::size_t kDefaultFastInitial = std::size_t{64} << 20;  // when the budget is a default
  static constexpr std::size_t kDefaultSlowInitial = std::size_t{2} << 20;

  std::size_t fast_bytes = 0;
  std::size_t slow_bytes = 0;
  /// Bytes each heap maps (and reserves) when created, the rest on demand up to fast_bytes /
  /// slow_bytes (Note [Heaps grow on demand]); 0: the whole budget at once.
  std::size_t fast_initial = 0;
  std::size_t slow_initial = kDefaultSlowInitial;
  std::string slow_dir = "/tmp";
  PmBackend backend = PmBackend::Auto;
  int numa_node = -1;

  SlowTierModelSpec model;      ///< the slow-tier model asked for (model_for() resolves it)
  double dram_gbps = 0;         // reference for Default; 0 = measure on first use
  double dram_gather_gbps = 0;  // reference for Default's random-access rates; 0 = measure on first use

  /// Defaults overridden by the STRATA_* environment variables (docs/CONFIG.md); throws
  /// strata::Error naming the variable for a value that does not parse.
  static TieredConfig from_env();
  /// The default slow-tier limit for `dir`: twice physical memory, at most 90% of its free space.
  static std::size_t default_slow_bytes(const std::string& dir);
  /// Throws strata::Error for a zero budget, a budget larger than the machine, or a slow tier
  /// smaller than the fast one.
  void validate() const;
  std::string describe() const;
};

class TieredMemory final : public Allocator {
 public:
  explicit TieredMemory(const TieredConfig& config);
  ~TieredMemory() override;

  std::unique_ptr<Allocation> allocate(std::size_t nbytes) override;
  std::string_view name() const override { return "tiered"; }

  const TieredConfig& config() const { return config_; }
  DataManager& manager() { return *manager_; }
  LruPolicy& policy() { return *policy_; }
  /// The Object behind a tensor's storage, or null if the storage was not made here.
  Object* object_of(const Allocation* allocation) const;
  /// Queues a prefetch of the storage's object on the mover thread, so the copy overlaps the
  /// caller's compute; the queued job keeps the storage alive. The handle's wait() returns once
  /// the attempt finished (a busy or oversized object simply stays where it is: check in_fast).
  MoveHandle prefetch_async(const Storage& storage, bool force = true);
  /// Queues an eviction of the storage's object on the mover thread.
  MoveHandle evict_async(const Storage& storage);
  /// True when the storage's object is in the fast tier now.
  bool in_fast(const Storage& storage) const;
  Mover& mover() { return mover_; }

  /// The slow-tier throttle (created on first use: the default model measures DRAM bandwidth).
  /// Every charge for the slow tier goes to it: tensor moves, kernels on slow tensors and the
  /// embedding tables' row accesses (Note [One tiered memory per process], embeddings/dlrm.h).
  SlowTierThrottle& throttle();
  /// Sets the slow-tier model for everything in the slow tier from now on (one slow tier, one
  /// model); the throttle is created with it when it does not exist yet, without measuring.
  void set_slow_tier_model(const SlowTierModel& model);
  /// The heaps, for components that manage their own regions in them (Note [Unmanaged regions]).
  Heap& fast_heap() { return manager_->fast(); }
  Heap& slow_heap() { return manager_->slow(); }
  /// True when the slow heap is a real device (PMem, CXL), not DRAM-backed.
  bool slow_is_real_device() const { return real_device_; }
  /// "modeled: ..." or "real device ..." — what every report must say about the slow tier.
  std::string slow_tier_mode();
  /// The model `spec` asks for on this memory: Auto is off on a real device and Default
  /// otherwise; Default scales the Optane ratios to the configuration's dram_gbps and
  /// dram_gather_gbps, measuring those left 0 (the one place the default model is computed).
  SlowTierModel model_for(const SlowTierModelSpec& spec) const;

 private:
  std::string slow_tier_mode_text() const;   // resolved (after the throttle exists)
  std::string configured_mode_text() const;  // before: what the configuration asks for
  TieredConfig config_;
  std::unique_ptr<DataManager> manager_;
  std::unique_ptr<LruPolicy> policy_;
  Object* checked_object(const Storage& storage, const char* op) const;
  std::once_flag throttle_once_;
  std::unique_ptr<SlowTierThrottle> throttle_;
  bool real_device_ = false;
  Mover mover_;  // last: drained and joined first, while the manager still exists
};

/// Note [Slow placement]
/// While a SlowPlacement(bytes) is open on a thread, the allocations of exactly `bytes` that thread
/// makes through a TieredMemory are placed in the slow tier instead of the fast one; other sizes,
/// other threads and the time after the scope are unaffected (scopes nest; the inner one rules).
/// The kernels that then read and write such a tensor do it in place in the slow tier, counted
/// and charged by PinSet (Note [Pinning kernel operands]) — AutoTM's tensors placed in PM and
/// used there (dissertation ch. 3). The Auto rematerialization planner uses it for a step output
/// it decides to place in the slow tier (Decision::Slow, autograd/remat/planner.h): the executor
/// opens the scope with that output's size around the step, since an op allocates its output
/// itself; a step that allocates anything else of that size (an AllocationLog of its profiling
/// run tells) is never placed, so the scope places exactly its output.
class SlowPlacement {
 public:
  explicit SlowPlacement(std::size_t bytes);
  ~SlowPlacement();
  SlowPlacement(const SlowPlacement&) = delete;
  SlowPlacement& operator=(const SlowPlacement&) = delete;
  /// The size the innermost open scope of this thread places in the slow tier (0: none).
  static std::size_t current();

 private:
  std::size_t previous_;
};

/// Records the sizes of the allocations this thread makes through a TieredMemory while it is open
/// (scopes nest: the innermost records). The Auto planner's profiler uses it to place a step's
/// output in the slow tier only when nothing else the step allocates has its size (Note [Slow
/// placement]).
class AllocationLog {
 public:
  AllocationLog();
  ~AllocationLog();
  AllocationLog(const AllocationLog&) = delete;
  AllocationLog& operator=(const AllocationLog&) = delete;
  const std::vector<std::size_t>& sizes() const { return sizes_; }
  /// The innermost open log of this thread, or null.
  static AllocationLog* current();
  void record(std::size_t bytes) { sizes_.push_back(bytes); }

 private:
  std::vector<std::size_t> sizes_;
  AllocationLog* previous_;
};

/// The process-wide tiered memory, created from TieredConfig::from_env() on first use (unless
/// configure_tiered_memory() created it before).
TieredMemory& tiered_memory();
/// True once the process-wide tiered memory exists (after the first tiered allocation, a call of
/// tiered_memory(), or configure_tiered_memory()). It is never destroyed.
bool tiered_memory_created();
/// Creates the process-wide tiered memory now with `config` instead of the environment's. Throws
/// strata::Error when it already exists (it cannot be rebuilt under live tensors), or when
/// `config` is invalid or its heaps cannot be created (it then stays uncreated).
TieredMemory& configure_tiered_memory(const TieredConfig& config);

/// Where a storage's bytes are now: "fast" or "slow" for a tiered object, "dram" for any other
/// allocation (plain DRAM, a NumPy buffer), "none" for an undefined storage. Waits for a migration
/// of the object in progress. For reports (tape introspection); never on a kernel's path.
std::string_view where(const Storage& storage);

}  // namespace strata::memory
