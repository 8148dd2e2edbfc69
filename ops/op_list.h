#pragma once
/// @file
/// The op list: one line per op, the single source of the op enum (OpKind), the op names and
/// families (kOps). Backends answer supports(OpKind) from it, and the test harness's coverage test
/// iterates it (tests/cpp/ops/harness: every op listed here must have a harness case; a test fails
/// otherwise). The Python bindings are written op by op (python/src/ops_bindings.cpp, ...).
///
/// X(id, family) — `id` is the C++ function name (in namespace strata) and the op's name in errors,
/// reports and the harness; `family` names the file in ops/ that holds its forward, backward and
/// shape inference.

#include <array>
#include <cstddef>
#include <string_view>

#define STRATA_FOR_EACH_OP(X)                                                              \
  /* ops/linalg.h */                                                                       \
  X(matmul, linalg)                                                                        \
  X(linear, linalg)                                                                        \
  X(bmm, linalg)                                                                           \
  /* ops/conv.h */                                                                         \
  X(conv2d, conv)                                                                          \
  /* ops/pooling.h */                                                                      \
  X(max_pool2d, pooling)                                                                   \
  X(avg_pool2d, pooling)                                                                   \
  X(adaptive_avg_pool2d, pooling)                                                          \
  /* ops/normalization.h */                                                                \
  X(batch_norm, normalization)                                                             \
  X(layer_norm, normalization)                                                             \
  /* ops/unary.h */                                                                        \
  X(relu, unary)                                                                           \
  X(leaky_relu, unary)                                                                     \
  X(sigmoid, unary)                                                                        \
  X(tanh, unary)                                                                           \
  X(gelu, unary)                                                                           \
  X(exp, unary)                                                                            \
  X(log, unary)                                                                            \
  X(sqrt, unary)                                                                           \
  X(pow, unary)                                                                            \
  X(clamp, unary)                                                                          \
  X(dropout, unary)                                                                        \
  /* ops/binary.h */                                                                       \
  X(add, binary)                                                                           \
  X(sub, binary)                                                                           \
  X(mul, binary)                                                                           \
  X(div, binary)                                                                           \
  X(maximum, binary)                                                                       \
  X(where, binary)                                                                         \
  /* ops/reduction.h */                                                                    \
  X(sum, reduction)                                                                        \
  X(mean, reduction)                                                                       \
  X(amax, reduction)                                                                       \
  /* ops/shape_ops.h */                                                                    \
  X(reshape, shape_ops)                                                                    \
  X(transpose, shape_ops)                                                                  \
  X(permute, shape_ops)                                                                    \
  X(cat, shape_ops)                                                                        \
  X(split, shape_ops)                                                                      \
  X(slice, shape_ops)                                                                      \
  X(index_select, shape_ops)                                                               \
  X(gather, shape_ops)                                                                     \
  /* ops/softmax_loss.h */                                                                 \
  X(softmax, softmax_loss)                                                                 \
  X(log_softmax, softmax_loss)                                                             \
  X(mse_loss, softmax_loss)                                                                \
  X(binary_cross_entropy, softmax_loss)                                                    \
  X(binary_cross_entropy_with_logits, softmax_loss)                                        \
  X(cross_entropy, softmax_loss)                                                           \
  X(nll_loss, softmax_loss)                                                                \
  /* ops/embedding.h */                                                                    \
  X(embedding_bag, embedding)                                                              \
  X(dot_interaction, embedding)                                                            \
  /* issue 26 part 1: promotion, integer and bool tensors, index-returning reductions */   \
  X(floor_divide, binary)                                                                  \
  X(remainder, binary)                                                                     \
  X(minimum, binary)                                                                       \
  X(neg, unary)                                                                            \
  X(abs, unary)                                                                            \
  X(prod, reduction)                                                                       \
  X(amin, reduction)                                                                       \
  X(any, reduction)                                                                        \
  X(all, reduction)                                                                        \
  /* ops/comparison.h */                                                                   \
  X(eq, comparison)                                                                        \
  X(ne, comparison)                                                                        \
  X(lt, comparison)                                                                        \
  X(le, comparison)                                                                        \
  X(gt, comparison)                                                                        \
  X(ge, comparison)                                                                        \
  X(logical_and, comparison)                                                               \
  X(logical_or, comparison)                                                                \
  X(logical_xor, comparison)                                                               \
  X(logical_not, comparison)                                                               \
  X(bitwise_and, comparison)                                                               \
  X(bitwise_or, comparison)                                                                \
  X(bitwise_xor, comparison)                                                               \
  X(bitwise_not, comparison)                                                               \
  /* ops/index_reduction.h */                                                              \
  X(argmax, index_reduction)                                                               \
  X(argmin, index_reduction)                                                               \
  X(max, index_reduction)                                                                  \
  X(min, index_reduction)                                                                  \
  X(topk, index_reduction)                                                                 \
  X(sort, index_reduction)                                                                 \
  /* issue 26 parts 7-8 */                                                                 \
  X(silu, unary)                                                                           \
  X(l1_loss, softmax_loss)                                                                 \
  X(embedding, embedding)                                                                  \
  /* ops/attention.h */                                                                    \
  X(scaled_dot_product_attention, attention)                                               \
  /* issue 26 part 4: ops/elementwise_math.h */                                            \
  X(sin, elementwise_math)                                                                 \
  X(cos, elementwise_math)                                                                 \
  X(tan, elementwise_math)                                                                 \
  X(asin, elementwise_math)                                                                \
  X(acos, elementwise_math)                                                                \
  X(atan, elementwise_math)                                                                \
  X(atan2, elementwise_math)                                                               \
  X(sinh, elementwise_math)                                                                \
  X(cosh, elementwise_math)                                                                \
  X(floor, elementwise_math)                                                               \
  X(ceil, elementwise_math)                                                                \
  X(trunc, elementwise_math)                                                               \
  X(round, elementwise_math)                                                               \
  X(sign, elementwise_math)                                                                \
  X(expm1, elementwise_math)                                                               \
  X(log1p, elementwise_math)                                                               \
  X(rsqrt, elementwise_math)                                                               \
  X(erf, elementwise_math)                                                                 \
  X(square, elementwise_math)                                                              \
  X(reciprocal, elementwise_math)                                                          \
  /* ops/statistics.h */                                                                   \
  X(var, statistics)                                                                       \
  X(std, statistics)                                                                       \
  X(norm, statistics)                                                                      \
  X(logsumexp, statistics)                                                                 \
  X(cumsum, statistics)                                                                    \
  /* ops/shape_transforms.h */                                                             \
  X(stack, shape_transforms)                                                               \
  X(chunk, shape_transforms)                                                               \
  X(flip, shape_transforms)                                                                \
  X(roll, shape_transforms)                                                                \
  X(repeat, shape_transforms)                                                              \
  X(repeat_interleave, shape_transforms)                                                   \
  X(tril, shape_transforms)                                                                \
  X(triu, shape_transforms)                                                                \
  /* ops/einsum.h */                                                                       \
  X(einsum, einsum)                                                                        \
  /* issue 26 part 2: ops/indexing.h, ops/scatter.h */                                     \
  X(index, indexing)                                                                       \
  X(index_put, indexing)                                                                   \
  X(masked_fill, indexing)                                                                 \
  X(masked_select, indexing)                                                               \
  X(nonzero, indexing)                                                                     \
  X(one_hot, indexing)                                                                     \
  X(index_add, indexing)                                                                   \
  X(take_along_dim, indexing)                                                              \
  X(scatter, scatter)                                                                      \
  X(scatter_add, scatter)                                                                  \
  X(scatter_reduce, scatter)                                                               \
  /* issue 26 part 7: conv1d, conv_transpose2d, group_norm, normalize, pad, interpolate */ \
  X(conv1d, conv)                                                                          \
  X(conv_transpose2d, conv)                                                                \
  X(group_norm, normalization)                                                             \
  X(normalize, normalization)                                                              \
  X(pad, resample)                                                                         \
  X(interpolate, resample)

namespace strata {

enum class OpKind {
#define STRATA_OP_ENUM(id, family) id,
  STRATA_FOR_EACH_OP(STRATA_OP_ENUM)
#undef STRATA_OP_ENUM
};

inline constexpr std::size_t kNumOps = 0
#define STRATA_OP_COUNT(id, family) +1
    STRATA_FOR_EACH_OP(STRATA_OP_COUNT)
#undef STRATA_OP_COUNT
    ;

struct OpInfo {
  OpKind kind;
  std::string_view name;
  std::string_view family;
};

inline constexpr std::array<OpInfo, kNumOps> kOps = {{
#define STRATA_OP_INFO(id, family) {OpKind::id, #id, #family},
    STRATA_FOR_EACH_OP(STRATA_OP_INFO)
#undef STRATA_OP_INFO
}};

constexpr std::string_view op_name(OpKind op) { return kOps[static_cast<std::size_t>(op)].name; }
constexpr std::string_view op_family(OpKind op) { return kOps[static_cast<std::size_t>(op)].family; }

}  // namespace strata
