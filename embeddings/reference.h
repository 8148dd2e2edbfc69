#pragma once
/// @file
/// Naive reference lookup and update for tests: the rules of Note [Embedding summation order]
/// (embeddings/kernels.h) written as plainly as possible over a dense row-major f32 copy of a
/// table (bf16 tables: values that bf16 represents exactly). No reindexing, no parallelism, no
/// specialization: a std::map from row to its occurrences in (bag, position) order.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "embeddings/kernels.h"

namespace strata::emb::reference {

/// A table as plain floats: rows × d, row-major.
struct DenseTable {
  int64_t rows = 0;
  int64_t d = 0;
  ElemType type = ElemType::F32;
  std::vector<float> w;
  /// Adagrad accumulators when used with an Adagrad: rows floats (row-wise) or rows × d
  /// (element-wise).
  std::vector<float> accum;

  float* row(int64_t r) { return w.data() + r * d; }
  const float* row(int64_t r) const { return w.data() + r * d; }
};

/// The value a table of element type `t` stores for `x`.
inline float stored(ElemType t, float x) {
  if (t == ElemType::F32) return x;
  return static_cast<float>(BFloat16::from_bits(BFloat16::round_from_float(x)));
}

/// out row b (d floats at out + b * stride) = the pooled bag b.
inline void lookup(const DenseTable& t, const Bags& bags, Pooling pooling, float* out, int64_t stride) {
  for (int64_t b = 0; b < bags.batch(); ++b) {
    std::vector<float> acc(static_cast<std::size_t>(t.d), 0.0f);
    const int64_t begin = bags.offsets[b], end = bags.offsets[b + 1];
    for (int64_t k = begin; k < end; ++k) {
      const float* r = t.row(bags.indices[k]);
      for (int64_t j = 0; j < t.d; ++j) {
        if (bags.weights.empty())
          acc[j] = acc[j] + r[j];
        else
          acc[j] = std::fma(bags.weights[k], r[j], acc[j]);
      }
    }
    for (int64_t j = 0; j < t.d; ++j) {
      float v = acc[j];
      if (pooling == Pooling::Mean && end > begin) v = v / static_cast<float>(end - begin);
      out[b * stride + j] = v;
    }
  }
}

/// One fused backward + optimizer step: grad row b (d floats at grad + b * stride) is the gradient
/// of bag b's output.
/// `learned`: learned pooling weights stepped with the rows (bags.weights must be v[indices]).
inline void update(DenseTable& t, const Bags& bags, Pooling pooling, const float* grad, int64_t stride,
                   const SparseOptimizer& opt, LearnedPoolingWeights* learned = nullptr) {
  if (opt.kind == SparseOptimizer::Kind::RowWiseAdagrad && t.accum.empty())
    t.accum.assign(static_cast<std::size_t>(t.rows), opt.initial_accumulator);
  if (opt.kind == SparseOptimizer::Kind::Adagrad && t.accum.empty())
    t.accum.assign(static_cast<std::size_t>(t.rows * t.d), opt.initial_accumulator);
  // row -> (bag, coefficient) in (bag, position) order.
  std::map<int64_t, std::vector<std::pair<int64_t, float>>> occurrences;
  for (int64_t b = 0; b < bags.batch(); ++b) {
    const int64_t begin = bags.offsets[b], end = bags.offsets[b + 1];
    for (int64_t k = begin; k < end; ++k) {
      float c = 1.0f;
      if (!bags.weights.empty())
        c = bags.weights[k];
      else if (pooling == Pooling::Mean)
        c = 1.0f / static_cast<float>(end - begin);
      occurrences[bags.indices[k]].push_back({b, c});
    }
  }
  for (const auto& [r, list] : occurrences) {
    std::vector<float> g(static_cast<std::size_t>(t.d), 0.0f);
    for (const auto& [b, c] : list)
      for (int64_t j = 0; j < t.d; ++j) g[j] = std::fma(c, grad[b * stride + j], g[j]);
    if (learned != nullptr) {
      // dL/dv_r: Σ over the occurrences of dot(grad_out[bag], w_r), with w_r before its step.
      float gv = 0.0f;
      for (const auto& [b, c] : list) {
        float dot = 0.0f;
        for (int64_t j = 0; j < t.d; ++j) dot = std::fma(grad[b * stride + j], t.row(r)[j], dot);
        gv = gv + dot;
      }
      float& v = learned->v[static_cast<std::size_t>(r)];
      if (opt.kind == SparseOptimizer::Kind::SGD) {
        v = std::fma(-opt.lr, gv, v);
      } else {
        float& sv = learned->sum[static_cast<std::size_t>(r)];
        sv = std::fma(gv, gv, sv);
        v = std::fma(-opt.lr, gv / (std::sqrt(sv) + opt.eps), v);
      }
    }
    if (opt.kind == SparseOptimizer::Kind::Adagrad) {
      float* w = t.row(r);
      for (int64_t j = 0; j < t.d; ++j) {
        float& s = t.accum[static_cast<std::size_t>(r * t.d + j)];
        s = std::fma(g[j], g[j], s);
        w[j] = stored(t.type, std::fma(-opt.lr, g[j] / (std::sqrt(s) + opt.eps), w[j]));
      }
      continue;
    }
    float step = -opt.lr;
    if (opt.kind == SparseOptimizer::Kind::RowWiseAdagrad) {
      double lane[8] = {};
      for (int64_t j = 0; j < t.d; ++j) lane[j % 8] = std::fma(double(g[j]), double(g[j]), lane[j % 8]);
      double sum = 0;
      for (int l = 0; l < 8; ++l) sum = l == 0 ? lane[0] : sum + lane[l];
      t.accum[r] = t.accum[r] + static_cast<float>(sum / static_cast<double>(t.d));
      step = -(opt.lr / (std::sqrt(t.accum[r]) + opt.eps));
    }
    float* w = t.row(r);
    for (int64_t j = 0; j < t.d; ++j) w[j] = stored(t.type, std::fma(step, g[j], w[j]));
  }
}

/// A dense copy of a table's current contents.
inline DenseTable snapshot(Table& t) {
  DenseTable d{t.nvectors(), t.featuresize(), t.elem_type(), {}, {}};
  d.w.resize(static_cast<std::size_t>(t.nvectors() * t.featuresize()));
  t.copy_to(d.w.data());
  return d;
}

/// Fills a table with values in [-1, 1) drawn from `seed` (bf16 tables store them rounded) and
/// returns its dense copy.
inline DenseTable fill_random(Table& t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> w(static_cast<std::size_t>(t.nvectors() * t.featuresize()));
  for (auto& x : w) x = u(rng);
  if (auto* s = dynamic_cast<SimpleTable*>(&t); s != nullptr && t.elem_type() == ElemType::F32) {
    std::memcpy(s->data(), w.data(), w.size() * sizeof(float));  // fast path for big test tables
  } else {
    t.copy_from(w.data());
  }
  t.reset_counters();
  DenseTable d{t.nvectors(), t.featuresize(), t.elem_type(), std::move(w), {}};
  for (auto& x : d.w) x = stored(t.elem_type(), x);
  return d;
}

/// Owned storage for one table's bags (Bags is a view).
struct BagSet {
  std::vector<int64_t> indices;
  std::vector<int64_t> offsets{0};
  std::vector<float> weights;
  Bags view() const { return Bags{indices, offsets, weights}; }
  /// Appends a bag.
  void add(std::initializer_list<int64_t> rows, std::initializer_list<float> w = {}) {
    indices.insert(indices.end(), rows.begin(), rows.end());
    weights.insert(weights.end(), w.begin(), w.end());
    offsets.push_back(static_cast<int64_t>(indices.size()));
  }
};

/// Random bags: sizes uniform in [0, max_bag] (so some are empty), rows uniform in [0, rows) or,
/// with `hot` > 0, drawn from the first `hot` rows half of the time (duplicates within a bag and
/// across the batch are then certain); weights in [-2, 2) when `weighted`.
inline BagSet random_bags(std::mt19937& rng, int64_t batch, int64_t max_bag, int64_t rows, bool weighted,
                          int64_t hot = 0) {
  BagSet s;
  hot = std::min(hot, rows);
  std::uniform_int_distribution<int64_t> len(0, max_bag), row(0, rows - 1), hot_row(0, hot > 0 ? hot - 1 : 0);
  std::uniform_real_distribution<float> w(-2.0f, 2.0f);
  std::bernoulli_distribution pick_hot(0.5);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = len(rng);
    for (int64_t i = 0; i < n; ++i) {
      s.indices.push_back(hot > 0 && pick_hot(rng) ? hot_row(rng) : row(rng));
      if (weighted) s.weights.push_back(w(rng));
    }
    s.offsets.push_back(static_cast<int64_t>(s.indices.size()));
  }
  return s;
}

/// Random gradients (or any buffer) of n floats in [-1, 1).
inline std::vector<float> random_floats(std::mt19937& rng, std::size_t n) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

}  // namespace strata::emb::reference
