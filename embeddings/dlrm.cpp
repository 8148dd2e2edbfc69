#include "embeddings/dlrm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <sstream>

#include "autograd/grad_mode.h"
#include "core/config.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/file.h"
#include "core/finite.h"
#include "core/npz.h"
#include "core/pin_set.h"
#include "core/rng.h"
#include "core/text.h"
#include "core/threading.h"
#include "embeddings/click_source.h"
#include "embeddings/criteo.h"
#include "embeddings/criteo_dataset.h"
#include "embeddings/dlrm_step_rules.h"
#include "embeddings/prefetch_source.h"
#include "memory/copy_engine.h"
#include "memory/tiered_memory.h"
#include "models/linear.h"
#include "models/optim/adagrad.h"
#include "models/optim/sgd.h"
#include "models/zoo/dlrm.h"
#include "ops/binary.h"
#include "ops/embedding.h"
#include "ops/linalg.h"
#include "ops/shape_ops.h"

namespace strata::emb {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

inline void store_elem(std::byte* row, ElemType t, int64_t j, float v) {
  if (t == ElemType::F32)
    reinterpret_cast<float*>(row)[j] = v;
  else
    reinterpret_cast<uint16_t*>(row)[j] = BFloat16::round_from_float(v);
}

/// Fills a table with U(lo, hi) from the Philox stream `range` (row r uses blocks
/// [r·bpr, (r+1)·bpr)), in parallel over rows.
void init_uniform(Table& t, const PhiloxRange& range, int64_t bpr, float lo, float hi) {
  const int64_t d = t.featuresize();
  std::atomic<std::size_t> slow{0};
  parallel_for(t.nvectors(), 1024, [&](int64_t begin, int64_t end) {
    std::size_t chunk_slow = 0;
    for (int64_t r = begin; r < end; ++r) {
      std::byte* p = t.rowpointer(r, AccessContext::Update);
      if (t.in_slow(p)) chunk_slow += t.row_bytes();
      for (int64_t q = 0; q < bpr; ++q) {
        const auto words = range.block(static_cast<uint64_t>(r * bpr + q));
        for (int64_t j = 0; j < 4 && q * 4 + j < d; ++j)
          store_elem(p, t.elem_type(), q * 4 + j, lo + (hi - lo) * uint32_to_unit_float(words[j]));
      }
    }
    slow += chunk_slow;
  });
  t.charge_slow_write(slow);
}

}  // namespace

// ---- TieredDLRM ---------------------------------------------------------------------------------------

struct TieredDLRM::Impl {
  std::vector<float> ones;  // --weighted-pooling fixed
  std::vector<Bags> bags;   // the step's bags (weights filled in)
};

namespace {

/// A stored table's name for messages and describe_tables().
std::string stored_name(const DLRMConfig& c, const DLRMConfig::StoredTable& t) {
  std::string name = "table " + std::to_string(t.feature);
  if (c.is_qr_table(c.table_rows()[static_cast<std::size_t>(t.feature)]))
    name += t.part == 0 ? " quotient" : " remainder";
  return name;
}

/// The stage's view of the logical tables (Note [DLRM table kinds]).
std::vector<StageFeature> stage_features(const DLRMConfig& c) {
  std::vector<StageFeature> out;
  const std::vector<int64_t> rows = c.table_rows();
  int64_t first = 0;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    StageFeature f;
    f.name = "table " + std::to_string(k);
    f.rows = rows[k];
    f.first = first;
    if (c.is_qr_table(rows[k])) {
      f.kind = StageFeature::Kind::QuotientRemainder;
      f.collisions = c.qr_collisions;
    }
    f.learned_pooling = c.weighted_pooling == WeightedPooling::Learned;
    first += f.parts();
    out.push_back(f);
  }
  return out;
}

}  // namespace

SparseOptimizer sparse_optimizer(OptimizerKind kind, float lr) {
  switch (kind) {
    case OptimizerKind::SGD: return {SparseOptimizer::Kind::SGD, lr, 1e-10f, 0.0f};
    case OptimizerKind::RowWiseAdagrad: return {SparseOptimizer::Kind::RowWiseAdagrad, lr, 1e-10f, 0.0f};
    case OptimizerKind::Adagrad: return {SparseOptimizer::Kind::Adagrad, lr, 1e-10f, 0.0f};
  }
  return {};
}

