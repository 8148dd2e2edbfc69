#pragma once
/// @file
/// The op list: one line per op, the single source of the op enum, the op names, the Python
/// bindings' registry and the test harness's registry (tests/cpp/ops/harness: every op listed here
/// must have a harness case; a test fails otherwise).
///
/// X(id, family) — `id` is the C++ function name (in namespace strata) and the op's name in errors,
/// reports and the harness; `family` names the file in ops/ that holds its forward, backward and
/// shape inference.

#include <array>
#include <cstddef>
#include <string_view>

#define STRATA_FOR_EACH_OP(X)         \
  /* ops/linalg.h */                  \
  X(matmul, linalg)                   \
  X(linear, linalg)                   \
  X(bmm, linalg)                      \
  /* ops/conv.h */                    \
  X(conv2d, conv)                     \
  /* ops/pooling.h */                 \
  X(max_pool2d, pooling)              \
  X(avg_pool2d, pooling)              \
  X(adaptive_avg_pool2d, pooling)     \
  /* ops/normalization.h */           \
  X(batch_norm, normalization)        \
  X(layer_norm, normalization)        \
  /* ops/unary.h */                   \
  X(relu, unary)                      \
  X(leaky_relu, unary)                \
  X(sigmoid, unary)                   \
  X(tanh, unary)                      \
  X(gelu, unary)                      \
  X(exp, unary)                       \
  X(log, unary)                       \
  X(sqrt, unary)                      \
  X(pow, unary)                       \
  X(clamp, unary)                     \
  X(dropout, unary)                   \
  /* ops/binary.h */                  \
  X(add, binary)                      \
  X(sub, binary)                      \
  X(mul, binary)                      \
  X(div, binary)                      \
  X(maximum, binary)                  \
  X(where, binary)                    \
  /* ops/reduction.h */               \
  X(sum, reduction)                   \
  X(mean, reduction)                  \
  X(amax, reduction)                  \
  /* ops/shape_ops.h */               \
  X(reshape, shape_ops)               \
  X(transpose, shape_ops)             \
  X(permute, shape_ops)               \
  X(cat, shape_ops)                   \
  X(split, shape_ops)                 \
  X(slice, shape_ops)                 \
  X(index_select, shape_ops)          \
  X(gather, shape_ops)                \
  /* ops/softmax_loss.h */            \
  X(softmax, softmax_loss)            \
  X(log_softmax, softmax_loss)        \
  X(mse_loss, softmax_loss)           \
  X(binary_cross_entropy, softmax_loss) \
  X(binary_cross_entropy_with_logits, softmax_loss) \
  X(cross_entropy, softmax_loss)      \
  X(nll_loss, softmax_loss)           \
  /* ops/embedding.h */               \
  X(embedding_bag, embedding)         \
  X(dot_interaction, embedding)      \
  /* issue 26 parts 7-8 */            \
  X(silu, unary)                      \
  X(l1_loss, softmax_loss)            \
  X(embedding, embedding)             \
  /* ops/attention.h */               \
  X(scaled_dot_product_attention, attention)

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
