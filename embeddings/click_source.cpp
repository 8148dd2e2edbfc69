#include "embeddings/click_source.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

#include "core/error.h"

namespace strata::emb {

namespace {

// The constants of Note [Click data].
constexpr double kMainScale = 0.7;     // A
constexpr double kLatentScale = 0.85;  // B
constexpr double kDenseScale = 0.6;    // C
constexpr double kDenseLatent = 0.5;   // D
constexpr double kClickRate = 0.3;     // b is solved for this rate
constexpr int64_t kCalibrationSamples = 8192;
constexpr double kHeadRanks = 100.0;  // s(k) = (1 + k / kHeadRanks)^(-1/2)
constexpr uint64_t kModelSalt = 0xc11c4d47a5eedULL;
constexpr uint64_t kTestStreamSalt = 0x7e575e7ULL;
constexpr uint64_t kCalibrationSalt = 0xca11b7a7eULL;
constexpr uint64_t kDenseKey = ~uint64_t{0};  // the hash key of v and Q (no table has this number)

/// A uniform in (0, 1) from 53 bits of a hash.
double open_uniform(uint64_t h) { return (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53; }

/// Standard normals number 2i and 2i + 1 of `key` (Box–Muller on two hashed uniforms).
std::pair<double, double> hashed_normals(uint64_t key, uint64_t i) {
  const double r = std::sqrt(-2.0 * std::log(open_uniform(hash_mix(key, 2 * i))));
  const double a = 2.0 * std::numbers::pi * open_uniform(hash_mix(key, 2 * i + 1));
  return {r * std::cos(a), r * std::sin(a)};
}

/// Standard normal number i of `key`.
double hashed_normal(uint64_t key, uint64_t i) {
  const auto [even, odd] = hashed_normals(key, i / 2);
  return i % 2 == 0 ? even : odd;
}

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

/// The b with mean(sigmoid(z + b)) = rate (bisection; the mean increases with b).
double solve_bias(std::span<const double> z, double rate) {
  double lo = -30.0, hi = 30.0;
  for (int it = 0; it < 60; ++it) {
    const double mid = 0.5 * (lo + hi);
    double mean = 0.0;
    for (double x : z) mean += sigmoid(x + mid);
    (mean / static_cast<double>(z.size()) < rate ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace

// ---- ClickModel ----------------------------------------------------------------------------------

ClickModel::ClickModel(int64_t num_tables, int64_t num_dense, uint32_t seed)
    : num_tables_(num_tables), key_(hash_mix(seed, kModelSalt)) {
  STRATA_CHECK(num_dense >= 0, "click data: the number of dense features (the first width of --arch-mlp-bot) must ",
               "not be negative, got ", num_dense);
  const auto n = static_cast<std::size_t>(num_dense);
  const uint64_t key = hash_mix(key_, kDenseKey);
  const double scale = n > 0 ? 1.0 / std::sqrt(static_cast<double>(n)) : 0.0;
  v_.resize(n);
  for (std::size_t i = 0; i < n; ++i) v_[i] = hashed_normal(key, i);
  q_.resize(kLatent * n);
  for (std::size_t i = 0; i < q_.size(); ++i) q_[i] = scale * hashed_normal(key, n + i);
}

double ClickModel::main_effect(int64_t table, int64_t rank) const {
  const uint64_t key = hash_mix(hash_mix(key_, static_cast<uint64_t>(table)), static_cast<uint64_t>(rank));
  const double s = 1.0 / std::sqrt(1.0 + static_cast<double>(rank) / kHeadRanks);
  return kMainScale * s * hashed_normals(key, 0).first;
}

ClickModel::Latent ClickModel::latent(int64_t table, int64_t rank) const {
  static_assert(kLatent == 4);
  const uint64_t key = hash_mix(hash_mix(key_, static_cast<uint64_t>(table)), static_cast<uint64_t>(rank));
  const double s = kLatentScale / std::sqrt(2.0) / std::sqrt(1.0 + static_cast<double>(rank) / kHeadRanks);
  const auto [a, b] = hashed_normals(key, 1);
  const auto [c, d] = hashed_normals(key, 2);
  return {s * a, s * b, s * c, s * d};
}

double ClickModel::logit(std::span<const double> main, std::span<const Latent> latent,
                         std::span<const float> dense) const {
  STRATA_ASSERT(static_cast<int64_t>(main.size()) == num_tables_ && latent.size() == main.size() &&
                dense.size() == v_.size());
  double z = 0.0;
  for (double m : main) z += m;
  const int64_t pairs = std::min<int64_t>(num_tables_ / 2, kMaxPairs);
  for (int64_t p = 0; p < pairs; ++p) {
    const Latent& a = latent[static_cast<std::size_t>(2 * p)];
    const Latent& b = latent[static_cast<std::size_t>(2 * p + 1)];
    for (int i = 0; i < kLatent; ++i) z += a[i] * b[i];
  }
  const std::size_t n = v_.size();
  if (n == 0) return z;
  double dense_term = 0.0;
  Latent projected{};
  for (std::size_t j = 0; j < n; ++j) {
    const double x = std::sqrt(12.0) * (static_cast<double>(dense[j]) - 0.5);
    dense_term += v_[j] * x;
    for (std::size_t i = 0; i < kLatent; ++i) projected[i] += q_[i * n + j] * x;
  }
  z += kDenseScale * dense_term / std::sqrt(static_cast<double>(n));
  for (int i = 0; i < kLatent; ++i) z += kDenseLatent * projected[i] * latent[0][i];
  return z;
}

// ---- ClickSource ---------------------------------------------------------------------------------

namespace {

const ClickConfig& checked(const ClickConfig& c) {
  check_rows(c.rows, "--arch-embedding-size");
  STRATA_CHECK(c.bag_size > 0, "--num-indices-per-lookup must be positive, got ", c.bag_size);
  STRATA_CHECK(c.alpha > 0.0 && std::isfinite(c.alpha), "--zipf-alpha must be positive and finite, got ", c.alpha);
  if (c.split == ClickSplit::Test) {
    STRATA_CHECK(c.batch_size > 0, "--test-mini-batch-size must be positive, got ", c.batch_size);
    STRATA_CHECK(c.data_size > 0, "--test-data-size must be positive, got ", c.data_size);
  }
  return c;
}

}  // namespace

ClickSource::ClickSource(ClickConfig config)
    : IndexSource(checked(config).rows, config.num_dense, config.batch_size, 0),
      config_(std::move(config)),
      shape_(EpochShape::of(config_.data_size, config_.batch_size, config_.num_batches)),
      model_(static_cast<int64_t>(config_.rows.size()), config_.num_dense, config_.seed) {
  num_batches_ = shape_.num_batches;
  for (std::size_t t = 0; t < config_.rows.size(); ++t) {
    samplers_.emplace_back(config_.rows[t], config_.alpha);
    lfsrs_.emplace_back(config_.rows[t], hash_mix(config_.seed, t));  // ZipfSource's phases
  }
  ranks_.resize(config_.rows.size());
  main_.resize(config_.rows.size());
  latent_.resize(config_.rows.size());
  RandomStream calibration(static_cast<uint32_t>(hash_mix(config_.seed, kCalibrationSalt)));
  Batch sample;
  draw(calibration, kCalibrationSamples, sample);
  bias_ = solve_bias(logits_, kClickRate);
  reset();
}

void ClickSource::reset() {
  const uint32_t seed = config_.split == ClickSplit::Train
                            ? config_.seed
                            : static_cast<uint32_t>(hash_mix(config_.seed, kTestStreamSalt));
  rng_.seed(seed);
  next_batch_ = 0;
}

std::string ClickSource::describe() const {
  std::ostringstream os;
  os << "click(alpha " << config_.alpha << ", " << (config_.split == ClickSplit::Train ? "train" : "test") << ")";
  return os.str();
}

int64_t ClickSource::row_of_rank(int64_t table, int64_t rank) const {
  STRATA_CHECK(table >= 0 && table < num_tables(), "click source: table ", table, " does not exist; there are ",
               num_tables());
  return lfsrs_[static_cast<std::size_t>(table)](rank);
}

void ClickSource::draw_bags(RandomStream& rng, int64_t t, int64_t batch, BagStorage& out) {
  const auto k = static_cast<std::size_t>(t);
  const int64_t rows = config_.rows[k];
  std::vector<int64_t>& ranks = ranks_[k];
  ranks.clear();
  out.indices.clear();
  out.weights.clear();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t bag = config_.variable_bag_size ? variable_bag_size(rng, rows, config_.bag_size) : config_.bag_size;
    for (int64_t i = 0; i < bag; ++i) {
      const int64_t rank = samplers_[k](rng) - 1;
      ranks.push_back(rank);
      out.indices.push_back(lfsrs_[k](rank));
    }
    out.offsets[static_cast<std::size_t>(b + 1)] = static_cast<int64_t>(out.indices.size());
  }
}

void ClickSource::compute_logits(const Batch& batch) {
  logits_.resize(static_cast<std::size_t>(batch.batch));
  const auto dense = static_cast<std::size_t>(batch.num_dense);
  for (int64_t b = 0; b < batch.batch; ++b) {
    for (std::size_t t = 0; t < ranks_.size(); ++t) {
      const std::vector<int64_t>& off = batch.tables[t].offsets;
      const auto begin = static_cast<std::size_t>(off[static_cast<std::size_t>(b)]);
      const auto end = static_cast<std::size_t>(off[static_cast<std::size_t>(b + 1)]);
      double m = 0.0;
      ClickModel::Latent u{};
      for (std::size_t i = begin; i < end; ++i) {
        m += model_.main_effect(static_cast<int64_t>(t), ranks_[t][i]);
        const ClickModel::Latent l = model_.latent(static_cast<int64_t>(t), ranks_[t][i]);
        for (int j = 0; j < ClickModel::kLatent; ++j) u[j] += l[j];
      }
      const double norm = end > begin ? 1.0 / std::sqrt(static_cast<double>(end - begin)) : 0.0;
      main_[t] = m * norm;
      for (double& x : u) x *= norm;
      latent_[t] = u;
    }
    logits_[static_cast<std::size_t>(b)] =
        model_.logit(main_, latent_, std::span<const float>(batch.dense).subspan(b * dense, dense));
  }
}

void ClickSource::draw(RandomStream& rng, int64_t n, Batch& batch) {
  batch.reshape(n, config_.num_dense, num_tables());
  for (float& v : batch.dense) v = static_cast<float>(rng.uniform());
  for (int64_t t = 0; t < num_tables(); ++t) draw_bags(rng, t, n, batch.tables[static_cast<std::size_t>(t)]);
  compute_logits(batch);
}

bool ClickSource::next(Batch& batch) {
  if (next_batch_ >= shape_.num_batches) return false;
  draw(rng_, shape_.samples_in(next_batch_, config_.batch_size), batch);
  for (std::size_t b = 0; b < logits_.size(); ++b) {
    logits_[b] += bias_;
    batch.targets[b] = rng_.uniform() < sigmoid(logits_[b]) ? 1.0f : 0.0f;
  }
  ++next_batch_;
  return true;
}

// ---- make_click_source ---------------------------------------------------------------------------

std::unique_ptr<IndexSource> make_click_source(const DLRMConfig& c, bool test) {
  ClickConfig k;
  k.rows = c.table_rows();
  k.num_dense = c.arch_mlp_bot.front();
  k.bag_size = c.num_indices_per_lookup;
  k.variable_bag_size = !c.num_indices_per_lookup_fixed;
  k.alpha = c.zipf_alpha;
  k.seed = static_cast<uint32_t>(c.numpy_rand_seed);
  if (!test) {
    k.batch_size = c.mini_batch_size;
    k.data_size = c.data_size;
    k.num_batches = c.num_batches;
  } else {
    k.split = ClickSplit::Test;
    k.batch_size = c.test_mini_batch_size > 0 ? c.test_mini_batch_size : c.mini_batch_size;
    const EpochShape train = EpochShape::of(c.data_size, c.mini_batch_size, c.num_batches);
    k.data_size = c.test_data_size > 0 ? c.test_data_size : std::max<int64_t>(1, train.data_size / 10);
  }
  return std::make_unique<ClickSource>(std::move(k));
}

}  // namespace strata::emb