std::unique_ptr<optim::Optimizer> dense_optimizer(OptimizerKind kind, const std::vector<Tensor>& params, double lr) {
  if (kind == OptimizerKind::SGD) {
    optim::SGDOptions o;
    o.lr = lr;
    return std::make_unique<optim::SGD>(params, o);
  }
  optim::AdagradOptions o;
  o.lr = lr;
  o.eps = 1e-10;
  return std::make_unique<optim::Adagrad>(params, o);
}

TieredDLRM::TieredDLRM(const DLRMConfig& config) : config_(config), impl_(std::make_unique<Impl>()) {
  validate(config_);
  STRATA_CHECK(config_.dist_backend.empty(), "--dist-backend: TieredDLRM trains in one process; the distributed run ",
               "is `mpirun -np N strata-dlrm ... --dist-backend=mpi` (embeddings/dist/dlrm_dist_run.h)");
  place_tables();
  std::vector<ManagedTable*> policies;
  for (auto& m : managed_) policies.push_back(m.get());
  stage_ =
      std::make_unique<EmbeddingStage>(stage_features(config_), tables_, policies,
                                       sparse_optimizer(config_.optimizer, static_cast<float>(config_.learning_rate)));
  if (uses_slow_) memory_->throttle().reset_counters();
}

TablePlacement TieredDLRM::plan_placement(const std::vector<DLRMConfig::StoredTable>& stored, EmbeddingPolicy policy) {
  std::vector<TableShape> shapes;
  for (const auto& t : stored) shapes.push_back({t.rows, t.dim});
  const TablePlacement plan =
      plan_table_placement(shapes, config_.emb_dtype, policy, config_.fast_budget, config_.cache_fraction);
  cache_fraction_ = plan.cache_fraction;
  return plan;
}

void TieredDLRM::attach_memory(const TablePlacement& plan) {
  memory_ = &memory::tiered_memory();
  uses_slow_ = !plan.all_dram;
  memory::Heap& fast = memory_->fast_heap();
  const std::size_t fast_room = fast.capacity() - std::min(fast.capacity(), fast.used());
  STRATA_CHECK(plan.fast_bytes <= fast_room, "--fast-budget: the tables need ",
               format_bytes(static_cast<double>(plan.fast_bytes)), " of fast memory but the process's fast tier has ",
               format_bytes(static_cast<double>(fast_room)), " free (", format_bytes(static_cast<double>(fast.used())),
               " of ", format_bytes(static_cast<double>(fast.capacity())),
               " in use); lower the budget, or give the "
               "process a larger fast tier (STRATA_FAST_BYTES, strata.memory.configure) before its first tensor");
  STRATA_CHECK(fast.reserve(plan.fast_bytes), "--fast-budget: cannot map ",
               format_bytes(static_cast<double>(plan.fast_bytes)),
               " of fast memory for the tables: ", fast.no_room_message(plan.fast_bytes));
  if (config_.slow_tier_model.mode != SlowTierModelSpec::Mode::Auto)
    memory_->set_slow_tier_model(memory_->model_for(config_.slow_tier_model));
  if (!uses_slow_) return;
  const std::string& dir = memory_->config().slow_dir;
  std::error_code ec;
  STRATA_CHECK(config_.slow_dir.empty() || std::filesystem::equivalent(config_.slow_dir, dir, ec), "--slow-dir ",
               quote_path(config_.slow_dir), ": this process's slow tier is already in ", quote_path(dir),
               " (one process has one slow tier); leave the slow directory unset, or name it (STRATA_SLOW_DIR, "
               "strata.memory.configure(slow_dir=...)) before the process's first tensor");
  memory::Heap& slow = memory_->slow_heap();
  const std::size_t limit_room = slow.capacity() - std::min(slow.capacity(), slow.used());
  const std::size_t disk_room = slow.mapped() - std::min(slow.mapped(), slow.used()) + free_disk_bytes(dir).value_or(0);
  const std::size_t avail = std::min(limit_room, disk_room);
  STRATA_CHECK(plan.table_bytes <= avail, "--slow-dir: the embedding tables need ",
               format_bytes(static_cast<double>(plan.table_bytes)), " in the slow tier but ", quote_path(dir), " has ",
               format_bytes(static_cast<double>(avail)), " free",
               avail == limit_room ? " within the slow tier's limit" : "",
               "; free space there, choose another --slow-dir, or scale the tables down (--scale-rows) to at most ",
               std::floor(1000.0 * static_cast<double>(avail) / static_cast<double>(plan.table_bytes)) / 10.0,
               "% of their size");
  // The tables' rows in one piece of the slow tier (a growing heap would double past them).
  STRATA_CHECK(slow.reserve(plan.table_bytes), "--slow-dir: cannot reserve ",
               format_bytes(static_cast<double>(plan.table_bytes)), " for the embedding tables in ", quote_path(dir),
               ": ", slow.no_room_message(plan.table_bytes));
}

