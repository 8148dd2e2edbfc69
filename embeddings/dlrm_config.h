#pragma once
/// @file
/// The configuration of a DLRM training run (`strata-dlrm`, `strata.dlrm.DLRM`): every flag of the
/// public reference script `dlrm_s_pytorch.py` (facebookresearch/dlrm; REFERENCE.md §1) with the
/// reference's default, Strata's own tier and data flags, presets, and validation whose messages
/// name the offending flag.
///
/// Note [DLRM command line]
/// - Both `--flag=value` and `--flag value` work; store-true flags (`--print-time`) take no value.
///   The reference's `type=bool` flags (`--round-targets`, `--num-indices-per-lookup-fixed`, ...)
///   take an explicit True/False/1/0 (argparse would read "False" as true; Strata refuses the
///   ambiguity rather than copying it).
/// - A preset (`--preset NAME`) is applied first wherever it stands on the command line; the other
///   flags then override it in order. With no arguments at all the run is the embedded default job
///   (`--preset default`): a DLRM whose tables are 4x the fast budget, slow tier on the model.
/// - Flags of the reference that Strata does not implement are refused with a message saying so
///   (GPU, quantization, mixed dimensions, quotient-remainder, MLPerf binary loaders, ONNX, distributed);
///   flags that have no effect in a single in-process run (`--num-workers`, `--memory-map`,
///   `--sync-dense-params`, ...) are accepted and documented as such in dlrm_usage().

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/text.h"
#include "embeddings/table.h"

namespace strata::emb {

enum class DataGeneration : uint8_t {
  Random,     ///< the reference's random rules (uniform/gaussian dense, unique uniform indices)
  Synthetic,  ///< the reference's stack-distance trace files (--data-trace-file)
  Dataset,    ///< Criteo: the reference's processed .npz (made from --raw-data-file when missing)
  Zipf,       ///< Strata: Zipf(--zipf-alpha) indices, scrambled per table, --reuse of the last batch
  Click,      ///< Strata: Zipf(--zipf-alpha) ids with labels from a hidden model (Note [Click data])
};
enum class LossFunction : uint8_t { MSE, BCE, WBCE };
/// The reference applies one optimizer to every parameter: `sgd` (SGD everywhere), `adagrad`
/// (torch.optim.Adagrad everywhere: element-wise, also on the tables), `rwsadagrad` (the
/// reference's RWSAdagrad: row-wise on the tables' sparse gradients, element-wise Adagrad on the
/// dense parameters).
enum class OptimizerKind : uint8_t { SGD, Adagrad, RowWiseAdagrad };
enum class InteractionOp : uint8_t { Dot, Cat };
/// --weighted-pooling: none, `fixed` (per-sample weights of one, as the reference's "fixed" mode)
/// or `learned` (the reference's trainable v_W_l[k]: one weight per row, initially 1; the
/// per-sample weight of index i is v_W_l[k][i]; embeddings/kernels.h LearnedPoolingWeights).
enum class WeightedPooling : uint8_t { None, Fixed, Learned };
/// --qr-operation: how a quotient-remainder table combines its two lookups (the reference's
/// QREmbeddingBag): element-wise product, sum, or concatenation (each half d wide, so the feature
/// is 2d wide and --arch-mlp-bot must end in 2d).
enum class QROperation : uint8_t { Mult, Add, Concat };

/// --slow-tier-model (core/config.h parse_slow_tier_model, the spellings of STRATA_SLOW_MODEL):
/// auto (the process's model: STRATA_SLOW_MODEL, by default on unless the slow tier is a real
/// device), off, default (the dissertation's Optane ratios against this machine's measured DRAM
/// bandwidth), or custom R,W,L (read GB/s, write GB/s, latency ns). Anything but auto sets the
/// process's model (Note [One tiered memory per process], embeddings/dlrm.h).
using strata::SlowTierModelSpec;

/// Every option of a run. Field names are the reference's argparse destinations (`args.<name>`);
/// defaults are the reference's. Strata's additions follow.
struct DLRMConfig {
  // ---- architecture ----
  int64_t arch_sparse_feature_size = 2;
  std::vector<int64_t> arch_embedding_size = {4, 3, 2};
  std::vector<int64_t> arch_mlp_bot = {4, 3, 2};
  /// Widths after the interaction (the script prepends the interaction width).
  std::vector<int64_t> arch_mlp_top = {4, 2, 1};
  InteractionOp arch_interaction_op = InteractionOp::Dot;
  bool arch_interaction_itself = false;
  WeightedPooling weighted_pooling = WeightedPooling::None;
  std::string activation_function = "relu";
  /// Mixed-dimension embeddings (the reference's md_solver and PrEmbeddingBag; Note [DLRM table
  /// kinds] in dlrm.h): tables of more than md_threshold rows get the dimension the power-law
  /// rule gives (temperature md_temperature, rounded to a power of 2 with md_round_dims) and a
  /// bias-free projection to d.
  bool md_flag = false;
  int64_t md_threshold = 200;
  double md_temperature = 0.3;
  bool md_round_dims = false;
  /// Quotient-remainder embeddings (the reference's QREmbeddingBag): tables of more than
  /// qr_threshold rows become a quotient table of ceil(rows / qr_collisions) rows and a remainder
  /// table of qr_collisions rows, combined by qr_operation.
  bool qr_flag = false;
  int64_t qr_threshold = 200;
  QROperation qr_operation = QROperation::Mult;
  int64_t qr_collisions = 4;

