#include "embeddings/dlrm_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/text.h"

namespace strata::emb {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string wall_clock() {
  const std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M", std::localtime(&t));
  return buf;
}

/// TieredDLRM as the trainer sees it; with --enable-profiling its phases since the last progress line.
class TieredTrainable final : public DLRMTrainable {
 public:
  explicit TieredTrainable(TieredDLRM& model) : model_(model) {}
  int64_t num_tables() const override { return model_.num_tables(); }
  float train_step(std::span<const float> dense, std::span<const Bags> bags, std::span<const float> targets) override {
    return model_.train_step(dense, bags, targets);
  }
  float score(std::span<const float> dense, std::span<const Bags> bags, std::span<const float> targets,
              std::vector<float>& scores) override {
    return model_.score(dense, bags, targets, scores);
  }
  void reset_stats() override {
    model_.reset_stats();
    at_last_line_ = model_.times();
  }
  std::string progress_detail() override;
  void save(const std::string& path, const CheckpointMetadata& extra) override { model_.save(path, extra); }
  CheckpointMetadata load(const std::string& path) override { return model_.load(path); }
  int64_t steps() const override { return model_.steps(); }

 private:
  TieredDLRM& model_;
  DLRMPhaseTimes at_last_line_;
};

std::string TieredTrainable::progress_detail() {
  if (!model_.config().enable_profiling) return "";
  std::string line = phase_line(model_.times(), at_last_line_);
  at_last_line_ = model_.times();
  return line;
}

}  // namespace

std::string phase_line(const DLRMPhaseTimes& p, const DLRMPhaseTimes& q) {
  const double n = static_cast<double>(std::max<int64_t>(1, p.steps - q.steps));
  char line[256];
  std::snprintf(line, sizeof line,
                "  phases (ms/it): bottom MLP %.3f, lookup %.3f, interaction %.3f, top MLP %.3f, "
                "backward %.3f, update %.3f\n",
                1e3 * (p.bottom_mlp - q.bottom_mlp) / n, 1e3 * (p.lookup - q.lookup) / n,
                1e3 * (p.interaction - q.interaction) / n, 1e3 * (p.top_mlp - q.top_mlp) / n,
                1e3 * (p.backward - q.backward) / n, 1e3 * (p.update - q.update) / n);
  return line;
}

metrics::BinaryMetrics evaluate_source(TieredDLRM& model, IndexSource& source, int64_t max_batches) {
  TieredTrainable m(model);
  return evaluate_source(m, source, max_batches);
}

metrics::BinaryMetrics evaluate_source(DLRMTrainable& model, IndexSource& source, int64_t max_batches) {
  metrics::BinaryMetricsAccumulator acc;
  source.reset();
  Batch b;
  std::vector<Bags> bags(static_cast<std::size_t>(model.num_tables()));
  std::vector<float> scores;
  for (int64_t i = 0; max_batches <= 0 || i < max_batches; ++i) {
    if (!source.next(b)) break;
    for (std::size_t t = 0; t < bags.size(); ++t) bags[t] = b.bags(static_cast<int64_t>(t));
    const float loss = model.score(b.dense, bags, b.targets, scores);
    acc.add(scores, b.targets, loss);
  }
  return acc.compute();
}

std::unique_ptr<IndexSource> make_test_index_source(const DLRMConfig& config) {
  if (has_test_split(config)) return make_index_source(config, CriteoSplit::Test);
  STRATA_CHECK(config.data_generation != DataGeneration::Dataset, "--processed-data-file ",
               quote_path(config.processed_data_file), ": a 40 x int32 binary has no test split to test on ",
               "(--test-freq, --inference-only); give the processed .npz");
  DLRMConfig c = config;
  if (c.test_mini_batch_size > 0) c.mini_batch_size = c.test_mini_batch_size;
  return make_index_source(c);
}

DLRMTrainer::DLRMTrainer(TieredDLRM& model, const DLRMConfig& config, IndexSource& train, IndexSource* test,
                         std::FILE* out)
    : DLRMTrainer(std::make_unique<TieredTrainable>(model), nullptr, config, train, test, out) {}

DLRMTrainer::DLRMTrainer(DLRMTrainable& model, const DLRMConfig& config, IndexSource& train, IndexSource* test,
                         std::FILE* out)
    : DLRMTrainer(nullptr, &model, config, train, test, out) {}

DLRMTrainer::~DLRMTrainer() = default;