std::string TieredDLRM::describe_memory() const {
  memory::Heap& fast = memory_->fast_heap();
  std::ostringstream os;
  os << "fast tier: " << format_bytes(static_cast<double>(fast.capacity()))
     << " DRAM (embedding rows: " << format_bytes(static_cast<double>(config_.fast_budget)) << " budget); slow tier: ";
  if (!uses_slow_) {
    os << "none";
    return os.str();
  }
  const memory::SlowTierThrottle& throttle = memory_->throttle();
  os << memory_->slow_heap().name() << " (limit " << format_bytes(static_cast<double>(memory_->slow_heap().capacity()))
     << "), ";
  if (throttle.enabled())
    os << (memory_->slow_is_real_device() ? "real device, " : "DRAM-backed, ") << throttle.model().describe();
  else
    os << (memory_->slow_is_real_device() ? "real device" : "DRAM-backed, model off (not slowed)");
  return os.str();
}

void TieredDLRM::place_tables() {
  const std::vector<DLRMConfig::StoredTable> stored = config_.stored_tables();
  const std::vector<int64_t> rows = config_.table_rows();
  // Placement (Note [DLRM table placement]) in the process's memory (Note [One tiered memory per
  // process]).
  const EmbeddingPolicy policy = parse_embedding_policy(config_.emb_policy);
  const TablePlacement plan = plan_placement(stored, policy);
  attach_memory(plan);

  Generator gen(static_cast<uint64_t>(config_.numpy_rand_seed));
  const TableMemory fast{&memory_->fast_heap(), nullptr};
  const TableMemory slow{&memory_->slow_heap(), uses_slow_ ? &memory_->throttle() : nullptr};
  for (std::size_t p = 0; p < stored.size(); ++p) {
    const DLRMConfig::StoredTable& st = stored[p];
    PolicyOptions po;
    po.seed = static_cast<uint64_t>(config_.numpy_rand_seed) * 1000003u + p;
    PlacedTable placed;
    try {
      placed = place_table(plan, st.rows, st.dim, config_.emb_dtype, fast, slow, po);
    } catch (const Error& e) {
      if (plan.all_dram) throw;
      STRATA_FAIL("--fast-budget ", format_bytes(static_cast<double>(config_.fast_budget)), ": ",
                  stored_name(config_, st), " (", st.rows, " rows) does not fit: ", e.what());
    }
    Table* t = &placed.table();
    if (placed.dram != nullptr) dram_tables_.push_back(std::move(placed.dram));
    managed_.push_back(std::move(placed.managed));
    t->set_name(stored_name(config_, st));
    // Note [DLRM table kinds]: the logical rows set the bound; quotient-remainder tables are
    // U(sqrt(1/R), 1) as the reference draws them.
    const int64_t bpr = (st.dim + 3) / 4;
    const double bound = std::sqrt(1.0 / static_cast<double>(rows[static_cast<std::size_t>(st.feature)]));
    const bool qr = config_.is_qr_table(rows[static_cast<std::size_t>(st.feature)]);
    init_uniform(*t, gen.reserve(static_cast<uint64_t>(st.rows * bpr)), bpr, static_cast<float>(qr ? bound : -bound),
                 qr ? 1.0f : static_cast<float>(bound));
    t->reset_counters();
    if (managed_.back()) managed_.back()->reset_stats();
    tables_.push_back(t);
  }
  build_dense(gen);
}