  // ---- loss ----
  LossFunction loss_function = LossFunction::MSE;
  std::vector<double> loss_weights = {1.0, 1.0};
  double loss_threshold = 0.0;
  bool round_targets = false;

  // ---- data ----
  int64_t data_size = 1;
  int64_t num_batches = 0;
  DataGeneration data_generation = DataGeneration::Random;
  std::string rand_data_dist = "uniform";
  double rand_data_min = 0.0;
  double rand_data_max = 1.0;
  double rand_data_mu = -1.0;
  double rand_data_sigma = 1.0;
  std::string data_trace_file = "./input/dist_emb_j.log";
  bool data_trace_enable_padding = false;
  std::string data_set = "kaggle";
  std::string raw_data_file;
  std::string processed_data_file;
  std::string data_randomize = "total";
  int64_t max_ind_range = -1;
  double data_sub_sample_rate = 0.0;
  int64_t num_indices_per_lookup = 10;
  bool num_indices_per_lookup_fixed = false;
  int64_t num_workers = 0;
  /// Stored int32 members of the processed file are mapped, not read (Strata writes the processed
  /// file uncompressed then); the reference's per-day memory-map files are not used.
  bool memory_map = false;
  /// No effect: Strata's preprocessing is parallel anyway (the reference forks one process per day).
  bool dataset_multiprocessing = false;
  /// The MLPerf binaries `<processed stem>_train.bin` / `_test.bin` (40 x int32 per sample), read
  /// streaming; counts from `<raw>_fea_count.npz` (data_loader_terabyte.CriteoBinDataset).
  bool mlperf_bin_loader = false;
  /// --arch-embedding-size was given on the command line (datasets otherwise take the rows from
  /// the data's counts, as the reference always does).
  bool arch_embedding_size_given = false;

  // ---- training ----
  int64_t mini_batch_size = 1;
  int64_t nepochs = 1;
  double learning_rate = 0.01;
  OptimizerKind optimizer = OptimizerKind::SGD;
  int64_t print_precision = 5;
  int64_t numpy_rand_seed = 123;
  bool sync_dense_params = true;
  bool inference_only = false;
  int64_t lr_num_warmup_steps = 0;
  int64_t lr_decay_start_step = 0;
  int64_t lr_num_decay_steps = 0;

  // ---- reporting ----
  int64_t print_freq = 1;
  int64_t test_freq = -1;
  int64_t test_mini_batch_size = -1;
  int64_t test_num_workers = -1;
  bool print_time = false;
  bool print_wall_time = false;
  bool debug_mode = false;
  bool enable_profiling = false;
  std::string save_model;
  std::string load_model;
  bool mlperf_logging = false;
  double mlperf_acc_threshold = 0.0;
  double mlperf_auc_threshold = 0.0;

