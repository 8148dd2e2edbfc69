#pragma once
/// @file
/// Index sources: where a DLRM's batches come from. A source fills a reusable Batch (dense
/// features, one CSR bag list per table, targets) per call, so the training loop allocates nothing
/// after the first batch. Generators here: the reference's `random` rules (RandomSource), its
/// `synthetic` stack-distance trace replay (SyntheticTraceSource) and FBGEMM-style skewed requests
/// with scrambling and reuse (ZipfSource); the Criteo readers live in criteo.h.
///
/// Note [Reference generators]
/// RandomSource and SyntheticTraceSource follow `dlrm_data_pytorch.py` (generate_dist_input_batch,
/// generate_synthetic_input_batch, trace_generate_lru, generate_random_output_batch) draw for draw:
/// one numpy-compatible stream (RandomStream) seeded with --numpy-rand-seed at the first batch of
/// every epoch (the reference's RandomDataset resets the seed on access to batch 0), dense features
/// first (B x n_dense uniforms), then per table and per sample the bag size (unless fixed) and the
/// bag's draws, then B targets. With the same seed and flags the indices, dense features and
/// targets equal the reference's bit for bit (gaussian draws up to libm rounding).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embeddings/zipf.h"

#include "embeddings/kernels.h"

namespace strata::emb {

/// One table's bags of one batch, in CSR form (emb::Bags views this storage).
struct BagStorage {
  std::vector<int64_t> indices;
  /// batch + 1 entries, offsets[0] == 0, non-decreasing, offsets[batch] == indices.size().
  std::vector<int64_t> offsets;
  /// Empty, or one per-sample weight per index.
  std::vector<float> weights;
};

/// One batch. Sources reuse the vectors (capacity is kept), so after the first batch `next` does
/// not allocate.
struct Batch {
  /// Samples in this batch (the last batch of an epoch may be smaller than the batch size).
  int64_t batch = 0;
  /// Dense features per sample.
  int64_t num_dense = 0;
  /// batch x num_dense, row-major.
  std::vector<float> dense;
  /// One target per sample.
  std::vector<float> targets;
  /// One bag list per table.
  std::vector<BagStorage> tables;

  int64_t num_tables() const { return static_cast<int64_t>(tables.size()); }
  /// Views of table k's bags. Throws strata::Error naming k for a table that does not exist.
  Bags bags(int64_t k) const;
  /// Sets the sizes (keeps capacity): batch, num_dense, dense, targets, `tables` entries with
  /// offsets of batch + 1; indices and weights are left for the source to fill.
  void reshape(int64_t batch, int64_t num_dense, int64_t num_tables);
};

/// A source of batches; an epoch is `num_batches()` calls of `next` returning true.
class IndexSource {
 public:
  virtual ~IndexSource();
  IndexSource(const IndexSource&) = delete;
  IndexSource& operator=(const IndexSource&) = delete;

  /// Fills `batch` with the next batch of the epoch; returns false (batch untouched) at its end.
  virtual bool next(Batch& batch) = 0;
  /// Starts the epoch over; generators replay the same batches (see Note [Reference generators]).
  virtual void reset() = 0;
  /// A short description for logs ("random", "synthetic", "zipf(1.05)", "criteo-tsv", ...).
  virtual std::string describe() const = 0;

  /// Batches per epoch.
  int64_t num_batches() const { return num_batches_; }
  /// Samples per batch (the last batch may hold fewer).
  int64_t batch_size() const { return batch_size_; }
  int64_t num_dense() const { return num_dense_; }
  int64_t num_tables() const { return static_cast<int64_t>(rows_.size()); }
  /// Rows per table: every index table k gets lies in [0, rows()[k]).
  std::span<const int64_t> rows() const { return rows_; }

