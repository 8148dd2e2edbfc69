#pragma once
/// @file
/// PrefetchSource: an IndexSource that fills the next batches of another one on a background
/// thread, so a training step does not wait for file reads and batch assembly.
///
/// Note [Prefetching batches]
/// One producer thread calls the wrapped source's next() into spare Batch buffers and queues up to
/// `depth` filled batches; next() swaps the oldest into the caller's Batch and recycles the
/// caller's old buffers as spares, so after warm-up nothing is allocated. The wrapped source is
/// touched only by the producer while it runs; reset() stops the producer, resets the source,
/// drops what was queued and starts again. An exception in the producer ends it: the batches queued
/// before it are still delivered, then next() rethrows it (and again on every later call until
/// reset()). The destructor stops the producer (it may be inside the wrapped next(), which is
/// awaited).

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "embeddings/index_source.h"

namespace strata::emb {

class PrefetchSource final : public IndexSource {
 public:
  /// Starts prefetching from `inner` at once. Throws strata::Error for depth < 1 or a null source.
  explicit PrefetchSource(std::unique_ptr<IndexSource> inner, int depth = 2);
  ~PrefetchSource() override;
  bool next(Batch& batch) override;
  void reset() override;
  std::string describe() const override;
  /// The wrapped source (do not call its next() or reset() while this one is in use).
  const IndexSource& inner() const { return *inner_; }

 private:
  void start();
  void stop();
  void produce();
  std::unique_ptr<IndexSource> inner_;
  std::size_t depth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> ready_;
  std::vector<Batch> spare_;
  bool finished_ = false;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace strata::emb