  // ---- Strata ----
  /// The preset applied first ("" for none): tiny, random-bench, kaggle, mlperf40M, default.
  std::string preset;
  /// Every table's row count is multiplied by this (rounded, at least 1): fits large presets.
  double scale_rows = 1.0;
  /// Bytes of DRAM for embedding rows (tables placed in DRAM and the cached tables' pages).
  std::size_t fast_budget = std::size_t{1} << 30;
  /// Directory of the file-backed slow tier.
  /// The slow tier's directory; empty: the process's (STRATA_SLOW_DIR, else /tmp).
  std::string slow_dir;
  /// simple | static | dynamic | auto (dissertation §5.6.1; auto is Strata's default policy).
  std::string emb_policy = "auto";
  /// Fraction of each table's rows the cache may hold; < 0: derived from the fast budget.
  double cache_fraction = -1.0;
  SlowTierModelSpec slow_tier_model;
  /// Thread cap (0: strata's default, STRATA_NUM_THREADS or the hardware threads).
  int64_t threads = 0;
  /// Zipf exponent and the fraction of each batch copied from the previous one (--data-generation zipf).
  double zipf_alpha = 1.05;
  double reuse = 0.0;
  /// Samples of the click data's test split (0: a tenth of the training samples per epoch).
  int64_t test_data_size = 0;
  /// Element type of the table rows.
  ElemType emb_dtype = ElemType::F32;
  /// After every training step, check the loss, the dense parameters and the embedding rows the
  /// step updated for NaN and ±inf; stop at the first (Note [DLRM finite check] in dlrm.h).
  bool check_finite = false;
  /// Write the run's figures as JSON here ("" for none), atomically.
  std::string json;
  /// --dist-backend (the reference's flag): "" for one process, "mpi" for a DistributedDLRM run over
  /// every rank of `mpirun` (Note [Distributed strata-dlrm] in embeddings/dist/dlrm_dist_run.h).
  std::string dist_backend;
  /// The fixed chunks the global batch splits into with --dist-backend (DistributedDLRMConfig::chunks):
  /// at least the rank count; the results depend on it, never on the rank count.
  int64_t dist_chunks = 8;
  /// Draw the train loss and the test metrics over iterations into this PNG ("" for none).
  std::string plot;
  /// --help was given.
  bool help = false;

  /// Row count of every table after --scale-rows (and --max-ind-range for datasets).
  std::vector<int64_t> table_rows() const;
  /// Width of every feature the interaction combines: d, or 2d with --qr-operation concat.
  int64_t feature_width() const;
  /// Width of the top MLP's input: w + F(F−1)/2 (dot; F(F+1)/2 with itself) or F·w (cat),
  /// F = tables + 1, w = feature_width().
  int64_t interaction_width() const;
  /// Per table, the dimension it is stored with: d, or with --md-flag the reference's md_solver
  /// dimension for tables of more than --md-threshold rows.
  std::vector<int64_t> table_dims() const;
  /// Whether table k (of table_rows()) is a quotient-remainder or a mixed-dimension table.
  bool is_qr_table(int64_t rows) const { return qr_flag && rows > qr_threshold; }
  bool is_md_table(int64_t rows) const { return md_flag && rows > md_threshold; }
  /// Every table as stored, in order (Note [DLRM table kinds] in dlrm.h): per logical table k
  /// one (a quotient-remainder table two: quotient, then remainder).
  struct StoredTable {
    int64_t feature = 0;  ///< the logical table
    int64_t part = 0;     ///< 0, or 1 for a remainder table
    int64_t rows = 0;
    int64_t dim = 0;
  };
  std::vector<StoredTable> stored_tables() const;
  /// Bytes of all stored table rows (after scaling).
  std::size_t table_bytes() const;
  /// Batches per epoch: --num-batches if positive, else ceil(data_size / mini_batch_size).
  int64_t batches_per_epoch() const;
};

/// Parses the arguments after the program name (Note [DLRM command line]). Throws strata::Error
/// whose message names the flag and what was expected; validates the result (validate()).
DLRMConfig parse_dlrm_args(const std::vector<std::string>& args);

/// Every flag parse_dlrm_args knows (accepted or refused), with its leading dashes.
std::vector<std::string> dlrm_flag_names();
/// Whether `flag` is a store-true flag (takes no value).
bool dlrm_flag_is_store_true(const std::string& flag);

/// The names parse_dlrm_args accepts for --preset.
std::vector<std::string> dlrm_preset_names();
/// Applies preset `name` on top of `config` (throws naming --preset and the known names).
void apply_dlrm_preset(DLRMConfig& config, std::string_view name);

/// Checks the configuration as a whole: MLP widths that chain (last bottom width ==
/// --arch-sparse-feature-size; with a dataset the first == 13 dense features; one output), flag
/// ranges, combinations the reference refuses (decay before warmup ends), files that must exist.
/// Throws strata::Error naming the flag.
void validate(const DLRMConfig& config);

/// The help text of strata-dlrm (every flag, its default, and what Strata does with it).
std::string dlrm_usage();

/// A one-paragraph description of the run (architecture, data, tiers) for the start of a log.
std::string describe(const DLRMConfig& config);

using strata::format_bytes;  // core/text.h

const char* to_string(DataGeneration g);
const char* to_string(LossFunction l);
const char* to_string(OptimizerKind o);
const char* to_string(InteractionOp op);
const char* to_string(QROperation op);
const char* to_string(WeightedPooling w);

}  // namespace strata::emb