void TieredDLRM::build_dense(Generator& gen) {
  // The model (nn::zoo::DLRM) with its tables external: the MLPs under the reference's names.
  nn::zoo::DLRMOptions o;
  o.sparse_feature_size = config_.arch_mlp_bot.back();  // the width of every feature (2d for QR concat)
  o.embedding_sizes = config_.table_rows();
  o.bottom_mlp = config_.arch_mlp_bot;
  o.top_mlp = config_.arch_mlp_top;
  o.interaction = to_string(config_.arch_interaction_op);
  o.interaction_itself = config_.arch_interaction_itself;
  o.external_tables = true;
  dense_ = std::make_shared<nn::zoo::DLRM>(o, &gen);
  STRATA_ASSERT(dense_->interaction_width() == config_.interaction_width(), "DLRM: interaction widths differ");
  // Mixed-dimension projections emb_l.<k>.proj (Xavier-uniform, bias-free), after the MLPs so
  // that the MLPs' initial values do not depend on --md-*.
  const std::vector<int64_t> dims = config_.table_dims();
  const int64_t d = feature_size();
  projections_.assign(dims.size(), nullptr);
  std::shared_ptr<nn::Module> emb_l;
  for (std::size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == d) continue;
    if (!emb_l) emb_l = dense_->register_module("emb_l", std::make_shared<nn::Module>("ModuleList"));
    auto pr = std::make_shared<nn::Module>("PrEmbeddingBag");
    auto lin = pr->register_module("proj", std::make_shared<nn::Linear>(dims[k], d, false, &gen));
    const double b = std::sqrt(6.0 / static_cast<double>(dims[k] + d));
    const Tensor init = uniform({d, dims[k]}, -b, b, {}, &gen);
    {
      PinSet pins;
      pins.add(lin->weight(), AccessMode::Write).add(init, AccessMode::Read).acquire();
      std::memcpy(lin->weight().data_ptr(), init.data_ptr(), init.nbytes());
    }
    emb_l->register_module(std::to_string(k), pr);
    projections_[k] = lin;
  }

  dense_opt_ = dense_optimizer(config_.optimizer, dense_->parameters(), config_.learning_rate);
}

TieredDLRM::~TieredDLRM() = default;

Table& TieredDLRM::table(int64_t k, int64_t part) {
  STRATA_CHECK(k >= 0 && k < num_tables(), "TieredDLRM: table ", k, " does not exist (", num_tables(), " tables)");
  const StageFeature& f = stage_->feature(k);
  STRATA_CHECK(part >= 0 && part < f.parts(), "TieredDLRM: table ", k, " has no part ", part, " (", f.parts(),
               f.parts() == 1 ? " stored table)" : " stored tables: quotient, remainder)");
  return *tables_[static_cast<std::size_t>(f.first + part)];
}

std::string TieredDLRM::stored_table_key(int64_t p) const {
  STRATA_CHECK(p >= 0 && p < num_stored_tables(), "TieredDLRM: stored table ", p, " does not exist (",
               num_stored_tables(), " stored tables)");
  const DLRMConfig::StoredTable t = config_.stored_tables()[static_cast<std::size_t>(p)];
  const std::string prefix = "emb_l." + std::to_string(t.feature) + ".";
  if (stage_->feature(t.feature).kind == StageFeature::Kind::QuotientRemainder)
    return prefix + (t.part == 0 ? "weight_q" : "weight_r");
  if (config_.is_md_table(stage_->feature(t.feature).rows)) return prefix + "embs.weight";
  return prefix + "weight";
}

double TieredDLRM::next_learning_rate() const { return lr_schedule(config_).rate(config_.learning_rate, steps_ + 1); }

