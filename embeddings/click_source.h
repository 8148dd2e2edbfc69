#pragma once
/// @file
/// Generated click data with a planted signal (`--data-generation click`): Zipf-skewed categorical
/// ids, uniform dense features and labels drawn from a hidden model, so a DLRM trained on it
/// learns something (test AUC well above 0.5) while its tables still need the tiers.
///
/// Note [Click data]
/// Per sample and table a bag of ranks k is drawn from Zipf(--zipf-alpha) on {1..rows} (one per
/// table, like Criteo, with --num-indices-per-lookup 1; the reference's variable bag sizes unless
/// --num-indices-per-lookup-fixed), repeats allowed; rank k is stored as the row the table's
/// maximal-length LFSR maps it to (Note [LFSR scrambling], the phase ZipfSource uses), so hot rows
/// are scattered over the table. Dense features are U[0, 1). The label is Bernoulli(sigmoid(z))
/// with the hidden logit
///
///     z = b + sum_t m_t(bag_t) + sum_{pairs (a, a+1)} <u_a(bag_a), u_b(bag_b)>
///           + C v·x̂ / sqrt(n) + D <Q x̂, u_0(bag_0)>,
///
/// where x̂ = sqrt(12)(x - 1/2) are the centred dense features (unit variance), m_t(bag) and
/// u_t(bag) (in R^4) are the sums of the per-row effects over the bag divided by sqrt(bag size),
/// the pairs are the consecutive tables (0,1), (2,3), ... (at most four), v ∈ R^n and Q ∈ R^{4×n}
/// are fixed normal weights, and the per-row effects are
///
///     m_t(k) = A s(k) g(t, k, 0),   u_t(k)_i = B s(k) g(t, k, 1 + i) / 4^(1/4),   s(k) = (1 + k/100)^(-1/2)
///
/// with g a standard normal computed from a hash of (seed, t, k, component): nothing of table
/// size is stored and any table size works. s(k) makes the frequent rows carry the large effects
/// (a row seen a handful of times cannot be learned, and in Criteo the hot ids are what the model
/// learns), so caching the hot rows matters for learning too. Every hidden parameter depends on
/// --numpy-rand-seed only. The interaction terms are what a dot interaction represents directly
/// (pairwise products of embeddings, and of the bottom MLP's output with an embedding).
///
/// The bias b sets the click rate to 30%: it solves mean(sigmoid(z_i + b)) = 0.3 over 8192
/// samples of a calibration stream (seeded from the seed; the same for both splits). Without it
/// the rate would swing between 0.21 and 0.34 from seed to seed, because the hottest rows (rank 0
/// alone is ~10% of a table's draws at alpha 1.05) move the mean logit.
///
/// Calibration (A = 0.7, B = 0.85, C = 0.6, D = 0.5; 8 tables of 131072 rows, Zipf(1.05), 16
/// dense features; chosen with a NumPy model of these formulas) measured over 40000 samples each
/// for seeds 1, 2, 3, 7, 42, 123, 727, 1000: click rate 0.290-0.304, logit std 1.56-1.79,
/// Bayes-optimal AUC (the hidden logit as the score) 0.82-0.85. ClickSource's tests check seed 123.
///
/// Splits: the train and the test split share the hidden model and the row mapping and draw their
/// samples from different streams (seeded from the seed and from a hash of it), so they are
/// disjoint sample sets from the same distribution. reset() replays a split's epoch.

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "embeddings/dlrm_config.h"
#include "embeddings/index_source.h"
#include "embeddings/zipf.h"

namespace strata::emb {

enum class ClickSplit : uint8_t { Train, Test };

/// Settings of ClickSource (flags in parentheses).
struct ClickConfig {
  std::vector<int64_t> rows;       ///< rows per table (--arch-embedding-size)
  int64_t num_dense = 16;          ///< dense features (first width of --arch-mlp-bot)
  int64_t batch_size = 512;        ///< --mini-batch-size (test: --test-mini-batch-size)
  int64_t data_size = 1;           ///< samples per epoch (--data-size; test: --test-data-size)
  int64_t num_batches = 0;         ///< --num-batches (0: ceil(data_size / batch_size))
  int64_t bag_size = 1;            ///< --num-indices-per-lookup
  bool variable_bag_size = false;  ///< !--num-indices-per-lookup-fixed
  double alpha = 1.05;             ///< --zipf-alpha
  uint32_t seed = 123;             ///< --numpy-rand-seed
  ClickSplit split = ClickSplit::Train;
};

/// The hidden model of Note [Click data], fixed by a seed. Exposed for tests and calibration.
class ClickModel {
 public:
  static constexpr int kLatent = 4;
  static constexpr int kMaxPairs = 4;
  using Latent = std::array<double, kLatent>;