 protected:
  IndexSource(std::vector<int64_t> rows, int64_t num_dense, int64_t batch_size, int64_t num_batches);
  std::vector<int64_t> rows_;
  int64_t num_dense_;
  int64_t batch_size_;
  int64_t num_batches_;
};

/// Batches per epoch and samples in the last one, as the reference computes them:
/// ceil(data_size / batch_size) batches, or `num_batches` of `batch_size` samples when
/// num_batches > 0. Throws strata::Error naming the flag for non-positive sizes.
struct EpochShape {
  int64_t num_batches = 0;
  int64_t data_size = 0;
  static EpochShape of(int64_t data_size, int64_t batch_size, int64_t num_batches);
  /// Samples in batch j.
  int64_t samples_in(int64_t j, int64_t batch_size) const;
};

/// Throws strata::Error "<what>: ..." unless `rows` names at least one table and every count is
/// positive (the generators' common check of --arch-embedding-size).
void check_rows(const std::vector<int64_t>& rows, const char* what);

/// The reference's variable bag size: round(max(1, U·min(rows, L))), rounding half to even (one
/// uniform draw from `rng`).
int64_t variable_bag_size(RandomStream& rng, int64_t rows, int64_t max_size);

/// --rand-data-dist.
enum class RandomDist : uint8_t { Uniform, Gaussian };
/// Parses "uniform" / "gaussian"; throws strata::Error naming --rand-data-dist otherwise.
RandomDist parse_random_dist(std::string_view text);

/// The reference's `random` data generation (REFERENCE.md §1; flags in parentheses).
struct RandomConfig {
  std::vector<int64_t> rows;                  ///< rows per table (--arch-embedding-size)
  int64_t num_dense = 4;                      ///< dense features (first width of --arch-mlp-bot)
  int64_t batch_size = 1;                     ///< --mini-batch-size
  int64_t data_size = 1;                      ///< --data-size
  int64_t num_batches = 0;                    ///< --num-batches (0: ceil(data_size / batch_size))
  int64_t num_indices_per_lookup = 10;        ///< --num-indices-per-lookup
  bool num_indices_per_lookup_fixed = false;  ///< --num-indices-per-lookup-fixed
  RandomDist dist = RandomDist::Uniform;      ///< --rand-data-dist
  double rand_data_min = 0.0;                 ///< --rand-data-min (gaussian only)
  double rand_data_max = 1.0;                 ///< --rand-data-max (gaussian only)
  double rand_data_mu = -1.0;                 ///< --rand-data-mu (gaussian; -1: (min + max) / 2)
  double rand_data_sigma = 1.0;               ///< --rand-data-sigma (gaussian only)
  bool round_targets = false;                 ///< --round-targets
  uint32_t seed = 123;                        ///< --numpy-rand-seed
  /// Also emit one per-sample weight per index, standard normal like FBGEMM's `weighted`
  /// requests (drawn from a second stream, so indices stay those of the reference).
  bool per_sample_weights = false;
};

/// The reference's `random` rules. Per table and sample: bag size L if fixed, else
/// round(max(1, U·min(rows, L))); uniform: indices unique(round(U·(rows - 1))) (sorted, distinct);
/// gaussian: unique(clip(N(mu, sigma), min, max)) truncated to integers (sorted; truncation can
/// repeat an index, as in the reference). Dense features U[0, 1), targets U[0, 1) (rounded with
/// round_targets).
class RandomSource final : public IndexSource {
 public:
  /// Throws strata::Error naming the flag for an empty table list, non-positive rows, sizes or
  /// bag size, and, for gaussian, a [min, max] range that is not inside [0, rows) for every table
  /// (the reference does not take gaussian indices modulo the table size).
  explicit RandomSource(RandomConfig config);
  bool next(Batch& batch) override;
  void reset() override;
  std::string describe() const override;
  const RandomConfig& config() const { return config_; }