void TieredDLRM::check_batch(std::span<const float> dense, std::span<const Bags> bags, int64_t batch) const {
  STRATA_CHECK(batch >= 1, "DLRM: the batch is empty (", bags.empty() ? 0 : bags[0].batch(), " bags)");
  STRATA_CHECK(static_cast<int64_t>(bags.size()) == num_tables(), "DLRM: expected bags for ", num_tables(),
               " tables, got ", bags.size());
  STRATA_CHECK(static_cast<int64_t>(dense.size()) == batch * dense_features(), "DLRM: expected dense features [", batch,
               ", ", dense_features(), "] (", batch * dense_features(), " floats), got ", dense.size(), " floats");
  for (std::size_t k = 0; k < bags.size(); ++k)
    STRATA_CHECK(bags[k].batch() == batch, "DLRM: table ", k, ": expected ", batch, " bags (one per sample; ",
                 batch + 1, " offsets), got ", bags[k].offsets.size(), " offsets");
  for (std::size_t k = 0; k < bags.size(); ++k)
    STRATA_CHECK(bags[k].weights.empty() || bags[k].weights.size() == bags[k].indices.size(), "DLRM: table ", k, ": ",
                 bags[k].weights.size(), " per-sample weights for ", bags[k].indices.size(), " indices");
}

Tensor TieredDLRM::run_forward(std::span<const float> dense, std::span<const Bags> bags_in) {
  const int64_t batch = bags_in.empty() ? 0 : bags_in[0].batch();
  check_batch(dense, bags_in, batch);
  const int64_t nt = num_tables();

  // Bags with --weighted-pooling fixed weights filled in.
  auto& bags = impl_->bags;
  bags.assign(bags_in.begin(), bags_in.end());
  if (config_.weighted_pooling == WeightedPooling::Fixed) {
    std::size_t most = 0;
    for (const Bags& b : bags) most = std::max(most, b.indices.size());
    if (impl_->ones.size() < most) impl_->ones.assign(most, 1.0f);
    for (Bags& b : bags)
      if (b.weights.empty()) b.weights = std::span<const float>(impl_->ones.data(), b.indices.size());
  }

  auto t0 = Clock::now();
  Tensor x_in = empty({batch, dense_features()});
  {
    PinSet pins;
    pins.add(x_in, AccessMode::Write).acquire();
    std::memcpy(x_in.data_ptr(), dense.data(), dense.size_bytes());
  }
  Tensor x = dense_->bottom_mlp().forward(x_in);  // a FusedMLP: activations in the GEMM epilogues
  times_.bottom_mlp += seconds_since(t0);

  // Note [Embedding stage]: validation, hooks and lookups; then the features per table kind.
  t0 = Clock::now();
  const double hooks0 = stage_->times().hooks;
  const std::vector<Tensor> stored = stage_->forward(bags);
  std::vector<Tensor> features;
  for (int64_t k = 0; k < nt; ++k) features.push_back(embedding_feature(k, stored));
  times_.hooks += stage_->times().hooks - hooks0;
  times_.lookup += seconds_since(t0);

  t0 = Clock::now();
  Tensor r = dense_->interact(x, features);
  times_.interaction += seconds_since(t0);

  t0 = Clock::now();
  Tensor z = dense_->top_mlp().forward(r);
  z = clamp_probabilities(z, config_.loss_threshold);
  times_.top_mlp += seconds_since(t0);
  return z;
}

Tensor TieredDLRM::embedding_feature(int64_t k, const std::vector<Tensor>& stored) const {
  const StageFeature& f = stage_->feature(k);
  const Tensor& e = stored[static_cast<std::size_t>(f.first)];
  if (f.kind == StageFeature::Kind::QuotientRemainder) {
    const Tensor& r = stored[static_cast<std::size_t>(f.first + 1)];
    switch (config_.qr_operation) {
      case QROperation::Mult: return mul(e, r);
      case QROperation::Add: return add(e, r);
      case QROperation::Concat: return cat({e, r}, 1);
    }
  }
  if (const auto& proj = projections_[static_cast<std::size_t>(k)]) return linear(e, proj->weight());
  return e;
}

