#include "embeddings/prefetch_source.h"

#include <vector>

#include "core/error.h"

namespace strata::emb {

namespace {

const IndexSource& checked(const std::unique_ptr<IndexSource>& inner) {
  STRATA_CHECK(inner != nullptr, "PrefetchSource: no source to prefetch from");
  return *inner;
}

}  // namespace

PrefetchSource::PrefetchSource(std::unique_ptr<IndexSource> inner, int depth)
    : IndexSource(std::vector<int64_t>(checked(inner).rows().begin(), checked(inner).rows().end()),
                  checked(inner).num_dense(), checked(inner).batch_size(), checked(inner).num_batches()),
      inner_(std::move(inner)),
      depth_(static_cast<std::size_t>(depth)) {
  STRATA_CHECK(depth >= 1, "PrefetchSource: depth must be at least 1, got ", depth);
  start();
}

PrefetchSource::~PrefetchSource() { stop(); }

std::string PrefetchSource::describe() const { return inner_->describe() + ", prefetched"; }

void PrefetchSource::start() {
  finished_ = false;
  stopping_ = false;
  error_ = nullptr;
  thread_ = std::thread([this] { produce(); });
}

void PrefetchSource::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PrefetchSource::produce() {
  for (;;) {
    Batch buffer;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || ready_.size() < depth_; });
      if (stopping_) return;
      if (!spare_.empty()) {
        buffer = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    bool got = false;
    std::exception_ptr error;
    try {
      got = inner_->next(buffer);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error)
        error_ = error;
      else if (!got)
        finished_ = true;
      else
        ready_.push_back(std::move(buffer));
    }
    changed_.notify_all();
    if (error || !got) return;
  }
}

bool PrefetchSource::next(Batch& batch) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty() || finished_ || error_; });
  if (!ready_.empty()) {
    std::swap(batch, ready_.front());
    spare_.push_back(std::move(ready_.front()));
    ready_.pop_front();
    lock.unlock();
    changed_.notify_all();
    return true;
  }
  if (error_) std::rethrow_exception(error_);
  return false;
}

void PrefetchSource::reset() {
  stop();
  inner_->reset();
  for (Batch& b : ready_) spare_.push_back(std::move(b));
  ready_.clear();
  start();
}

}  // namespace strata::emb
