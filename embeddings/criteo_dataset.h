#pragma once
/// @file
/// The DLRM reference's Criteo pipeline (facebookresearch/dlrm data_utils.py and
/// dlrm_data_pytorch.py's CriteoDataset): preprocessing raw click logs into the reference's
/// processed .npz, reading it back, the train/test/val split with the reference's shuffles, and an
/// IndexSource over a split. The streaming readers (raw TSV with hashed ids, 40×int32 binary) stay
/// in criteo.h.
///
/// Note [Criteo preprocessing]
/// As data_utils.getCriteoAdData, whose files Strata writes and reads:
/// - Days: kaggle is one raw `train.txt` cut into 7 "days" by line count (divmod(lines, 7), the
///   remainder going one line each to the first days); terabyte is 24 raw files `<raw>_0` ..
///   `<raw>_23`. A line is a sample: `label \t I1..I13 \t C1..C26`; an empty field reads as 0
///   (for a categorical: the hex string "0").
/// - Sub-sampling (--data-sub-sample-rate r > 0): for every raw line of every day in order, one
///   numpy legacy uniform draw from the seeded stream (the reference draws a day's worth at the
///   start of each day); a line with label 0 whose draw is < r is dropped (its categories do not
///   enter the dictionaries).
/// - Dense values: negatives become 0 (log(x + 1) is applied at batch time, in float32).
/// - Categorical values: the hex hash (mod --max-ind-range when that is positive) maps, per column,
///   to a contiguous id in order of first appearance over the kept lines, day 0 first, each in file
///   order (what the reference's insertion-ordered dicts give). counts[k] is column k's number of
///   ids.
/// - Files: `<d_path><d_file>_day_count.npz` (total_per_file: kept lines per day, int64),
///   `<d_path><d_file>_fea_count.npz` (counts, int32 [26]) and the processed file with X_cat
///   (int32 [N, 26]), X_int (int32 [N, 13]), y (int32 [N]) and counts, where d_path is the raw
///   path's directory with a trailing '/', d_file the file name (kaggle: up to its first '.').
///   The processed file goes to --processed-data-file (the reference writes
///   `<d_path>kaggleAdDisplayChallenge_processed.npz` / `terabyte_processed.npz`, which is what its
///   scripts pass). The reference's per-day intermediate files are not written.
/// - Where Strata is stricter: labels must be 0 or 1, every line must have 40 fields, integers must
///   fit int32 and hashes be at most 16 hex digits; each error names the file, line and column.
///   A raw path without a directory is refused (the reference would put its files in '/').
/// - Speed: the raw files are mapped and cut into line-aligned chunks; a first parallel pass counts
///   lines, the second parses chunks in parallel (hand-written parsers), each building per-column
///   first-appearance lists of its own; after each wave of chunks the lists are merged into the
///   global dictionaries in chunk order (parallel over the 26 columns), which yields exactly the
///   sequential first-appearance order, and the chunk's ids are rewritten. The output arrays are
///   held in memory (as large as the processed data: 40 × 4 bytes per kept line) and deflated in
///   parallel (core/npz.h); the raw text never is.
///
/// Note [Criteo split]
/// As CriteoDataset(split=...) with memory_map off: with day offsets o (from total_per_file),
/// train is days 0..D-2, and the last day is cut by np.array_split(·, 2) into test (the first,
/// larger half) and val. --data-randomize `total` permutes the train indices with one
/// np.random.permutation, `day` permutes each train day in order, `none` keeps file order; test and
/// val are never shuffled. Split `none` is the whole file, under `total` in the reference's order
/// (it scatters the data by a permutation: sample i is the one that permutation put at i). The
/// stream is numpy's legacy MT19937 seeded with --numpy-rand-seed, consumed as in the reference:
/// first the sub-sampling draws when preprocessing ran in this process (Note [Criteo
/// preprocessing]), then the permutations. numpy's legacy shuffle is Fisher-Yates from the end with
/// its masked-rejection bounded integers (RandomStream::interval), so the orders equal numpy's.
/// Batches: ids are taken mod --max-ind-range when it is positive (as the reference's
/// __getitem__), dense features become log(x + 1) in float32, one index per bag per table.

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embeddings/index_source.h"
#include "embeddings/zipf.h"