float TieredDLRM::train_step(std::span<const float> dense, std::span<const Bags> bags, std::span<const float> targets) {
  // Note [DLRM training step]: forward, backward (with the fused sparse update), dense step.
  const double lr = next_learning_rate();
  stage_->set_learning_rate(static_cast<float>(lr));
  Tensor z = run_forward(dense, bags);
  auto t0 = Clock::now();
  Tensor loss = dlrm_loss(z, targets, config_.loss_function, config_.loss_weights);
  times_.top_mlp += seconds_since(t0);

  t0 = Clock::now();
  const StageTimes stage0 = stage_->times();
  dense_->zero_grad();
  loss.backward();
  const double sparse = stage_->times().update - stage0.update;
  const double hooks = stage_->times().hooks - stage0.hooks;
  times_.backward += seconds_since(t0) - sparse - hooks;
  times_.hooks += hooks;

  t0 = Clock::now();
  for (auto& g : dense_opt_->param_groups()) g.options["lr"] = lr;
  dense_opt_->step();
  ++steps_;
  times_.update += seconds_since(t0) + sparse + hooks;
  ++times_.steps;
  const float value = loss.item<float>();
  if (config_.check_finite) check_finite(value, dense, targets);
  return value;
}

void TieredDLRM::check_finite(float loss, std::span<const float> dense, std::span<const float> targets) const {
  // Note [DLRM finite check]: the first non-finite parameter in state_dict order, then the rows.
  std::string first;
  NonFinite first_nf;
  std::vector<std::string> others;
  for (const auto& [name, t] : state_dict()) {
    if (all_finite(t)) continue;
    if (first.empty()) {
      first = name + " (" + t.describe() + ")";
      first_nf = find_non_finite(t);
    } else {
      others.push_back(name);
    }
  }
  std::vector<float> row;
  for (std::size_t k = 0; k < tables_.size(); ++k) {
    bool table_reported = false;
    row.resize(static_cast<std::size_t>(tables_[k]->featuresize()));
    for (const int64_t r : stage_->bags(static_cast<int64_t>(k)).indices) {
      tables_[k]->read_row(r, row.data());
      NonFinite nf;
      nf.numel = tables_[k]->featuresize();
      for (std::size_t j = 0; j < row.size(); ++j) {
        if (std::isfinite(row[j])) continue;
        if (std::isnan(row[j]))
          ++nf.nan;
        else
          ++nf.inf;
        if (nf.first < 0) nf.first = static_cast<int64_t>(j), nf.first_value = row[j];
      }
      if (!nf.any()) continue;
      const std::string name = stored_table_key(static_cast<int64_t>(k));
      if (first.empty()) {
        first = name + " row " + std::to_string(r) + " (" + tables_[k]->name() + ")";
        first_nf = nf;
      } else if (!table_reported) {
        others.push_back(name);
      }
      table_reported = true;
    }
  }
  const bool loss_ok = std::isfinite(loss);
  if (first.empty() && loss_ok) return;
  std::ostringstream os;
  const auto number = [](float v) { return std::isnan(v) ? std::string("nan") : std::to_string(v); };
  os << "--check-finite: after step " << steps_ << ", ";
  if (first.empty()) {
    os << "the loss is " << number(loss) << " while every parameter is still finite";
  } else {
    os << "parameter " << first << " went non-finite: " << first_nf.describe() << "; the loss was " << number(loss);
    if (!others.empty()) {
      constexpr std::size_t kListed = 12;
      os << "; also non-finite:";
      for (std::size_t i = 0; i < others.size() && i < kListed; ++i) os << (i ? ", " : " ") << others[i];
      if (others.size() > kListed) os << " and " << others.size() - kListed << " more";
    }
  }
  // Where it came from, when the batch itself held NaN or inf.
  auto first_bad = [](std::span<const float> v) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i])) return static_cast<int64_t>(i);
    return int64_t{-1};
  };
  const int64_t nd = dense_features();
  if (const int64_t i = first_bad(dense); i >= 0)
    os << "; the batch's dense features hold " << number(dense[static_cast<std::size_t>(i)]) << " (sample " << i / nd
       << ", feature " << i % nd << ")";
  if (const int64_t i = first_bad(targets); i >= 0)
    os << "; the batch's targets hold " << number(targets[static_cast<std::size_t>(i)]) << " (sample " << i << ")";
  for (std::size_t k = 0; k < impl_->bags.size(); ++k)
    if (const int64_t i = first_bad(impl_->bags[k].weights); i >= 0) {
      os << "; table " << k << "'s per-sample weights hold "
         << number(impl_->bags[k].weights[static_cast<std::size_t>(i)]) << " (lookup " << i << ")";
      break;
    }
  throw Error(os.str());
}

