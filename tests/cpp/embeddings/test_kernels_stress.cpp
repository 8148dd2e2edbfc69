// Embedding kernels driven from several threads at once (run under ThreadSanitizer by the lead):
// each thread training its own ensemble, and many threads looking up shared tables concurrently.
// Every result is checked against the naive reference.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "embeddings/kernels.h"
#include "embeddings/reference.h"
#include "memory/heap.h"

using namespace strata;
using namespace strata::emb;
namespace ref = strata::emb::reference;

namespace {

constexpr int kThreads = 4;

struct Ensemble {
  std::vector<std::unique_ptr<SimpleTable>> tables;
  std::vector<ref::DenseTable> dense;
  std::vector<std::unique_ptr<SparseOptimizerState>> states;
  std::vector<std::unique_ptr<UpdateWorkspace>> workspaces;
  int64_t width = 0;
};

Ensemble make_ensemble(memory::Heap& heap, const std::vector<std::pair<int64_t, int64_t>>& shapes,
                       const SparseOptimizer& opt, uint32_t seed) {
  Ensemble e;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    e.tables.push_back(std::make_unique<SimpleTable>(
        shapes[i].first, shapes[i].second, i % 2 ? ElemType::BF16 : ElemType::F32, TableMemory{&heap, nullptr}));
    e.dense.push_back(ref::fill_random(*e.tables.back(), seed + static_cast<uint32_t>(i)));
    e.states.push_back(std::make_unique<SparseOptimizerState>(*e.tables.back(), opt));
    e.workspaces.push_back(std::make_unique<UpdateWorkspace>());
    e.width += shapes[i].second;
  }
  return e;
}

}  // namespace

TEST(EmbeddingKernelsStress, ThreadsTrainingTheirOwnEnsembles) {
  memory::DramHeap heap(64 << 20);
  const SparseOptimizer opt{SparseOptimizer::Kind::RowWiseAdagrad, 0.05f, 1e-8f, 0.0f};
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{3000, 16}, {50, 32}, {9000, 64}};
  std::vector<Ensemble> ensembles;
  for (int t = 0; t < kThreads; ++t) ensembles.push_back(make_ensemble(heap, shapes, opt, 10u * t));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Ensemble& e = ensembles[static_cast<std::size_t>(t)];
      std::mt19937 rng(100 + t);
      const int64_t batch = 96;
      for (int step = 0; step < 4; ++step) {
        std::vector<ref::BagSet> sets;
        for (auto& [rows, d] : shapes) sets.push_back(ref::random_bags(rng, batch, 12, rows, false, 8));
        std::vector<Table*> tables;
        std::vector<Bags> bags;
        std::vector<OutputSlice> outs, grads;
        std::vector<SparseOptimizerState*> states;
        std::vector<UpdateWorkspace*> wss;
        std::vector<float> out(static_cast<std::size_t>(batch * e.width)), want(out.size());
        const auto grad = ref::random_floats(rng, out.size());
        int64_t col = 0;
        for (std::size_t i = 0; i < shapes.size(); ++i) {
          tables.push_back(e.tables[i].get());
          bags.push_back(sets[i].view());
          outs.push_back({out.data() + col, e.width});
          grads.push_back({const_cast<float*>(grad.data()) + col, e.width});
          states.push_back(e.states[i].get());
          wss.push_back(e.workspaces[i].get());
          ref::lookup(e.dense[i], bags.back(), Pooling::Sum, want.data() + col, e.width);
          col += shapes[i].second;
        }
        lookup_ensemble(tables, bags, Pooling::Sum, outs);
        if (std::memcmp(out.data(), want.data(), out.size() * sizeof(float)) != 0) failures.fetch_add(1);
        update_ensemble(tables, bags, Pooling::Sum, grads, opt, states, wss);
        col = 0;
        for (std::size_t i = 0; i < shapes.size(); ++i) {
          ref::update(e.dense[i], bags[i], Pooling::Sum, grad.data() + col, e.width, opt);
          col += shapes[i].second;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (auto& e : ensembles) {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const auto got = ref::snapshot(*e.tables[i]).w;
      EXPECT_EQ(std::memcmp(got.data(), e.dense[i].w.data(), got.size() * sizeof(float)), 0) << "table " << i;
      const auto acc = e.states[i]->accumulators();
      EXPECT_EQ(std::memcmp(acc.data(), e.dense[i].accum.data(), acc.size() * sizeof(float)), 0) << "table " << i;
    }
  }
}

TEST(EmbeddingKernelsStress, ConcurrentLookupsOnSharedTables) {
  memory::DramHeap heap(64 << 20);
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{20000, 32}, {7, 16}, {4000, 128}};
  Ensemble shared = make_ensemble(heap, shapes, SparseOptimizer{}, 3);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(200 + t);
      const int64_t batch = 80;
      for (int step = 0; step < 6; ++step) {
        const Pooling pooling = step % 2 ? Pooling::Mean : Pooling::Sum;
        std::vector<ref::BagSet> sets;
        for (auto& [rows, d] : shapes) sets.push_back(ref::random_bags(rng, batch, 20, rows, false, 4));
        std::vector<Table*> tables;
        std::vector<Bags> bags;
        std::vector<OutputSlice> outs;
        std::vector<float> out(static_cast<std::size_t>(batch * shared.width)), want(out.size());
        int64_t col = 0;
        for (std::size_t i = 0; i < shapes.size(); ++i) {
          tables.push_back(shared.tables[i].get());
          bags.push_back(sets[i].view());
          outs.push_back({out.data() + col, shared.width});
          ref::lookup(shared.dense[i], bags.back(), pooling, want.data() + col, shared.width);
          col += shapes[i].second;
        }
        if (t % 2 == 0) {
          lookup_ensemble(tables, bags, pooling, outs);
        } else {
          for (std::size_t i = 0; i < shapes.size(); ++i) lookup(*tables[i], bags[i], pooling, outs[i]);
        }
        if (std::memcmp(out.data(), want.data(), out.size() * sizeof(float)) != 0) failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}
