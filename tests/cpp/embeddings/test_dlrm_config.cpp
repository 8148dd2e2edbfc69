// strata-dlrm's configuration: the reference's flags and defaults, Strata's flags, presets, and
// every bad input with the message that names the flag.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "embeddings/dlrm_config.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using namespace strata::emb;
using ::testing::HasSubstr;

namespace {

std::string parse_error(std::vector<std::string> args) {
  return testing_util::error_of([&] { parse_dlrm_args(args); });
}

DLRMConfig parse(std::vector<std::string> args) { return parse_dlrm_args(args); }

}  // namespace

TEST(DLRMConfig, DefaultsAreTheReferenceScriptsDefaults) {
  // Any flag at all selects the reference's defaults (no arguments is the embedded default job).
  const DLRMConfig c = parse({"--print-freq", "1"});
  EXPECT_EQ(c.arch_sparse_feature_size, 2);
  EXPECT_EQ(c.arch_embedding_size, (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(c.arch_mlp_bot, (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(c.arch_mlp_top, (std::vector<int64_t>{4, 2, 1}));
  EXPECT_EQ(c.arch_interaction_op, InteractionOp::Dot);
  EXPECT_FALSE(c.arch_interaction_itself);
  EXPECT_EQ(c.weighted_pooling, WeightedPooling::None);
  EXPECT_EQ(c.loss_function, LossFunction::MSE);
  EXPECT_EQ(c.loss_weights, (std::vector<double>{1.0, 1.0}));
  EXPECT_EQ(c.loss_threshold, 0.0);
  EXPECT_FALSE(c.round_targets);
  EXPECT_EQ(c.data_size, 1);
  EXPECT_EQ(c.num_batches, 0);
  EXPECT_EQ(c.data_generation, DataGeneration::Random);
  EXPECT_EQ(c.rand_data_dist, "uniform");
  EXPECT_EQ(c.rand_data_min, 0.0);
  EXPECT_EQ(c.rand_data_max, 1.0);
  EXPECT_EQ(c.rand_data_mu, -1.0);
  EXPECT_EQ(c.rand_data_sigma, 1.0);
  EXPECT_EQ(c.data_trace_file, "./input/dist_emb_j.log");
  EXPECT_EQ(c.data_set, "kaggle");
  EXPECT_EQ(c.data_randomize, "total");
  EXPECT_EQ(c.max_ind_range, -1);
  EXPECT_EQ(c.num_indices_per_lookup, 10);
  EXPECT_FALSE(c.num_indices_per_lookup_fixed);
  EXPECT_EQ(c.num_workers, 0);
  EXPECT_EQ(c.mini_batch_size, 1);
  EXPECT_EQ(c.nepochs, 1);
  EXPECT_EQ(c.learning_rate, 0.01);
  EXPECT_EQ(c.optimizer, OptimizerKind::SGD);
  EXPECT_EQ(c.numpy_rand_seed, 123);
  EXPECT_EQ(c.print_freq, 1);
  EXPECT_EQ(c.test_freq, -1);
  EXPECT_EQ(c.test_mini_batch_size, -1);
  EXPECT_FALSE(c.print_time);
  EXPECT_FALSE(c.inference_only);
  EXPECT_TRUE(c.save_model.empty());
  EXPECT_TRUE(c.load_model.empty());
  EXPECT_EQ(c.preset, "");
  // Derived figures, as the script computes them.
  EXPECT_EQ(c.interaction_width(), 2 + 4 * 3 / 2);
  EXPECT_EQ(c.batches_per_epoch(), 1);
  EXPECT_EQ(c.table_rows(), (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(c.table_bytes(), 9u * 2 * 4);
}

TEST(DLRMConfig, NoArgumentsIsTheEmbeddedDefaultJob) {
  const DLRMConfig c = parse({});
  EXPECT_EQ(c.preset, "default");
  // Its tables exceed the fast budget (4x), so the slow tier and the cache matter.
  EXPECT_EQ(c.table_bytes(), 4 * c.fast_budget);
  // Click data with a learnable signal, evaluated on its test split.
  EXPECT_EQ(c.data_generation, DataGeneration::Click);
  EXPECT_EQ(c.loss_function, LossFunction::BCE);
  EXPECT_GT(c.test_data_size, 0);
  EXPECT_TRUE(c.print_time);
}

TEST(DLRMConfig, EveryValueFlagInBothForms) {
  const std::vector<std::string> args = {"--arch-sparse-feature-size=8",
                                         "--arch-embedding-size",
                                         "100-200",
                                         "--arch-mlp-bot=13-16-8",
                                         "--arch-mlp-top",
                                         "32-1",
                                         "--arch-interaction-op=cat",
                                         "--weighted-pooling",
                                         "fixed",
                                         "--activation-function=relu",
                                         "--loss-function",
                                         "wbce",
                                         "--loss-weights=0.5-2.0",
                                         "--loss-threshold",
                                         "1e-7",
                                         "--round-targets=True",
                                         "--data-size",
                                         "1000",
                                         "--num-batches=7",
                                         "--data-generation",
                                         "zipf",
                                         "--rand-data-dist=gaussian",
                                         "--rand-data-min",
                                         "-2",
                                         "--rand-data-max=3",
                                         "--rand-data-mu",
                                         "0.5",
                                         "--rand-data-sigma=2",
                                         "--data-trace-file",
                                         "t_j.log",
                                         "--data-trace-enable-padding=1",
                                         "--data-set",
                                         "terabyte",
                                         "--data-randomize=none",
                                         "--max-ind-range",
                                         "50",
                                         "--data-sub-sample-rate=0",
                                         "--num-indices-per-lookup",
                                         "3",
                                         "--num-indices-per-lookup-fixed",
                                         "true",
                                         "--num-workers=4",
                                         "--mini-batch-size",
                                         "64",
                                         "--nepochs=2",
                                         "--learning-rate",
                                         "0.5",
                                         "--optimizer=rwsadagrad",
                                         "--print-precision",
                                         "3",
                                         "--numpy-rand-seed=7",
                                         "--sync-dense-params",
                                         "False",
                                         "--lr-num-warmup-steps=2",
                                         "--lr-decay-start-step",
                                         "4",
                                         "--lr-num-decay-steps=6",
                                         "--print-freq",
                                         "10",
                                         "--test-freq=-1",
                                         "--test-mini-batch-size",
                                         "128",
                                         "--test-num-workers=2",
                                         "--save-model",
                                         "out.ckpt",
                                         "--scale-rows=0.5",
                                         "--fast-budget",
                                         "64M",
                                         "--slow-dir=/tmp",
                                         "--emb-policy",
                                         "dynamic",
                                         "--cache-fraction=0.1",
                                         "--slow-tier-model",
                                         "5,2,300",
                                         "--threads=2",
                                         "--zipf-alpha",
                                         "1.2",
                                         "--reuse=0.25",
                                         "--emb-dtype",
                                         "bf16",
                                         "--json=x.json"};
  const DLRMConfig c = parse(args);
  EXPECT_EQ(c.arch_sparse_feature_size, 8);
  EXPECT_EQ(c.arch_embedding_size, (std::vector<int64_t>{100, 200}));
  EXPECT_EQ(c.arch_mlp_bot, (std::vector<int64_t>{13, 16, 8}));
  EXPECT_EQ(c.arch_mlp_top, (std::vector<int64_t>{32, 1}));
  EXPECT_EQ(c.arch_interaction_op, InteractionOp::Cat);
  EXPECT_EQ(c.weighted_pooling, WeightedPooling::Fixed);
  EXPECT_EQ(c.loss_function, LossFunction::WBCE);
  EXPECT_EQ(c.loss_weights, (std::vector<double>{0.5, 2.0}));
  EXPECT_EQ(c.loss_threshold, 1e-7);
  EXPECT_TRUE(c.round_targets);
  EXPECT_EQ(c.data_size, 1000);
  EXPECT_EQ(c.num_batches, 7);
  EXPECT_EQ(c.data_generation, DataGeneration::Zipf);
  EXPECT_EQ(c.rand_data_dist, "gaussian");
  EXPECT_EQ(c.rand_data_min, -2.0);
  EXPECT_EQ(c.rand_data_max, 3.0);
  EXPECT_EQ(c.rand_data_mu, 0.5);
  EXPECT_EQ(c.rand_data_sigma, 2.0);
  EXPECT_EQ(c.data_trace_file, "t_j.log");
  EXPECT_TRUE(c.data_trace_enable_padding);
  EXPECT_EQ(c.data_set, "terabyte");
  EXPECT_EQ(c.data_randomize, "none");
  EXPECT_EQ(c.max_ind_range, 50);
  EXPECT_EQ(c.num_indices_per_lookup, 3);
  EXPECT_TRUE(c.num_indices_per_lookup_fixed);
  EXPECT_EQ(c.num_workers, 4);
  EXPECT_EQ(c.mini_batch_size, 64);
  EXPECT_EQ(c.nepochs, 2);
  EXPECT_EQ(c.learning_rate, 0.5);
  EXPECT_EQ(c.optimizer, OptimizerKind::RowWiseAdagrad);
  EXPECT_EQ(c.print_precision, 3);
  EXPECT_EQ(c.numpy_rand_seed, 7);
  EXPECT_FALSE(c.sync_dense_params);
  EXPECT_EQ(c.lr_num_warmup_steps, 2);
  EXPECT_EQ(c.lr_decay_start_step, 4);
  EXPECT_EQ(c.lr_num_decay_steps, 6);
  EXPECT_EQ(c.print_freq, 10);
  EXPECT_EQ(c.test_mini_batch_size, 128);
  EXPECT_EQ(c.test_num_workers, 2);
  EXPECT_EQ(c.save_model, "out.ckpt");
  EXPECT_EQ(c.scale_rows, 0.5);
  EXPECT_EQ(c.fast_budget, std::size_t{64} << 20);
  EXPECT_EQ(c.slow_dir, "/tmp");
  EXPECT_EQ(c.emb_policy, "dynamic");
  EXPECT_EQ(c.cache_fraction, 0.1);
  EXPECT_EQ(c.slow_tier_model.mode, SlowTierModelSpec::Mode::Custom);
  EXPECT_EQ(c.slow_tier_model.read_gbps, 5.0);
  EXPECT_EQ(c.slow_tier_model.write_gbps, 2.0);
  EXPECT_EQ(c.slow_tier_model.latency_ns, 300.0);
  EXPECT_EQ(c.threads, 2);
  EXPECT_EQ(c.zipf_alpha, 1.2);
  EXPECT_EQ(c.reuse, 0.25);
  EXPECT_EQ(c.emb_dtype, ElemType::BF16);
  EXPECT_EQ(c.json, "x.json");
  // cat: F·d; rows scaled by 0.5 (max-ind-range only caps datasets).
  EXPECT_EQ(c.interaction_width(), 3 * 8);
  EXPECT_EQ(c.table_rows(), (std::vector<int64_t>{50, 100}));
  EXPECT_EQ(c.batches_per_epoch(), 7);
}

TEST(DLRMConfig, StoreTrueFlags) {
  const DLRMConfig c =
      parse({"--arch-interaction-itself", "--memory-map", "--dataset-multiprocessing", "--inference-only",
             "--print-time", "--print-wall-time", "--debug-mode", "--enable-profiling"});
  EXPECT_TRUE(c.arch_interaction_itself);
  EXPECT_TRUE(c.memory_map);
  EXPECT_TRUE(c.dataset_multiprocessing);
  EXPECT_TRUE(c.inference_only);
  EXPECT_TRUE(c.print_time);
  EXPECT_TRUE(c.print_wall_time);
  EXPECT_TRUE(c.debug_mode);
  EXPECT_TRUE(c.enable_profiling);
  EXPECT_EQ(c.interaction_width(), 2 + 4 * 5 / 2);
  EXPECT_TRUE(parse({"--help"}).help);
  EXPECT_THAT(parse_error({"--print-time=yes"}), HasSubstr("--print-time: takes no value (got 'yes')"));
}

TEST(DLRMConfig, OptimizersLossesAndGenerators) {
  EXPECT_EQ(parse({"--optimizer", "sgd"}).optimizer, OptimizerKind::SGD);
  EXPECT_EQ(parse({"--optimizer", "adagrad"}).optimizer, OptimizerKind::Adagrad);
  EXPECT_EQ(parse({"--loss-function", "bce"}).loss_function, LossFunction::BCE);
  EXPECT_EQ(parse({"--loss-function", "mse"}).loss_function, LossFunction::MSE);
  EXPECT_EQ(parse({"--data-generation", "random"}).data_generation, DataGeneration::Random);
  EXPECT_EQ(parse({"--slow-tier-model", "off"}).slow_tier_model.mode, SlowTierModelSpec::Mode::Off);
  EXPECT_EQ(parse({"--slow-tier-model", "default"}).slow_tier_model.mode, SlowTierModelSpec::Mode::Default);
  EXPECT_EQ(parse({"--slow-tier-model", "auto"}).slow_tier_model.mode, SlowTierModelSpec::Mode::Auto);
  EXPECT_EQ(parse({}).slow_tier_model.mode, SlowTierModelSpec::Mode::Auto);  // the process's model
  EXPECT_EQ(parse({}).slow_dir, "");                                         // the process's slow tier
  EXPECT_EQ(parse({"--fast-budget", "2G"}).fast_budget, std::size_t{2} << 30);
  EXPECT_EQ(parse({"--fast-budget", "512K"}).fast_budget, std::size_t{512} << 10);
  EXPECT_EQ(parse({"--fast-budget", "4096"}).fast_budget, 4096u);
  for (const char* p : {"simple", "static", "dynamic", "auto"}) EXPECT_EQ(parse({"--emb-policy", p}).emb_policy, p);
  EXPECT_EQ(parse({"--data-size", "10", "--mini-batch-size", "3"}).batches_per_epoch(), 4);
}

TEST(DLRMConfig, PresetsMatchTheReferenceConfigurations) {
  const DLRMConfig bench = parse({"--preset", "random-bench"});
  EXPECT_EQ(bench.arch_embedding_size, std::vector<int64_t>(8, 1000000));
  EXPECT_EQ(bench.arch_sparse_feature_size, 64);
  EXPECT_EQ(bench.arch_mlp_bot, (std::vector<int64_t>{512, 512, 64}));
  EXPECT_EQ(bench.arch_mlp_top, (std::vector<int64_t>{1024, 1024, 1024, 1}));
  EXPECT_EQ(bench.num_indices_per_lookup, 100);
  EXPECT_EQ(bench.mini_batch_size, 2048);

  const DLRMConfig kaggle = parse({"--preset=kaggle"});
  ASSERT_EQ(kaggle.arch_embedding_size.size(), 26u);
  int64_t rows = 0;
  for (int64_t r : kaggle.arch_embedding_size) rows += r;
  EXPECT_EQ(rows, 33762577);  // 33.76M rows
  EXPECT_EQ(kaggle.arch_sparse_feature_size, 16);
  EXPECT_EQ(kaggle.arch_mlp_bot, (std::vector<int64_t>{13, 512, 256, 64, 16}));
  EXPECT_EQ(kaggle.arch_mlp_top, (std::vector<int64_t>{512, 256, 1}));
  EXPECT_EQ(kaggle.mini_batch_size, 128);
  EXPECT_EQ(kaggle.loss_function, LossFunction::BCE);
  EXPECT_EQ(kaggle.interaction_width(), 16 + 27 * 26 / 2);

  const DLRMConfig mlperf = parse({"--preset", "mlperf40M"});
  ASSERT_EQ(mlperf.arch_embedding_size.size(), 26u);
  rows = 0;
  for (int64_t r : mlperf.arch_embedding_size) rows += r;
  EXPECT_EQ(rows, 204184588);                               // 204.18M rows
  EXPECT_EQ(mlperf.table_bytes(), 204184588ull * 128 * 4);  // 104.5 GB
  EXPECT_EQ(mlperf.arch_mlp_top, (std::vector<int64_t>{1024, 1024, 512, 256, 1}));
  EXPECT_EQ(mlperf.mini_batch_size, 2048);

  const DLRMConfig tiny = parse({"--preset", "tiny"});
  EXPECT_EQ(tiny.arch_embedding_size, (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(tiny.mini_batch_size, 1);
}

TEST(DLRMConfig, PresetsApplyFirstAndFlagsOverrideThem) {
  // The preset stands after the flag, yet the flag wins.
  const DLRMConfig c = parse({"--mini-batch-size", "32", "--preset", "kaggle", "--scale-rows", "0.001"});
  EXPECT_EQ(c.mini_batch_size, 32);
  EXPECT_EQ(c.arch_sparse_feature_size, 16);
  EXPECT_EQ(c.table_rows()[2], 10131);  // 10131227 * 0.001, rounded
  EXPECT_EQ(c.table_rows()[8], 1);      // 3 * 0.001 rounds to 0: at least one row
}

TEST(DLRMConfig, MalformedArchStringsNameTheFlag) {
  EXPECT_THAT(parse_error({"--arch-embedding-size", "4-x-2"}),
              HasSubstr("--arch-embedding-size: '4-x-2' is not a dash-separated list of positive integers"));
  EXPECT_THAT(parse_error({"--arch-mlp-bot", "4--2"}),
              HasSubstr("--arch-mlp-bot: '4--2' is not a dash-separated list"));
  EXPECT_THAT(parse_error({"--arch-mlp-top", ""}), HasSubstr("--arch-mlp-top: empty list"));
  EXPECT_THAT(parse_error({"--arch-embedding-size", "0-3"}), HasSubstr("bad element '0'"));
  EXPECT_THAT(parse_error({"--arch-embedding-size=-4"}), HasSubstr("--arch-embedding-size"));
  EXPECT_THAT(parse_error({"--arch-sparse-feature-size", "0"}),
              HasSubstr("--arch-sparse-feature-size: expected an integer in [1, 1048576], got '0'"));
}

TEST(DLRMConfig, MlpWidthsThatDoNotChain) {
  EXPECT_THAT(parse_error({"--arch-mlp-bot", "4-3-3"}),
              HasSubstr("--arch-mlp-bot: the last width (3) must equal --arch-sparse-feature-size (2)"));
  EXPECT_THAT(parse_error({"--arch-sparse-feature-size", "16"}),
              HasSubstr("--arch-mlp-bot: the last width (2) must equal --arch-sparse-feature-size (16)"));
  EXPECT_THAT(parse_error({"--arch-mlp-bot", "2"}), HasSubstr("--arch-mlp-bot: \"2\" needs at least two widths"));
  EXPECT_THAT(parse_error({"--arch-mlp-top", "4-2"}), HasSubstr("--arch-mlp-top: the last width (2) must be 1"));
  // A dataset has 13 dense features.
  const auto dir = std::filesystem::temp_directory_path() / "strata_dlrm_config_test";
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "day.tsv").string();
  std::ofstream(file) << "0\t1\n";
  EXPECT_THAT(parse_error({"--data-generation", "dataset", "--raw-data-file", file}),
              HasSubstr("--arch-mlp-bot: the first width (4) must equal the dataset's 13 dense features"));
  // Rows come from the data unless given; given, they are 26.
  EXPECT_FALSE(parse({"--data-generation", "dataset", "--raw-data-file", file, "--arch-mlp-bot", "13-2"})
                   .arch_embedding_size_given);
  EXPECT_THAT(parse_error({"--data-generation", "dataset", "--raw-data-file", file, "--arch-mlp-bot", "13-2",
                           "--arch-embedding-size", "4-3-2"}),
              HasSubstr("--arch-embedding-size: --data-generation dataset reads Criteo's 26 categorical features: "
                        "give 26 row counts (or leave it out: the rows are the data's counts), got 3"));
  EXPECT_NO_THROW(parse({"--preset", "kaggle", "--data-generation", "dataset", "--raw-data-file", file}));
  // Terabyte's raw path is a prefix: <raw>_0 must exist.
  EXPECT_THAT(parse_error({"--data-generation", "dataset", "--data-set", "terabyte", "--raw-data-file", file,
                           "--arch-mlp-bot", "13-2"}),
              HasSubstr("--raw-data-file: cannot open '" + file + "_0' (no such file)"));
  std::filesystem::remove_all(dir);
}

TEST(DLRMConfig, BadValuesNameTheFlag) {
  EXPECT_THAT(parse_error({"--mini-batch-size", "0"}), HasSubstr("--mini-batch-size: expected an integer"));
  EXPECT_THAT(parse_error({"--mini-batch-size", "ten"}), HasSubstr("--mini-batch-size: expected an integer in [1, "));
  EXPECT_THAT(parse_error({"--learning-rate", "fast"}), HasSubstr("--learning-rate: expected a number, got 'fast'"));
  EXPECT_THAT(parse_error({"--learning-rate", "-1"}), HasSubstr("--learning-rate: must be non-negative"));
  EXPECT_THAT(parse_error({"--learning-rate", "nan"}), HasSubstr("--learning-rate: expected a number"));
  EXPECT_THAT(parse_error({"--optimizer", "adam"}),
              HasSubstr("--optimizer: expected one of sgd, adagrad, rwsadagrad, got 'adam'"));
  EXPECT_THAT(parse_error({"--loss-function", "hinge"}), HasSubstr("--loss-function: expected one of mse, bce, wbce"));
  EXPECT_THAT(parse_error({"--arch-interaction-op", "sum"}),
              HasSubstr("--arch-interaction-op: expected one of dot, cat"));
  EXPECT_THAT(parse_error({"--data-generation", "magic"}), HasSubstr("--data-generation: expected one of random"));
  EXPECT_THAT(parse_error({"--round-targets", "maybe"}),
              HasSubstr("--round-targets: expected True or False (or 1/0), got 'maybe'"));
  EXPECT_THAT(parse_error({"--loss-function", "wbce", "--loss-weights", "1.0"}),
              HasSubstr("--loss-weights: wbce needs a weight for targets 0 and 1"));
  EXPECT_THAT(parse_error({"--loss-weights", "1.0-x"}), HasSubstr("--loss-weights: '1.0-x' is not a dash-separated"));
  EXPECT_THAT(parse_error({"--loss-threshold", "1.5"}), HasSubstr("--loss-threshold: must lie in [0, 1)"));
  EXPECT_THAT(parse_error({"--rand-data-min", "2", "--rand-data-max", "1"}),
              HasSubstr("--rand-data-min (2) must not exceed --rand-data-max (1)"));
  EXPECT_THAT(parse_error({"--rand-data-dist", "gaussian", "--rand-data-sigma", "0"}),
              HasSubstr("--rand-data-sigma: must be positive"));
  EXPECT_THAT(parse_error({"--rand-data-dist", "poisson"}),
              HasSubstr("--rand-data-dist: expected one of uniform, gaussian"));
  EXPECT_THAT(parse_error({"--weighted-pooling", "heavy"}), HasSubstr("--weighted-pooling: expected one of fixed"));
  EXPECT_THAT(parse_error({"--activation-function", "tanh"}), HasSubstr("--activation-function: expected one of relu"));
  EXPECT_THAT(parse_error({"--lr-num-warmup-steps", "10", "--lr-decay-start-step", "5", "--lr-num-decay-steps", "3"}),
              HasSubstr("--lr-decay-start-step (5): learning rate warmup (--lr-num-warmup-steps 10) must finish"));
  EXPECT_THAT(parse_error({"--test-freq", "-2"}), HasSubstr("--test-freq"));
  EXPECT_THAT(parse_error({"--mlperf-auc-threshold", "high"}),
              HasSubstr("--mlperf-auc-threshold: expected a number, got 'high'"));
  EXPECT_EQ(parse({"--data-sub-sample-rate", "0.5"}).data_sub_sample_rate, 0.5);
  EXPECT_THAT(parse_error({"--data-sub-sample-rate", "1.5"}), HasSubstr("--data-sub-sample-rate: expected a fraction"));
  EXPECT_THAT(parse_error({"--data-set", "imagenet"}), HasSubstr("--data-set: expected one of kaggle, terabyte"));
}

TEST(DLRMConfig, BadStrataFlags) {
  EXPECT_THAT(parse_error({"--fast-budget", "lots"}), HasSubstr("--fast-budget"));
  EXPECT_THAT(parse_error({"--fast-budget", "0"}), HasSubstr("--fast-budget: must be positive"));
  EXPECT_THAT(parse_error({"--scale-rows", "2"}), HasSubstr("--scale-rows: expected a fraction in (0, 1], got 2"));
  EXPECT_THAT(parse_error({"--scale-rows", "0"}), HasSubstr("--scale-rows: expected a fraction in (0, 1]"));
  EXPECT_THAT(parse_error({"--cache-fraction", "1.5"}), HasSubstr("--cache-fraction: expected a fraction in (0, 1]"));
  EXPECT_THAT(parse_error({"--emb-policy", "lru"}),
              HasSubstr("--emb-policy: expected one of simple, static, dynamic, auto, got 'lru'"));
  const char* model_spellings = "--slow-tier-model: expected auto, off, default, read=R,write=W,latency=L or R,W,L";
  EXPECT_THAT(parse_error({"--slow-tier-model", "fast"}), HasSubstr(model_spellings));
  EXPECT_THAT(parse_error({"--slow-tier-model", "1,2"}), HasSubstr(model_spellings));
  EXPECT_THAT(parse_error({"--slow-tier-model", "0,2,3"}),
              HasSubstr("--slow-tier-model: read and write bandwidths must be positive"));
  EXPECT_THAT(parse_error({"--slow-tier-model", "1,2,3,4"}), HasSubstr("--slow-tier-model: expected auto, off"));
  EXPECT_THAT(parse_error({"--zipf-alpha", "0"}), HasSubstr("--zipf-alpha: must be positive"));
  EXPECT_THAT(parse_error({"--reuse", "1"}), HasSubstr("--reuse: expected a fraction in [0, 1)"));
  EXPECT_THAT(parse_error({"--emb-dtype", "f16"}), HasSubstr("--emb-dtype: expected f32 or bf16, got 'f16'"));
  EXPECT_THAT(parse_error({"--threads", "-1"}), HasSubstr("--threads: expected a thread count in [1, 4096], got '-1'"));
  EXPECT_THAT(parse_error({"--threads", "4097"}),
              HasSubstr("--threads: expected a thread count in [1, 4096], got '4097'"));
  EXPECT_THAT(parse_error({"--threads=1000000000"}),
              HasSubstr("--threads: expected a thread count in [1, 4096], got '1000000000'"));
  EXPECT_EQ(parse({"--threads", "4096"}).threads, 4096);
  EXPECT_EQ(parse({"--threads", "0"}).threads, 0);  // all hardware threads
  // Echoed values are cut and escaped (Note [Quoting user data in messages]).
  const std::string long_value = parse_error({"--learning-rate", std::string(5'000'000, '7') + "x"});
  EXPECT_THAT(long_value, HasSubstr("--learning-rate: expected a number, got '" + std::string(64, '7') +
                                    "\u2026' (5000001 bytes)"));
  EXPECT_LT(long_value.size(), 1000u);
  EXPECT_THAT(parse_error({"--optimizer", std::string("sg\0d", 4)}),
              HasSubstr("--optimizer: expected one of sgd, adagrad, rwsadagrad, got 'sg\\x00d'"));
  EXPECT_THAT(parse_error({"--no-such\nflag"}), HasSubstr("unknown flag '--no-such\\nflag'"));
  EXPECT_THAT(parse_error({"--slow-dir", "/no/such/dir"}), HasSubstr("--slow-dir: '/no/such/dir' is not a directory"));
  EXPECT_THAT(
      parse_error({"--preset", "huge"}),
      HasSubstr("--preset: unknown preset 'huge' (expected one of tiny, random-bench, kaggle, mlperf40M, default)"));
  EXPECT_THAT(parse_error({"--preset"}), HasSubstr("--preset: missing value"));
}

TEST(DLRMConfig, MissingFilesNameTheFlag) {
  EXPECT_THAT(parse_error({"--load-model", "/no/such/model.ckpt"}),
              HasSubstr("--load-model: cannot open '/no/such/model.ckpt' (no such file)"));
  EXPECT_THAT(parse_error({"--save-model", "/tmp"}), HasSubstr("--save-model: '/tmp' is a directory"));
  EXPECT_THAT(parse_error({"--load-model", "/tmp"}), HasSubstr("--load-model: cannot open '/tmp' (is a directory)"));
  EXPECT_THAT(parse_error({"--data-generation", "dataset", "--arch-mlp-bot", "13-2", "--raw-data-file", "/tmp"}),
              HasSubstr("--raw-data-file: cannot open '/tmp' (is a directory)"));
  EXPECT_THAT(parse_error({"--data-generation", "dataset", "--arch-mlp-bot", "13-2", "--processed-data-file", "/tmp"}),
              HasSubstr("--processed-data-file: cannot open '/tmp' (is a directory)"));
  EXPECT_THAT(parse_error({"--data-generation", "dataset", "--arch-mlp-bot", "13-2"}),
              HasSubstr("--data-generation dataset: give --raw-data-file"));
  EXPECT_THAT(
      parse_error({"--data-generation", "dataset", "--arch-mlp-bot", "13-2", "--processed-data-file", "/no/such.bin"}),
      HasSubstr("--processed-data-file: cannot open '/no/such.bin' (no such file)"));
}

TEST(DLRMConfig, TraceFilesPerTable) {
  EXPECT_THAT(parse_error({"--data-generation", "synthetic", "--data-trace-file", "/no/such/dist_emb_j.log"}),
              HasSubstr("--data-trace-file: table 0: cannot open '/no/such/dist_emb_0.log' (no such file"));
  const auto dir = std::filesystem::temp_directory_path() / "strata_dlrm_trace_test";
  std::filesystem::create_directories(dir);
  for (int k : {0, 1}) std::ofstream(dir / ("t_" + std::to_string(k) + ".log")) << "1\n1\n1\n";
  EXPECT_THAT(parse_error({"--data-generation", "synthetic", "--data-trace-file", (dir / "t_j.log").string()}),
              HasSubstr("--data-trace-file: table 2: cannot open"));
  std::ofstream(dir / "t_2.log") << "1\n1\n1\n";
  EXPECT_EQ(parse({"--data-generation", "synthetic", "--data-trace-file", (dir / "t_j.log").string()}).data_generation,
            DataGeneration::Synthetic);
  std::filesystem::remove_all(dir);
}

TEST(DLRMConfig, UnknownMissingAndRefusedFlags) {
  EXPECT_THAT(parse_error({"--no-such-flag"}), HasSubstr("unknown flag '--no-such-flag'"));
  EXPECT_THAT(parse_error({"--no-such-flag=3"}), HasSubstr("unknown flag '--no-such-flag'"));
  EXPECT_THAT(parse_error({"positional"}), HasSubstr("unexpected argument 'positional'"));
  EXPECT_THAT(parse_error({"--mini-batch-size"}), HasSubstr("--mini-batch-size: missing value"));
  for (const char* f : {"--use-gpu", "--save-onnx", "--mlperf-bin-shuffle", "--plot-compute-graph"})
    EXPECT_THAT(parse_error({f}), HasSubstr(std::string(f) + " is not supported by strata-dlrm")) << f;
  for (const char* f : {"--quantize-emb-with-bit", "--mlperf-grad-accum-iter", "--local_rank"})
    EXPECT_THAT(parse_error({f, "4"}), HasSubstr(std::string(f) + " is not supported by strata-dlrm")) << f;
}

// Note [Distributed strata-dlrm]: mpi is the only backend; the reference's others are named.
TEST(DLRMConfig, DistBackendIsMpiOnly) {
  EXPECT_EQ(parse({"--dist-backend=mpi"}).dist_backend, "mpi");
  EXPECT_EQ(parse({"--dist-backend", "mpi", "--dist-chunks", "16"}).dist_chunks, 16);
  EXPECT_EQ(parse({}).dist_backend, "");
  for (const char* b : {"gloo", "ccl", "nccl"})
    EXPECT_THAT(parse_error({"--dist-backend", b}), HasSubstr(std::string("--dist-backend: backend '") + b +
                                                              "' is not supported: Strata's only backend is mpi"))
        << b;
  EXPECT_THAT(parse_error({"--dist-backend=tcp"}), HasSubstr("--dist-backend: expected one of mpi, got 'tcp'"));
  EXPECT_THAT(parse_error({"--dist-backend="}), HasSubstr("--dist-backend: expected one of mpi, got ''"));
  EXPECT_THAT(parse_error({"--dist-chunks", "4"}), HasSubstr("--dist-chunks: applies only to a distributed run"));
  EXPECT_THAT(parse_error({"--dist-backend=mpi", "--dist-chunks", "0"}),
              HasSubstr("--dist-chunks: expected an integer"));
}

// ---- the reference's table tricks (Note [DLRM table kinds]) ------------------------------------------

TEST(DLRMConfig, TableTricksParseWithTheReferencesDefaults) {
  const DLRMConfig d = parse({});
  EXPECT_FALSE(d.qr_flag);
  EXPECT_EQ(d.qr_threshold, 200);
  EXPECT_EQ(d.qr_operation, QROperation::Mult);
  EXPECT_EQ(d.qr_collisions, 4);
  EXPECT_FALSE(d.md_flag);
  EXPECT_EQ(d.md_threshold, 200);
  EXPECT_DOUBLE_EQ(d.md_temperature, 0.3);
  EXPECT_FALSE(d.md_round_dims);
  const DLRMConfig q = parse({"--qr-flag", "--qr-operation", "add", "--qr-threshold", "3", "--qr-collisions", "2",
                              "--arch-embedding-size", "10-3-5"});
  EXPECT_TRUE(q.qr_flag);
  EXPECT_EQ(q.qr_operation, QROperation::Add);
  const auto stored = q.stored_tables();
  ASSERT_EQ(stored.size(), 5u);  // 10 and 5 rows are quotient-remainder tables, 3 rows is plain
  EXPECT_EQ(stored[0].rows, 5);  // ceil(10 / 2)
  EXPECT_EQ(stored[1].rows, 2);
  EXPECT_EQ(stored[2].rows, 3);
  EXPECT_EQ(stored[3].rows, 3);  // ceil(5 / 2)
  EXPECT_EQ(stored[4].part, 1);
  EXPECT_EQ(q.table_bytes(), (5u + 2 + 3 + 3 + 2) * 2 * sizeof(float));
  const DLRMConfig l = parse({"--weighted-pooling", "learned"});
  EXPECT_EQ(l.weighted_pooling, WeightedPooling::Learned);
}

TEST(DLRMConfig, ConcatNeedsATwiceAsWideBottomMLPAndOnlyQuotientRemainderTables) {
  const DLRMConfig c = parse({"--qr-flag", "--qr-operation", "concat", "--qr-threshold", "1", "--arch-mlp-bot", "4-4"});
  EXPECT_EQ(c.feature_width(), 4);
  EXPECT_EQ(c.interaction_width(), 4 + 4 * 3 / 2);
  EXPECT_THAT(parse_error({"--qr-flag", "--qr-operation", "concat", "--qr-threshold", "1"}),
              HasSubstr("--arch-mlp-bot: the last width (2) must be 2 x --arch-sparse-feature-size (4) with "
                        "--qr-operation concat"));
  EXPECT_THAT(parse_error({"--qr-flag", "--qr-operation", "concat", "--qr-threshold", "3", "--arch-mlp-bot", "4-4"}),
              HasSubstr("--qr-threshold 3: with --qr-operation concat every table must be a quotient-remainder table"));
}

TEST(DLRMConfig, MixedDimensionsFollowTheReferencesSolver) {
  // lambda = d0 · n_min^alpha = 16 · 100^0.5 = 160; the 1600-row table gets 160 / 40 = 4, the
  // 10000-row one 160 / 100 = 1.6 -> 2; the smallest gets d0. Below the threshold: d.
  const DLRMConfig c =
      parse({"--md-flag", "--md-temperature", "0.5", "--md-threshold", "50", "--arch-sparse-feature-size", "16",
             "--arch-mlp-bot", "4-16", "--arch-embedding-size", "1600-100-10000"});
  EXPECT_EQ(c.table_dims(), (std::vector<int64_t>{4, 16, 2}));
  const DLRMConfig t =
      parse({"--md-flag", "--md-temperature", "0.5", "--md-threshold", "2000", "--arch-sparse-feature-size", "16",
             "--arch-mlp-bot", "4-16", "--arch-embedding-size", "1600-100-10000"});
  EXPECT_EQ(t.table_dims(), (std::vector<int64_t>{16, 16, 2}));
  // 160 / 10000^0.25 ... with alpha 0.25: lambda = 16 · 100^0.25 ≈ 50.6; 1600 rows: 50.6 / 6.32 ≈ 8.
  const DLRMConfig r =
      parse({"--md-flag", "--md-temperature", "0.25", "--md-threshold", "50", "--md-round-dims",
             "--arch-sparse-feature-size", "16", "--arch-mlp-bot", "4-16", "--arch-embedding-size", "1600-100-10000"});
  EXPECT_EQ(r.table_dims(), (std::vector<int64_t>{8, 16, 4}));  // 10000 rows: 50.6 / 10 = 5.06 -> 5 -> 2^2
}

TEST(DLRMConfig, BadTableTrickFlagsNameTheFlag) {
  EXPECT_THAT(parse_error({"--qr-operation", "xor"}), HasSubstr("--qr-operation: expected one of mult, add, concat"));
  EXPECT_THAT(parse_error({"--qr-collisions", "0"}), HasSubstr("--qr-collisions"));
  EXPECT_THAT(parse_error({"--qr-threshold", "-1"}), HasSubstr("--qr-threshold"));
  EXPECT_THAT(parse_error({"--md-threshold", "x"}), HasSubstr("--md-threshold"));
  EXPECT_THAT(parse_error({"--md-flag", "--md-temperature", "-1"}),
              HasSubstr("--md-temperature: must be a non-negative"));
  EXPECT_THAT(parse_error({"--md-temperature", "warm"}), HasSubstr("--md-temperature"));
  EXPECT_THAT(parse_error({"--qr-flag", "--md-flag"}), HasSubstr("--qr-flag and --md-flag: choose one"));
  EXPECT_THAT(parse_error({"--qr-flag", "--weighted-pooling", "learned"}),
              HasSubstr("--qr-flag: quotient-remainder embeddings with --weighted-pooling learned are not supported"));
  EXPECT_THAT(parse_error({"--md-flag", "--weighted-pooling", "fixed"}),
              HasSubstr("--md-flag: mixed-dimension embeddings with --weighted-pooling fixed are not supported"));
  // d = 24 is no power of 2: rounding the smallest table's 24 gives 32 > d.
  EXPECT_THAT(parse_error({"--md-flag", "--md-round-dims", "--md-threshold", "1", "--arch-sparse-feature-size", "24",
                           "--arch-mlp-bot", "4-24"}),
              HasSubstr("--md-round-dims: table 2 would get dimension 32, more than --arch-sparse-feature-size 24"));
}