Tensor TieredDLRM::forward(std::span<const float> dense, std::span<const Bags> bags) {
  autograd::NoGradGuard no_grad;
  return run_forward(dense, bags);
}

float TieredDLRM::evaluate(std::span<const float> dense, std::span<const Bags> bags, std::span<const float> targets) {
  autograd::NoGradGuard no_grad;
  Tensor z = run_forward(dense, bags);
  ++times_.steps;
  return dlrm_loss(z, targets, config_.loss_function, config_.loss_weights).item<float>();
}

float TieredDLRM::score(std::span<const float> dense, std::span<const Bags> bags, std::span<const float> targets,
                        std::vector<float>& scores) {
  autograd::NoGradGuard no_grad;
  const DLRMPhaseTimes training_times = times_;
  Tensor z = run_forward(dense, bags).contiguous();
  const float loss = dlrm_loss(z, targets, config_.loss_function, config_.loss_weights).item<float>();
  times_ = training_times;
  PinSet pins;
  pins.add(z, AccessMode::Read).acquire();
  const float* p = z.data<float>();
  scores.assign(p, p + z.numel());
  return loss;
}

StateDict TieredDLRM::state_dict() const {
  StateDict out = dense_->state_dict();
  for (int64_t k = 0; k < num_tables(); ++k)
    if (const LearnedPoolingWeights* w = stage_->learned(k)) {
      Tensor v = empty({static_cast<int64_t>(w->v.size())});
      PinSet pins;
      pins.add(v, AccessMode::Write).acquire();
      std::memcpy(v.data_ptr(), w->v.data(), w->v.size() * sizeof(float));
      out.emplace_back("v_W_l." + std::to_string(k), v);
    }
  return out;
}

StateDict TieredDLRM::split_pooling(const StateDict& state, std::vector<const Tensor*>& pooling) const {
  StateDict dense;
  pooling.assign(static_cast<std::size_t>(num_tables()), nullptr);
  for (const auto& [key, value] : state) {
    if (key.rfind("v_W_l.", 0) != 0) {
      dense.emplace_back(key, value);
      continue;
    }
    const std::string index = key.substr(6);
    const int64_t k = index.empty() || index.size() > 9 || index.find_first_not_of("0123456789") != std::string::npos
                          ? -1
                          : std::strtoll(index.c_str(), nullptr, 10);
    STRATA_CHECK(k >= 0 && k < num_tables() && stage_->learned(k) != nullptr, "DLRM load_state_dict: unexpected key ",
                 quote_field(key),
                 config_.weighted_pooling == WeightedPooling::Learned
                     ? std::string(" (tables 0..") + std::to_string(num_tables() - 1) + ")"
                     : std::string(" (no --weighted-pooling learned)"));
    const auto rows = static_cast<int64_t>(stage_->learned(k)->v.size());
    STRATA_CHECK(value.dtype() == DType::f32 && value.sizes() == Dims{rows}, "DLRM load_state_dict: ", key, " is ",
                 value.describe(), ", expected f32 [", rows, "]");
    pooling[static_cast<std::size_t>(k)] = &value;
  }
  for (int64_t k = 0; k < num_tables(); ++k)
    STRATA_CHECK(stage_->learned(k) == nullptr || pooling[static_cast<std::size_t>(k)] != nullptr,
                 "DLRM load_state_dict: missing key v_W_l.", k);
  return dense;
}