namespace strata::emb {

/// The reference's file names for a raw path (Note [Criteo preprocessing]).
struct CriteoPaths {
  std::string d_path;                  ///< the raw file's directory with a trailing '/'
  std::string d_file;                  ///< kaggle: the file name up to its first '.'; terabyte: the file name
  std::string day_count;               ///< <d_path><d_file>_day_count.npz
  std::string fea_count;               ///< <d_path><d_file>_fea_count.npz
  std::string default_processed;       ///< <d_path>kaggleAdDisplayChallenge_processed.npz | terabyte_processed.npz
  std::vector<std::string> raw_files;  ///< kaggle: the file; terabyte: <raw>_0 .. <raw>_23
  int64_t days = 7;
  /// Throws strata::Error naming --data-set for a name other than kaggle / terabyte, and
  /// --raw-data-file for a path without a directory.
  static CriteoPaths of(std::string_view data_set, const std::string& raw_path);
};

struct CriteoPreprocessConfig {
  std::string data_set = "kaggle";  ///< --data-set
  std::string raw_data_file;        ///< --raw-data-file
  std::string processed_data_file;  ///< --processed-data-file ("" : the reference's default name)
  int64_t max_ind_range = -1;       ///< --max-ind-range
  double sub_sample_rate = 0.0;     ///< --data-sub-sample-rate
  bool compress = true;             ///< deflate the processed file (false with --memory-map)
  /// Draw the progress bar on stderr even when it is not a terminal.
  bool progress = false;
  /// Bytes of raw text per parse chunk (tests make it small to exercise the merge).
  std::size_t chunk_bytes = std::size_t{16} << 20;
};

struct CriteoPreprocessResult {
  std::string processed_file;
  std::vector<int64_t> total_per_file;  ///< kept lines per day
  std::vector<int64_t> counts;          ///< ids per column
  int64_t raw_lines = 0;
  int64_t rows = 0;            ///< kept lines
  uint64_t uniform_draws = 0;  ///< numpy draws consumed (sub-sampling)
  double seconds = 0;
};

/// Preprocesses as Note [Criteo preprocessing] says, consuming `rng` for sub-sampling. Writes the
/// three files (atomically); prints a progress bar on stderr when it is a terminal (or
/// config.progress) and one summary line always. Throws strata::Error naming the file, line and
/// column for bad input.
CriteoPreprocessResult preprocess_criteo(const CriteoPreprocessConfig& config, RandomStream& rng);

/// The processed arrays, in memory or mapped from the file (stored members with --memory-map).
class CriteoData {
 public:
  /// Reads `processed` (X_cat [N, 26], X_int [N, 13], y [N], counts [26]; any supported integer or
  /// integral float dtype, C or Fortran order, as the reference's own file has X_cat as a
  /// Fortran-order float64) and the day counts from `day_count_file` (total_per_file, `days`
  /// entries summing to N). With `memory_map`, stored int32 members are mapped, not read.
  /// Throws strata::Error naming the file and member for missing members, wrong shapes or dtypes,
  /// non-integral values, and day counts that do not add up.
  static std::shared_ptr<const CriteoData> load(const std::string& processed, const std::string& day_count_file,
                                                int64_t days, bool memory_map);
  ~CriteoData();

  int64_t rows() const { return rows_; }
  const std::vector<int64_t>& counts() const { return counts_; }
  /// days + 1 offsets: day d is rows [offsets[d], offsets[d + 1]).
  const std::vector<int64_t>& day_offsets() const { return day_offsets_; }
  const std::string& path() const { return path_; }
  /// Whether X_cat and X_int are mapped from the file.
  bool mapped() const { return mapped_; }

  int32_t label(int64_t i) const { return y_.at(i, 0); }
  int32_t dense(int64_t i, int64_t j) const { return x_int_.at(i, j); }
  int32_t category(int64_t i, int64_t k) const { return x_cat_.at(i, k); }

  /// An int32 matrix in C or Fortran order, owned or mapped (read with memcpy: mapped members
  /// need not be aligned).
  struct Matrix {
    const unsigned char* base = nullptr;
    int64_t row_stride = 0;  ///< elements
    int64_t col_stride = 0;
    std::vector<int32_t> owned;
    int32_t at(int64_t i, int64_t j) const {
      int32_t v;
      std::memcpy(&v, base + 4 * (i * row_stride + j * col_stride), 4);
      return v;
    }
  };