DLRMTrainer::DLRMTrainer(std::unique_ptr<DLRMTrainable> owned, DLRMTrainable* model, const DLRMConfig& config,
                         IndexSource& train, IndexSource* test, std::FILE* out)
    : owned_(std::move(owned)),
      model_(model != nullptr ? *model : *owned_),
      config_(config),
      train_(train),
      test_(test),
      out_(out),
      nb_(train.num_batches()),
      test_each_epoch_(test != nullptr && has_test_split(config)),
      bags_(static_cast<std::size_t>(model_.num_tables())) {}

void DLRMTrainer::load(const std::string& path) {
  const std::optional<DLRMTrainState> st = DLRMTrainState::from_metadata(model_.load(path), path);
  if (st) {
    best_acc_ = st->best_acc_test;
    best_auc_ = st->best_auc_test;
    start_epoch_ = st->epoch;
    start_iter_ = st->iter;
    total_loss_ = st->total_loss;
    total_samp_ = st->total_samp;
    total_iter_ = st->total_iter;
    if (st->nbatches != nb_)
      std::fprintf(out_, "warning: %s was saved by a run of %lld batches per epoch; this one has %lld\n", path.c_str(),
                   static_cast<long long>(st->nbatches), static_cast<long long>(nb_));
  }
  if (start_iter_ >= nb_ && nb_ > 0) {  // saved at the end of an epoch: resume at the next one
    ++start_epoch_;
    start_iter_ = 0;
  }
  std::fprintf(out_, "Loaded model from %s (%lld optimizer steps); resuming at epoch %lld, batch %lld/%lld\n",
               path.c_str(), static_cast<long long>(model_.steps()), static_cast<long long>(start_epoch_),
               static_cast<long long>(start_iter_), static_cast<long long>(nb_));
}

DLRMTrainState DLRMTrainer::position(int64_t epoch, int64_t iter) const {
  return {epoch, iter, nb_, total_loss_, total_iter_, total_samp_, best_acc_, best_auc_};
}

void DLRMTrainer::save(int64_t epoch, int64_t iter) {
  model_.save(config_.save_model, position(epoch, iter).to_metadata());
  saved_ = true;
  std::fprintf(out_, "Saving model to %s\n", config_.save_model.c_str());
  std::fflush(out_);
}

void DLRMTrainer::train() {
  model_.reset_stats();
  for (int64_t k = start_epoch_; k < config_.nepochs && !stopped_; ++k) {
    if (k > 0) train_.reset();  // generators replay the epoch, as the reference's do
    if (!train_epoch(k)) break;
  }
  if (!config_.save_model.empty() && !saved_) save(std::max(start_epoch_, config_.nepochs - 1), nb_);
}

void DLRMTrainer::skip_batches(int64_t k, int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    STRATA_CHECK(train_.next(batch_), "--load-model: epoch ", k, " has only ", j, " batches, but the checkpoint was ",
                 "saved after ", n);
}

std::optional<float> DLRMTrainer::train_batch(int64_t k, int64_t j) {
  try {
    const auto t0 = Clock::now();
    const bool more = train_.next(batch_);
    stats_.data_seconds += seconds_since(t0);
    if (!more) return std::nullopt;
    for (std::size_t t = 0; t < bags_.size(); ++t) bags_[t] = batch_.bags(static_cast<int64_t>(t));
    return model_.train_step(batch_.dense, bags_, batch_.targets);
  } catch (const Error& e) {
    // Indices are validated before any parameter changes, so the model is the state after batch j.
    if (!config_.save_model.empty()) save(k, j);
    STRATA_FAIL("batch ", j + 1, " of epoch ", k, ": ", e.what());
  }
  return std::nullopt;
}

bool DLRMTrainer::should_test(int64_t j) const {
  if (test_ == nullptr) return false;
  const bool last = j + 1 == nb_;
  if (config_.test_freq > 0) return (j + 1) % config_.test_freq == 0 || last;
  return test_each_epoch_ && last;
}

bool DLRMTrainer::train_epoch(int64_t k) {
  const int64_t first = k == start_epoch_ ? start_iter_ : 0;
  skip_batches(k, first);
  for (int64_t j = first; j < nb_; ++j) {
    const double waited = stats_.data_seconds;
    const auto t0 = Clock::now();
    const std::optional<float> step_loss = train_batch(k, j);
    if (!step_loss) break;  // the source ended early
    const float loss = *step_loss;
    const double dt = seconds_since(t0) - (stats_.data_seconds - waited);  // the step alone
    const int64_t b = batch_.batch;
    stats_.step_ms.push_back(dt * 1e3);
    stats_.seconds += dt;
    stats_.samples += b;
    ++stats_.iterations;
    if (stats_.first_loss < 0) stats_.first_loss = loss;
    stats_.last_loss = loss;
    total_time_ += dt;
    total_loss_ += static_cast<double>(loss) * static_cast<double>(b);
    total_samp_ += b;
    ++total_iter_;
    const bool testing = should_test(j);
    if ((j + 1) % config_.print_freq == 0 || j + 1 == nb_ || testing) print_progress(k, j);
    if (!testing) continue;
    const DLRMTestRecord& r = test(k, j + 1);
    if (r.improved && !config_.save_model.empty()) save(k, j + 1);
    if (threshold_reached()) {
      stopped_ = true;
      return false;
    }
  }
  return true;
}

