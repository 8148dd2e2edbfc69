// DLRM's data and memory set-up (embeddings/dlrm.h): the dense working set, the process's tiered
// memory configured from the flags, and the index sources — random, click, the Criteo data sets
// (processed .npz or the mlperf binary files), each behind a PrefetchSource.

#include "embeddings/dlrm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/file.h"
#include "core/npz.h"
#include "core/rng.h"
#include "core/text.h"
#include "core/threading.h"
#include "embeddings/click_source.h"
#include "embeddings/criteo.h"
#include "embeddings/criteo_dataset.h"
#include "embeddings/prefetch_source.h"
#include "memory/copy_engine.h"
#include "memory/tiered_memory.h"

namespace strata::emb {

// ---- data ---------------------------------------------------------------------------------------------

std::size_t dense_working_set_bytes(const DLRMConfig& c) {
  const std::vector<int64_t>& bot = c.arch_mlp_bot;
  std::vector<int64_t> top = {c.interaction_width()};
  top.insert(top.end(), c.arch_mlp_top.begin(), c.arch_mlp_top.end());
  const std::vector<int64_t> dims = c.table_dims();
  const int64_t d = bot.back();
  // Parameters (the projections of mixed-dimension tables included), their gradients and the
  // dense optimizer's state (Adagrad's sums; SGD has none).
  int64_t params = 0, widths = 0, widest = 0;
  for (const std::vector<int64_t>* mlp : std::initializer_list<const std::vector<int64_t>*>{&bot, &top})
    for (std::size_t i = 0; i + 1 < mlp->size(); ++i) {
      params += (*mlp)[i] * (*mlp)[i + 1] + (*mlp)[i + 1];
      widths += (*mlp)[i + 1];
      widest = std::max({widest, (*mlp)[i], (*mlp)[i + 1]});
    }
  for (const int64_t dk : dims)
    if (dk != d) params += dk * d;
  const int64_t copies = c.optimizer == OptimizerKind::SGD ? 2 : 3;
  // Per sample: the features, pooled embeddings and interaction, every layer's output and
  // pre-activation, twice over for a step (forward values and backward gradients); a test pass
  // holds the features, embeddings and interaction and one layer's input and output at a time.
  const int64_t features = bot.front() + static_cast<int64_t>(dims.size()) * d + top.front();
  const int64_t train = 2 * (features + 2 * widths) * c.mini_batch_size;
  const int64_t test_batch = c.test_mini_batch_size > 0 ? c.test_mini_batch_size : c.mini_batch_size;
  const int64_t test = (features + 3 * widest) * test_batch;
  constexpr std::size_t kSmallTensors = std::size_t{4} << 20;
  return static_cast<std::size_t>(copies * params + std::max(train, test)) * sizeof(float) + kSmallTensors;
}

void configure_process_memory(const DLRMConfig& c) {
  if (memory::tiered_memory_created()) return;
  memory::TieredConfig t = memory::TieredConfig::from_env();
  const bool fast_from_env = environment::fast_bytes().has_value();
  if (fast_from_env) {
    STRATA_CHECK(t.fast_bytes >= c.fast_budget, "STRATA_FAST_BYTES: the process's fast tier of ",
                 format_bytes(static_cast<double>(t.fast_bytes)), " cannot hold --fast-budget ",
                 format_bytes(static_cast<double>(c.fast_budget)),
                 " of embedding rows; raise it or unset it "
                 "(strata-dlrm then sizes the fast tier from --fast-budget)");
  } else {
    t.fast_bytes = c.fast_budget + dense_working_set_bytes(c);
    t.fast_initial = 0;  // an explicit budget is mapped at once
  }
  if (!c.slow_dir.empty()) {
    t.slow_dir = c.slow_dir;
    if (!environment::slow_bytes()) t.slow_bytes = memory::TieredConfig::default_slow_bytes(t.slow_dir);
  }
  try {
    memory::configure_tiered_memory(t);
  } catch (const Error& e) {
    STRATA_FAIL(fast_from_env ? "STRATA_FAST_BYTES / " : "--fast-budget / ",
                c.slow_dir.empty() ? "STRATA_SLOW_DIR" : "--slow-dir",
                ": cannot create the process's tiered memory: ", e.what());
  }
}

namespace {

// ---- Criteo data sets (Note [Criteo preprocessing], Note [Criteo split]) ----------------------------

CriteoDatasetConfig criteo_config_of(const DLRMConfig& c) {
  CriteoDatasetConfig d;
  d.data_set = c.data_set;
  d.raw_data_file = c.raw_data_file;
  d.processed_data_file = c.processed_data_file;
  d.max_ind_range = c.max_ind_range;
  d.sub_sample_rate = c.data_sub_sample_rate;
  d.randomize = c.data_randomize;
  d.seed = static_cast<uint32_t>(c.numpy_rand_seed);
  d.memory_map = c.memory_map;
  return d;
}

/// A --processed-data-file that exists and is not a zip archive: the 40 x int32 binary.
bool is_legacy_binary(const DLRMConfig& c) {
  std::error_code ec;
  if (c.mlperf_bin_loader || c.processed_data_file.empty() ||
      !std::filesystem::is_regular_file(c.processed_data_file, ec))
    return false;
  std::FILE* f = open_file_for_reading(c.processed_data_file, "--processed-data-file");
  char magic[4] = {0, 0, 0, 0};
  const std::size_t got = std::fread(magic, 1, 4, f);
  std::fclose(f);
  return !(got == 4 && std::memcmp(magic, "PK\x03\x04", 4) == 0);
}

/// data_loader_terabyte's names: <processed dir>/<processed name up to '.'>_<split>.bin.
std::string mlperf_bin_path(const DLRMConfig& c, CriteoSplit split) {
  const std::string& p = c.processed_data_file;
  const std::size_t slash = p.rfind('/');
  STRATA_CHECK(!p.empty() && slash != std::string::npos, "--mlperf-bin-loader: --processed-data-file ", quote_path(p),
               " needs a directory part (the binaries are <dir>/<name>_train.bin and _test.bin)");
  const std::string name = p.substr(slash + 1);
  return p.substr(0, slash + 1) + name.substr(0, name.find('.')) + "_" + to_string(split) + ".bin";
}

/// Writes a split's samples as 40 x int32 records (label, 13 dense, 26 ids), atomically.
void write_mlperf_bin(const CriteoDataset& ds, CriteoSplit split, const std::string& path) {
  const std::vector<int64_t> order = ds.indices(split);
  const CriteoData& d = ds.data();
  std::vector<int32_t> records;
  AtomicFile f(path, "--mlperf-bin-loader");  // Note [Atomic file writes]
  for (std::size_t at = 0; at < order.size(); at += 65536) {
    const std::size_t n = std::min<std::size_t>(65536, order.size() - at);
    records.assign(n * kCriteoFields, 0);
    for (std::size_t s = 0; s < n; ++s) {
      int32_t* r = records.data() + s * kCriteoFields;
      const int64_t i = order[at + s];
      r[0] = d.label(i);
      for (int64_t j = 0; j < kCriteoDense; ++j) r[1 + j] = d.dense(i, j);
      for (int64_t k = 0; k < kCriteoSparse; ++k) r[1 + kCriteoDense + k] = d.category(i, k);
    }
    f.write(records.data(), records.size() * sizeof(int32_t));
  }
  f.commit();
}

int64_t split_batch_size(const DLRMConfig& c, CriteoSplit split) {
  return split == CriteoSplit::Train || c.test_mini_batch_size <= 0 ? c.mini_batch_size : c.test_mini_batch_size;
}

std::unique_ptr<IndexSource> make_mlperf_source(const DLRMConfig& c, CriteoSplit split) {
  STRATA_CHECK(split != CriteoSplit::None, "--mlperf-bin-loader: there is no binary for split none");
  const std::string bin = mlperf_bin_path(c, split);
  std::error_code ec;
  if (!std::filesystem::exists(bin, ec)) write_mlperf_bin(CriteoDataset(criteo_config_of(c)), split, bin);
  CriteoConfig b;
  b.path = bin;
  b.rows = with_dataset_rows(c).table_rows();
  b.batch_size = split_batch_size(c, split);
  b.wrap = true;  // ids mod --max-ind-range, as CriteoBinDataset
  b.max_samples = split == CriteoSplit::Train && c.num_batches > 0 ? c.num_batches * c.mini_batch_size : 0;
  return std::make_unique<PrefetchSource>(std::make_unique<CriteoBinarySource>(b));
}

}  // namespace

bool has_test_split(const DLRMConfig& c) {
  return c.data_generation == DataGeneration::Click ||
         (c.data_generation == DataGeneration::Dataset && !is_legacy_binary(c));
}

namespace {

std::unique_ptr<IndexSource> make_dataset_source(const DLRMConfig& c, CriteoSplit split) {
  if (c.mlperf_bin_loader) return make_mlperf_source(c, split);
  if (is_legacy_binary(c)) {
    STRATA_CHECK(split == CriteoSplit::Train, "--processed-data-file ", quote_path(c.processed_data_file),
                 ": a 40 x int32 binary has no test split (give the processed .npz)");
    CriteoConfig d;
    d.path = c.processed_data_file;
    d.rows = c.table_rows();
    d.batch_size = c.mini_batch_size;
    d.wrap = c.max_ind_range > 0 || c.scale_rows < 1.0;
    d.max_samples = c.num_batches > 0 ? c.num_batches * c.mini_batch_size : 0;
    return std::make_unique<CriteoBinarySource>(d);
  }
  const CriteoDataset ds(criteo_config_of(c));
  CriteoSourceConfig s;
  s.rows = with_dataset_rows(c).table_rows();
  s.batch_size = split_batch_size(c, split);
  s.max_ind_range = c.max_ind_range;
  s.wrap = c.scale_rows < 1.0;
  s.max_samples = split == CriteoSplit::Train && c.num_batches > 0 ? c.num_batches * c.mini_batch_size : 0;
  return std::make_unique<PrefetchSource>(ds.source(split, s));
}

}  // namespace

std::vector<int64_t> dataset_counts(const DLRMConfig& c) {
  STRATA_CHECK(c.data_generation == DataGeneration::Dataset, "dataset_counts: --data-generation is ",
               to_string(c.data_generation), ", not dataset");
  if (c.mlperf_bin_loader) {
    const std::string file = c.raw_data_file + "_fea_count.npz";
    const std::vector<int64_t> counts = npy::read_integers(npy::NpzReader(file), "counts");
    STRATA_CHECK(counts.size() == static_cast<std::size_t>(kCriteoSparse), "--mlperf-bin-loader: ", quote_path(file),
                 " holds ", counts.size(), " counts, expected ", kCriteoSparse);
    return counts;
  }
  return criteo_counts(criteo_config_of(c));
}

DLRMConfig with_dataset_rows(const DLRMConfig& c) {
  if (c.data_generation != DataGeneration::Dataset || c.arch_embedding_size_given || is_legacy_binary(c)) return c;
  DLRMConfig out = c;
  out.arch_embedding_size = dataset_counts(c);
  for (int64_t& r : out.arch_embedding_size) r = std::max<int64_t>(r, 1);  // an empty column still needs a row
  out.arch_embedding_size_given = true;
  return out;
}

std::unique_ptr<IndexSource> make_index_source(const DLRMConfig& c, CriteoSplit split) {
  const bool has_splits = c.data_generation == DataGeneration::Dataset || c.data_generation == DataGeneration::Click;
  STRATA_CHECK(has_splits || split == CriteoSplit::Train || split == CriteoSplit::None, "the ",
               split == CriteoSplit::Test ? "test" : "val", " split: only --data-generation dataset and click have ",
               "splits, got --data-generation ", to_string(c.data_generation));
  const std::vector<int64_t> rows = c.table_rows();
  const int64_t dense = c.arch_mlp_bot.front();
  const auto seed = static_cast<uint32_t>(c.numpy_rand_seed);
  switch (c.data_generation) {
    case DataGeneration::Random: {
      RandomConfig r;
      r.rows = rows;
      r.num_dense = dense;
      r.batch_size = c.mini_batch_size;
      r.data_size = c.data_size;
      r.num_batches = c.num_batches;
      r.num_indices_per_lookup = c.num_indices_per_lookup;
      r.num_indices_per_lookup_fixed = c.num_indices_per_lookup_fixed;
      r.dist = parse_random_dist(c.rand_data_dist);
      r.rand_data_min = c.rand_data_min;
      r.rand_data_max = c.rand_data_max;
      r.rand_data_mu = c.rand_data_mu;
      r.rand_data_sigma = c.rand_data_sigma;
      r.round_targets = c.round_targets;
      r.seed = seed;
      return std::make_unique<RandomSource>(r);
    }
    case DataGeneration::Synthetic: {
      SyntheticConfig s;
      s.rows = rows;
      s.num_dense = dense;
      s.batch_size = c.mini_batch_size;
      s.data_size = c.data_size;
      s.num_batches = c.num_batches;
      s.num_indices_per_lookup = c.num_indices_per_lookup;
      s.num_indices_per_lookup_fixed = c.num_indices_per_lookup_fixed;
      s.trace_file = c.data_trace_file;
      s.enable_padding = c.data_trace_enable_padding;
      s.round_targets = c.round_targets;
      s.seed = seed;
      return std::make_unique<SyntheticTraceSource>(s);
    }
    case DataGeneration::Zipf: {
      ZipfConfig z;
      z.rows = rows;
      z.num_dense = dense;
      z.batch_size = c.mini_batch_size;
      z.num_batches = c.batches_per_epoch();
      z.bag_size = c.num_indices_per_lookup;
      z.variable_bag_size = !c.num_indices_per_lookup_fixed;
      z.alpha = c.zipf_alpha;
      z.uniform_at_or_below_one = false;  // --data-generation zipf is Zipf for every alpha > 0
      z.scramble = Scramble::Lfsr;        // the dissertation's scrambling
      z.reuse = c.reuse;
      z.round_targets = c.round_targets;
      z.seed = seed;
      try {
        return std::make_unique<ZipfSource>(z);
      } catch (const Error& e) {
        STRATA_FAIL("--data-generation zipf (--num-indices-per-lookup ", c.num_indices_per_lookup, ", --zipf-alpha ",
                    c.zipf_alpha, ", --reuse ", c.reuse, "): ", e.what());
      }
    }
    case DataGeneration::Click:  // its test split for test and val; generated ahead on a thread
      return std::make_unique<PrefetchSource>(
          make_click_source(c, split == CriteoSplit::Test || split == CriteoSplit::Val));
    case DataGeneration::Dataset: return make_dataset_source(c, split);
  }
  return nullptr;
}

}  // namespace strata::emb