 private:
  CriteoData() = default;
  void load_member(const std::string& name, int64_t cols, Matrix& out, bool memory_map);
  void map_file();
  std::string path_;
  int64_t rows_ = 0;
  std::vector<int64_t> counts_;
  std::vector<int64_t> day_offsets_;
  Matrix x_cat_, x_int_, y_;
  bool mapped_ = false;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
};

enum class CriteoSplit : uint8_t { Train, Test, Val, None };
/// Parses "train" / "test" / "val" / "none"; throws naming `what` otherwise.
CriteoSplit parse_criteo_split(std::string_view text, std::string_view what = "split");
const char* to_string(CriteoSplit s);

/// The sample indices of a split in the reference's order (Note [Criteo split]); `randomize` is
/// "total", "day" or "none". Consumes `rng` as the reference does for that split.
std::vector<int64_t> criteo_split_indices(std::span<const int64_t> day_offsets, CriteoSplit split,
                                          std::string_view randomize, RandomStream& rng);

/// numpy's legacy RandomState.shuffle of a 1-d array (np.random.permutation shuffles a copy).
void numpy_shuffle(std::span<int64_t> values, RandomStream& rng);

/// Batches of a split (Note [Criteo split]).
struct CriteoSourceConfig {
  std::vector<int64_t> rows;  ///< rows per table (26)
  int64_t batch_size = 128;
  int64_t max_ind_range = -1;  ///< ids mod this when positive
  /// Ids >= rows wrap modulo rows (--scale-rows < 1); otherwise they are an error.
  bool wrap = false;
  /// At most this many samples per epoch (0: the whole split).
  int64_t max_samples = 0;
};

class CriteoDatasetSource final : public IndexSource {
 public:
  /// Throws strata::Error for rows that are not 26 positive counts, a non-positive batch size or
  /// an empty split.
  CriteoDatasetSource(std::shared_ptr<const CriteoData> data, std::vector<int64_t> order, CriteoSourceConfig config,
                      std::string name);
  /// Throws strata::Error naming the file, sample and table for an id out of range, and the file
  /// and sample for a label other than 0 or 1 (the reference trains on such labels: loss < 0).
  bool next(Batch& batch) override;
  void reset() override { next_ = 0; }
  std::string describe() const override { return name_; }
  int64_t num_samples() const { return static_cast<int64_t>(order_.size()); }

 private:
  std::shared_ptr<const CriteoData> data_;
  std::vector<int64_t> order_;
  CriteoSourceConfig config_;
  std::string name_;
  int64_t next_ = 0;
};

/// Everything a run needs from the Criteo flags.
struct CriteoDatasetConfig {
  std::string data_set = "kaggle";
  std::string raw_data_file;
  std::string processed_data_file;
  int64_t max_ind_range = -1;
  double sub_sample_rate = 0.0;
  std::string randomize = "total";
  uint32_t seed = 123;
  bool memory_map = false;
  bool progress = false;
};

/// A processed Criteo data set: preprocessed first when the processed file does not exist, then
/// loaded. The stream for the permutations starts at the seed and skips the draws preprocessing
/// consumed in this process (Note [Criteo split]).
class CriteoDataset {
 public:
  explicit CriteoDataset(const CriteoDatasetConfig& config);
  const CriteoData& data() const { return *data_; }
  std::shared_ptr<const CriteoData> shared_data() const { return data_; }
  const std::vector<int64_t>& counts() const { return data_->counts(); }
  const std::string& processed_file() const { return processed_; }
  /// The split's indices (each call replays the stream from the same state).
  std::vector<int64_t> indices(CriteoSplit split) const;
  /// A source over the split.
  std::unique_ptr<CriteoDatasetSource> source(CriteoSplit split, CriteoSourceConfig config) const;

 private:
  CriteoDatasetConfig config_;
  std::string processed_;
  uint64_t skip_draws_ = 0;
  std::shared_ptr<const CriteoData> data_;
};

/// The processed file a configuration reads: --processed-data-file, or the reference's default
/// name beside --raw-data-file.
std::string criteo_processed_path(const CriteoDatasetConfig& config);

/// counts of a data set without loading its arrays: from the processed file's `counts` when it
/// exists, else by preprocessing (which the dataset then reuses).
std::vector<int64_t> criteo_counts(const CriteoDatasetConfig& config);

}  // namespace strata::emb