 private:
  RandomConfig config_;
  EpochShape shape_;
  RandomStream rng_;
  RandomStream weight_rng_;
  int64_t next_batch_ = 0;
  std::vector<double> scratch_;
  std::vector<int64_t> group_;
};

/// One table's stack-distance profile, a `dist_emb_{j}.log` file of the reference's
/// `synthetic` generation: line 1 the unique accesses in first-use order, line 2 the distinct
/// stack distances (ascending; 0 = a new reference), line 3 their cumulative probabilities.
struct TraceProfile {
  std::string path;
  std::vector<int64_t> unique_accesses;
  std::vector<int64_t> stack_distances;
  std::vector<double> cumulative;

  /// Reads and validates a file; throws strata::Error naming the file (and the line and entry)
  /// when it is missing, has fewer than three lines, holds something that is not a number, has
  /// lines 2 and 3 of different lengths, negative or unsorted stack distances, a stack distance
  /// larger than the number of unique accesses, or probabilities outside [0, 1] or decreasing.
  static TraceProfile read(const std::string& path);
  /// Parses the file's text (for tests and embedded profiles); `path` names it in errors.
  static TraceProfile parse(std::string_view text, const std::string& path);
};

/// Per table `--data-trace-file` path: "{j}" is replaced by the table number when present,
/// otherwise every 'j' of the file name (not of the directories) is, as the reference's
/// `file_path.replace("j", str(i))` does for its default "./input/dist_emb_j.log".
std::string trace_file_for_table(std::string_view pattern, int64_t table);

/// The reference's `synthetic` data generation.
struct SyntheticConfig {
  std::vector<int64_t> rows;  ///< rows per table (--arch-embedding-size)
  int64_t num_dense = 4;
  int64_t batch_size = 1;
  int64_t data_size = 1;
  int64_t num_batches = 0;
  int64_t num_indices_per_lookup = 10;
  bool num_indices_per_lookup_fixed = false;
  std::string trace_file = "./input/dist_emb_j.log";  ///< --data-trace-file
  bool enable_padding = false;                        ///< --data-trace-enable-padding
  bool round_targets = false;
  uint32_t seed = 123;
};

/// Replays stack-distance profiles as the reference's trace_generate_lru does. Each bag starts
/// from the profile's initial LRU list (the reference re-reads the file for every bag): for each
/// of the bag's L draws, a stack distance sd is drawn from the cumulative distribution (restricted
/// to distances <= the number of new references so far while that is below the largest distance);
/// sd = 0 takes the least recently used line, sd > 0 the sd-th most recent one, and the line moves
/// to the most recent position. The bag's indices are the sorted distinct lines, mod rows.
class SyntheticTraceSource final : public IndexSource {
 public:
  /// Reads one profile per table (trace_file_for_table); throws strata::Error naming
  /// --data-trace-file and the table for a missing or malformed file, or the flag for bad sizes.
  explicit SyntheticTraceSource(SyntheticConfig config);
  /// With profiles given directly (one per table).
  SyntheticTraceSource(SyntheticConfig config, std::vector<TraceProfile> profiles);
  bool next(Batch& batch) override;
  void reset() override;
  std::string describe() const override;
  const TraceProfile& profile(int64_t table) const { return profiles_.at(static_cast<std::size_t>(table)); }

  /// Scratch of generate_lru: the lines moved to the recent end, and their initial positions.
  struct LruScratch {
    std::vector<int64_t> moved;
    std::vector<int64_t> removed;
  };
  /// One bag's trace of `length` lines from the profile's initial LRU list, appended to `out`
  /// (trace_generate_lru; exposed for tests). O(length^2) time and O(length) memory whatever the
  /// profile's size: the list is the profile's (never copied) with the moved lines overlaid.
  static void generate_lru(const TraceProfile& profile, int64_t length, bool enable_padding, RandomStream& rng,
                           std::vector<int64_t>& out, LruScratch& scratch);