void TieredDLRM::load_state_dict(const StateDict& state) {
  std::vector<const Tensor*> pooling;
  const StateDict dense = split_pooling(state, pooling);
  dense_->load_state_dict(dense, true);
  for (int64_t k = 0; k < num_tables(); ++k)
    if (const Tensor* v = pooling[static_cast<std::size_t>(k)]) {
      const Tensor c = v->contiguous();
      PinSet pins;
      pins.add(c, AccessMode::Read).acquire();
      auto& w = stage_->learned(k)->v;
      std::memcpy(w.data(), c.data_ptr(), w.size() * sizeof(float));
    }
}

DLRMTierCounters TieredDLRM::counters() const {
  DLRMTierCounters c;
  const auto looked_up = stage_->looked_up();
  const auto updated = stage_->updated();
  std::uint64_t hits = 0, lookups = 0;
  bool cached = false;
  for (std::size_t k = 0; k < tables_.size(); ++k) {
    const std::uint64_t row = tables_[k]->row_bytes();
    c.rows_looked_up += looked_up[k];
    c.rows_updated += updated[k];
    const TableCounters tc = tables_[k]->counters();
    c.slow_bytes_read += tc.slow_bytes_read;
    c.slow_bytes_written += tc.slow_bytes_written;
    const ManagedTable* m = managed_[k].get();
    if (m == nullptr) {  // whole in DRAM
      c.fast_bytes_read += (looked_up[k] + updated[k]) * row;
      c.fast_bytes_written += updated[k] * row;
    } else if (const CachedTable* ct = m->cached_table()) {
      const CacheCounters cc = ct->cache_counters();
      cached = true;
      hits += cc.hits;
      lookups += cc.hits + cc.misses;
      // Accesses served by cached copies, and the copies made into the cache.
      c.fast_bytes_read += (cc.hits + cc.update_hits) * row;
      c.fast_bytes_written += (cc.update_hits + cc.rows_cached + cc.rows_retained) * row;
    }
  }
  if (cached) c.cache_hit_rate = lookups == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(lookups);
  if (uses_slow_) c.throttle = memory_->throttle().counters();
  return c;
}

void TieredDLRM::reset_stats() {
  times_ = {};
  stage_->reset_stats();
  for (Table* t : tables_) t->reset_counters();
  for (auto& m : managed_)
    if (m) m->reset_stats();
  if (uses_slow_) memory_->throttle().reset_counters();
}

std::string TieredDLRM::describe_tables() const {
  std::ostringstream os;
  const std::vector<DLRMConfig::StoredTable> stored = config_.stored_tables();
  for (std::size_t k = 0; k < tables_.size(); ++k) {
    const Table* t = tables_[k];
    const StageFeature& f = stage_->feature(stored[k].feature);
    os << "  " << t->name() << ": " << t->nvectors() << " rows x " << t->featuresize() << " "
       << elem_name(t->elem_type()) << " ("
       << format_bytes(static_cast<double>(t->nvectors()) * static_cast<double>(t->row_bytes())) << "), ";
    // Note [DLRM table kinds]
    if (f.kind == StageFeature::Kind::QuotientRemainder)
      os << "QR " << (stored[k].part == 0 ? "quotient" : "remainder") << " of " << f.rows << " rows (" << f.collisions
         << " collisions, " << to_string(config_.qr_operation) << "), ";
    else if (projections_[static_cast<std::size_t>(stored[k].feature)])
      os << "MD d=" << t->featuresize() << " projected to " << feature_size() << ", ";
    if (f.learned_pooling) os << "learned pooling weights, ";
    if (const ManagedTable* m = managed_[k].get()) {
      os << "policy " << policy_name(m->policy());
      if (m->cached_table() != nullptr)
        os << ", base rows in the slow tier, cache of " << m->cache_rows() << " rows in DRAM";
      else
        os << ", in the slow tier";
    } else {
      os << "in DRAM";
    }
    os << "\n";
  }
  return os.str();
}

std::span<float> TieredDLRM::sparse_state(int64_t k) { return stage_->state(k).accumulators(); }

void TieredDLRM::set_steps(int64_t steps) {
  steps_ = steps;
  for (int64_t p = 0; p < stage_->num_tables(); ++p) stage_->state(p).set_steps(steps);
}

}  // namespace strata::emb