  ClickModel(int64_t num_tables, int64_t num_dense, uint32_t seed);
  int64_t num_tables() const { return num_tables_; }
  int64_t num_dense() const { return static_cast<int64_t>(v_.size()); }
  /// m_t(k) for rank k (0 = hottest).
  double main_effect(int64_t table, int64_t rank) const;
  /// u_t(k) for rank k.
  Latent latent(int64_t table, int64_t rank) const;
  /// The logit of one sample without the bias b, from its per-table bag sums (m_t(bag), u_t(bag),
  /// already divided by sqrt(bag size)) and its dense features x in [0, 1).
  double logit(std::span<const double> main, std::span<const Latent> latent, std::span<const float> dense) const;

 private:
  int64_t num_tables_;
  uint64_t key_;
  std::vector<double> v_;  // [n]
  std::vector<double> q_;  // [kLatent, n]
};

/// Batches of click data (Note [Click data]). Deterministic for a seed and split.
class ClickSource final : public IndexSource {
 public:
  /// Throws strata::Error naming the flag for no tables or non-positive rows
  /// (--arch-embedding-size), sizes (--mini-batch-size / --data-size / --num-batches, or
  /// --test-mini-batch-size / --test-data-size for the test split), bag size
  /// (--num-indices-per-lookup), alpha (--zipf-alpha) or a negative number of dense features.
  explicit ClickSource(ClickConfig config);
  bool next(Batch& batch) override;
  void reset() override;
  /// "click(alpha 1.05, train)".
  std::string describe() const override;
  const ClickConfig& config() const { return config_; }
  const ClickModel& model() const { return model_; }
  /// The row rank k (0 = hottest) of table t is stored as.
  int64_t row_of_rank(int64_t table, int64_t rank) const;
  /// The hidden logit of every sample of the last batch `next` returned (the Bayes-optimal score).
  std::span<const double> logits() const { return logits_; }
  /// The bias b of the hidden logit (Note [Click data]).
  double bias() const { return bias_; }

 private:
  /// n samples from `rng`: dense features, bags, and logits_ without the bias.
  void draw(RandomStream& rng, int64_t n, Batch& batch);
  void draw_bags(RandomStream& rng, int64_t t, int64_t batch, BagStorage& out);
  void compute_logits(const Batch& batch);
  ClickConfig config_;
  EpochShape shape_;
  ClickModel model_;
  RandomStream rng_;
  std::vector<ZipfSampler> samplers_;
  std::vector<LfsrPermutation> lfsrs_;
  std::vector<std::vector<int64_t>> ranks_;  // per table: the last batch's ranks, as its indices
  std::vector<double> logits_;
  double bias_ = 0.0;
  std::vector<double> main_;                // scratch: per table m_t(bag) of one sample
  std::vector<ClickModel::Latent> latent_;  // scratch: per table u_t(bag) of one sample
  int64_t next_batch_ = 0;
};

/// The click source of a run: the train split (`test` false; --mini-batch-size, --data-size or
/// --num-batches) or the test split (`test` true; --test-mini-batch-size, else --mini-batch-size;
/// --test-data-size samples, else a tenth of the training samples per epoch, at least one), both
/// over config.table_rows() with --arch-mlp-bot's first width of dense features,
/// --num-indices-per-lookup(-fixed), --zipf-alpha and --numpy-rand-seed. make_index_source
/// returns the train split for --data-generation click. Throws strata::Error naming the flag.
std::unique_ptr<IndexSource> make_click_source(const DLRMConfig& config, bool test);

}  // namespace strata::emb