void DLRMTrainer::print_progress(int64_t k, int64_t j) {
  const double ms =
      config_.print_time && total_iter_ > 0 ? 1000.0 * total_time_ / static_cast<double>(total_iter_) : -1.0;
  const double loss = total_samp_ > 0 ? total_loss_ / static_cast<double>(total_samp_) : 0.0;
  std::fprintf(out_, "Finished training it %lld/%lld of epoch %lld, %.2f ms/it, loss %.6f%s\n",
               static_cast<long long>(j + 1), static_cast<long long>(nb_), static_cast<long long>(k), ms, loss,
               config_.print_wall_time ? (" (" + wall_clock() + ")").c_str() : "");
  std::fputs(model_.progress_detail().c_str(), out_);
  std::fflush(out_);
  history_.train_iter.push_back(static_cast<double>(k * nb_ + j + 1));
  history_.train_loss.push_back(loss);
  total_time_ = 0;
  total_loss_ = 0;
  total_iter_ = 0;
  total_samp_ = 0;
}

const DLRMTestRecord& DLRMTrainer::test(int64_t epoch, int64_t iter) {
  STRATA_CHECK(test_ != nullptr, "no test data for this run");
  const auto t0 = Clock::now();
  const metrics::BinaryMetrics m = evaluate_source(model_, *test_, std::max<int64_t>(0, config_.num_batches));
  DLRMTestRecord r{epoch, iter, epoch * nb_ + iter, m, seconds_since(t0), false};
  r.improved = config_.mlperf_logging ? r.metrics.auc > best_auc_ : r.metrics.accuracy > best_acc_;
  best_acc_ = std::max(best_acc_, r.metrics.accuracy);
  if (!std::isnan(r.metrics.auc)) best_auc_ = std::max(best_auc_, r.metrics.auc);
  if (config_.inference_only)
    std::fprintf(out_, "Testing for inference only: ");
  else
    std::fprintf(out_, "Testing at - %lld/%lld of epoch %lld, ", static_cast<long long>(iter),
                 static_cast<long long>(nb_), static_cast<long long>(epoch));
  if (config_.mlperf_logging)
    std::fprintf(out_, "loss %.6f, auc %.4f, best auc %.4f, accuracy %3.3f %%, best accuracy %3.3f %%\n",
                 r.metrics.loss, r.metrics.auc, best_auc_, 100 * r.metrics.accuracy, 100 * best_acc_);
  else
    std::fprintf(out_, "loss %.6f, accuracy %3.3f %%, best %3.3f %%\n", r.metrics.loss, 100 * r.metrics.accuracy,
                 100 * best_acc_);
  std::fflush(out_);
  history_.tests.push_back(r);
  return history_.tests.back();
}

TrainingCurves DLRMTrainer::curves() const {
  TrainingCurves c{history_.train_iter, history_.train_loss, {}, {}, {}};
  bool auc = true;
  for (const DLRMTestRecord& r : history_.tests) {
    c.test_iterations.push_back(static_cast<double>(r.global_iter));
    c.accuracy.push_back(r.metrics.accuracy);
    c.auc.push_back(r.metrics.auc);
    auc = auc && !std::isnan(r.metrics.auc);
  }
  if (!auc) c.auc.clear();
  return c;
}

bool DLRMTrainer::threshold_reached() const {
  if (!config_.mlperf_logging) return false;
  if (config_.mlperf_acc_threshold > 0 && best_acc_ > config_.mlperf_acc_threshold) {
    std::fprintf(out_, "MLPerf testing accuracy threshold %g reached, stop training\n", config_.mlperf_acc_threshold);
    return true;
  }
  if (config_.mlperf_auc_threshold > 0 && best_auc_ > config_.mlperf_auc_threshold) {
    std::fprintf(out_, "MLPerf testing auc threshold %g reached, stop training\n", config_.mlperf_auc_threshold);
    return true;
  }
  return false;
}

}  // namespace strata::emb