 private:
  SyntheticConfig config_;
  EpochShape shape_;
  std::vector<TraceProfile> profiles_;
  RandomStream rng_;
  int64_t next_batch_ = 0;
  std::vector<int64_t> trace_;
  LruScratch scratch_;
};

/// How ZipfSource scatters hot ranks over a table.
enum class Scramble : uint8_t {
  None,         ///< rank k is row k (hot rows are adjacent)
  Permutation,  ///< a fixed random permutation per table (FBGEMM's generator); O(rows) memory
  Lfsr,         ///< a maximal-length LFSR at a random phase per table (the dissertation's); O(1) memory
};
/// Parses "none" / "permutation" / "lfsr"; throws strata::Error otherwise.
Scramble parse_scramble(std::string_view text);

/// Skewed requests in the manner of FBGEMM's request generator and the dissertation's experiments.
struct ZipfConfig {
  std::vector<int64_t> rows;  ///< rows per table
  int64_t num_dense = 4;
  int64_t batch_size = 2048;
  int64_t num_batches = 1;
  /// Indices per bag L; with variable_bag_size the reference's rule round(max(1, U·min(rows, L))).
  int64_t bag_size = 1;
  bool variable_bag_size = false;
  /// Zipf exponent. FBGEMM's convention: alpha <= 1 draws uniform indices (L per bag, sorted,
  /// repeats possible), alpha > 1 draws Zipf(alpha) ranks and keeps the first L distinct per bag.
  double alpha = 1.05;
  /// false: Zipf(alpha) for every alpha > 0, e.g. the dissertation's Zipf(1).
  bool uniform_at_or_below_one = true;
  /// Zipf ranks are drawn on {1..support} and mapped to (x - 1) mod rows; 0 means support = rows
  /// (the finite Zipf whose static-optimal hit rate REFERENCE.md §2 gives). numpy's zipf (which
  /// FBGEMM uses) has unbounded support; a large support approximates it.
  int64_t support = 0;
  Scramble scramble = Scramble::Lfsr;
  /// Fraction of each batch's index slots (per table) copied from the same slots of the previous
  /// batch, chosen at random (FBGEMM's `reuse`); in [0, 1].
  double reuse = 0.0;
  /// Standard-normal per-sample weights (FBGEMM's `weighted`).
  bool per_sample_weights = false;
  bool round_targets = false;
  uint32_t seed = 123;
  /// Permutation scrambling refuses tables with more rows than this (4 bytes per row).
  int64_t max_permutation_rows = int64_t{1} << 28;
};

/// Zipf / uniform requests: dense features U[0, 1), targets U[0, 1) (rounded with round_targets),
/// indices per ZipfConfig. Deterministic for a seed; every table has its own scrambling phase.
class ZipfSource final : public IndexSource {
 public:
  /// Throws strata::Error naming the setting for bad sizes, alpha <= 0, reuse outside [0, 1],
  /// a bag size larger than a table with distinct Zipf bags, or a permutation that is too large.
  explicit ZipfSource(ZipfConfig config);
  bool next(Batch& batch) override;
  void reset() override;
  std::string describe() const override;
  const ZipfConfig& config() const { return config_; }
  /// True when indices are Zipf-distributed (false: uniform).
  bool zipf() const { return zipf_; }
  /// The row a rank k (0 = hottest) of table t maps to.
  int64_t row_of_rank(int64_t table, int64_t rank) const;

 private:
  void generate_table(int64_t t, int64_t batch, BagStorage& out);
  void apply_reuse(int64_t t, BagStorage& out);
  ZipfConfig config_;
  bool zipf_ = false;
  RandomStream rng_;
  RandomStream weight_rng_;
  std::vector<ZipfSampler> samplers_;
  std::vector<LfsrPermutation> lfsrs_;
  std::vector<std::vector<uint32_t>> permutations_;
  std::vector<std::vector<int64_t>> previous_;  // the previous batch's indices per table (reuse)
  std::vector<uint32_t> slots_;                 // scratch for choosing reused slots
  std::vector<int64_t> seen_keys_;              // scratch: distinct-per-bag hash set
  std::vector<uint32_t> seen_stamp_;
  uint32_t stamp_ = 0;
  int64_t next_batch_ = 0;
};

}  // namespace strata::emb
