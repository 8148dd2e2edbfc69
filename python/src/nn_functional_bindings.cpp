// The torch.nn.functional ops of ops/op_list.h under PyTorch's names (strata._C): convolution,
// pooling, normalization, losses, embedding and attention (the tensor ops are ops_bindings.cpp).

#include <string>
#include <vector>

#include "bindings.h"
#include "ops/attention.h"
#include "ops/conv.h"
#include "ops/embedding.h"
#include "ops/normalization.h"
#include "ops/pooling.h"
#include "ops/softmax_loss.h"
#include "ops/unary.h"

namespace strata::python {

namespace {

// conv2d's `padding`: an int, a pair, or PyTorch's 'valid' / 'same' (symmetric padding only).
Dims conv2d_padding_arg(py::handle padding, const Tensor& weight, const Dims& stride, const Dims& dilation) {
  if (!py::isinstance<py::str>(padding)) return pair_arg(padding, "conv2d", "padding");
  const std::string mode = padding.cast<std::string>();
  if (mode == "valid") return {0, 0};
  if (mode != "same")
    throw BindingValueError(
        msg("conv2d(): invalid padding string ", quote_field(mode), ", should be one of {'valid', 'same'}"));
  if (stride[0] != 1 || stride[1] != 1)
    throw BindingValueError("conv2d(): padding='same' is not supported for strided convolution");
  check_rank(weight, {4}, "conv2d", "weight");
  Dims p;
  for (int i = 0; i < 2; ++i) {
    const int64_t total = dilation[i] * (weight.size(2 + i) - 1);
    if (total % 2 != 0)
      raise_not_implemented(
          "conv2d(): padding='same' needs asymmetric padding for this kernel and dilation, "
          "which Strata's conv2d does not support");
    p.push_back(total / 2);
  }
  return p;
}

// A pooling op's `stride`: None or an empty sequence means the kernel size (PyTorch's default).
Dims pool_stride_arg(py::handle stride, const Dims& kernel, const char* op) {
  if (stride.is_none() || (PySequence_Check(stride.ptr()) && py::len(stride) == 0)) return kernel;
  return pair_arg(stride, op, "stride");
}

void def_conv(py::module_& m) {
  using py::arg;
  const auto none = py::none();
  m.def(
      "conv2d",
      [](py::handle input, py::handle weight, py::handle bias, py::handle stride, py::handle padding,
         py::handle dilation, py::handle groups) {
        Tensor x = tensor_arg(input, "conv2d", "input"), w = tensor_arg(weight, "conv2d", "weight");
        Tensor b = opt_tensor(bias, "conv2d", "bias");
        const Dims s = pair_arg(stride, "conv2d", "stride"), d = pair_arg(dilation, "conv2d", "dilation");
        const Dims p = conv2d_padding_arg(padding, w, s, d);
        const int64_t g = int_from_py(groups, "conv2d", "groups");
        py::gil_scoped_release r;
        return conv2d(x, w, b, s, p, d, g);
      },
      arg("input"), arg("weight"), arg("bias") = none, arg("stride") = 1, arg("padding") = 0, arg("dilation") = 1,
      arg("groups") = 1, "2-D convolution over NCHW input (torch.nn.functional.conv2d).");
}

void def_pooling(py::module_& m) {
  using py::arg;
  const auto none = py::none();
  m.def(
      "max_pool2d",
      [](py::handle input, py::handle kernel_size, py::handle stride, py::handle padding, py::handle dilation,
         bool ceil_mode, bool return_indices) {
        if (return_indices) raise_not_implemented("max_pool2d(): return_indices=True is not supported by Strata");
        Tensor x = tensor_arg(input, "max_pool2d", "input");
        const Dims k = pair_arg(kernel_size, "max_pool2d", "kernel_size");
        const Dims s = pool_stride_arg(stride, k, "max_pool2d");
        const Dims p = pair_arg(padding, "max_pool2d", "padding"), d = pair_arg(dilation, "max_pool2d", "dilation");
        py::gil_scoped_release r;
        return max_pool2d(x, k, s, p, d, ceil_mode);
      },
      arg("input"), arg("kernel_size"), arg("stride") = none, arg("padding") = 0, arg("dilation") = 1,
      arg("ceil_mode") = false, arg("return_indices") = false, "2-D max pooling (torch.nn.functional.max_pool2d).");
  m.def(
      "avg_pool2d",
      [](py::handle input, py::handle kernel_size, py::handle stride, py::handle padding, bool ceil_mode,
         bool count_include_pad, py::handle divisor_override) {
        if (!divisor_override.is_none())
          raise_not_implemented("avg_pool2d(): divisor_override is not supported by Strata");
        Tensor x = tensor_arg(input, "avg_pool2d", "input");
        const Dims k = pair_arg(kernel_size, "avg_pool2d", "kernel_size");
        const Dims s = pool_stride_arg(stride, k, "avg_pool2d");
        const Dims p = pair_arg(padding, "avg_pool2d", "padding");
        py::gil_scoped_release r;
        return avg_pool2d(x, k, s, p, ceil_mode, count_include_pad);
      },
      arg("input"), arg("kernel_size"), arg("stride") = none, arg("padding") = 0, arg("ceil_mode") = false,
      arg("count_include_pad") = true, arg("divisor_override") = none,
      "2-D average pooling (torch.nn.functional.avg_pool2d).");
  m.def(
      "adaptive_avg_pool2d",
      [](py::handle input, py::handle output_size) {
        Tensor x = tensor_arg(input, "adaptive_avg_pool2d", "input");
        check_rank(x, {3, 4}, "adaptive_avg_pool2d", "input");
        Dims o;
        if (PySequence_Check(output_size.ptr())) {
          py::sequence seq = py::reinterpret_borrow<py::sequence>(output_size);
          if (py::len(seq) != 2)
            throw BindingValueError(
                msg("adaptive_avg_pool2d(): output_size must be an int or a pair, got ", py::len(seq), " values"));
          for (int i = 0; i < 2; ++i)  // None keeps the input's size (as in PyTorch)
            o.push_back(seq[i].is_none() ? x.size(x.dim() - 2 + i)
                                         : int_from_py(seq[i], "adaptive_avg_pool2d", "output_size"));
        } else {
          o = pair_arg(output_size, "adaptive_avg_pool2d", "output_size");
        }
        py::gil_scoped_release r;
        return adaptive_avg_pool2d(x, o);
      },
      arg("input"), arg("output_size"), "2-D adaptive average pooling.");
}

void def_normalization(py::module_& m) {
  using py::arg;
  const auto none = py::none();
  m.def(
      "batch_norm",
      [](py::handle input, py::handle running_mean, py::handle running_var, py::handle weight, py::handle bias,
         bool training, double momentum, double eps) {
        Tensor x = tensor_arg(input, "batch_norm", "input");
        Tensor rm = opt_tensor(running_mean, "batch_norm", "running_mean");
        Tensor rv = opt_tensor(running_var, "batch_norm", "running_var");
        Tensor w = opt_tensor(weight, "batch_norm", "weight"), b = opt_tensor(bias, "batch_norm", "bias");
        py::gil_scoped_release r;
        return batch_norm(x, rm, rv, w, b, training, momentum, eps);
      },
      arg("input"), arg("running_mean"), arg("running_var"), arg("weight") = none, arg("bias") = none,
      arg("training") = false, arg("momentum") = 0.1, arg("eps") = 1e-5,
      "Batch normalization over dim 1 (torch.nn.functional.batch_norm); updates the running stats when training.");
  m.def(
      "layer_norm",
      [](py::handle input, py::handle normalized_shape, py::handle weight, py::handle bias, double eps) {
        Tensor x = tensor_arg(input, "layer_norm", "input");
        const Dims shape = int_list_from_sequence(normalized_shape, "layer_norm", "normalized_shape");
        Tensor w = opt_tensor(weight, "layer_norm", "weight"), b = opt_tensor(bias, "layer_norm", "bias");
        py::gil_scoped_release r;
        return layer_norm(x, shape, w, b, eps);
      },
      arg("input"), arg("normalized_shape"), arg("weight") = none, arg("bias") = none, arg("eps") = 1e-5,
      "Layer normalization over the trailing normalized_shape dims.");
}

// softmax / log_softmax(input, dim, dtype=None): the op over one dim; a dtype is refused.
template <Tensor (*Op)(const Tensor&, int64_t)>
void def_softmax_over_dim(py::module_& m, const char* name) {
  m.def(
      name,
      [name](py::handle input, py::handle dim, py::handle dtype) {
        check_no_dtype(dtype, name);
        Tensor x = tensor_arg(input, name, "input");
        const int64_t d = wrap_dim_py(dim_arg(dim, name), x.dim(), name, true);
        py::gil_scoped_release r;
        return Op(x, d);
      },
      py::arg("input"), py::arg("dim"), py::arg("dtype") = py::none());
}

void def_losses(py::module_& m) {
  using py::arg;
  const auto none = py::none();
  def_softmax_over_dim<softmax>(m, "softmax");
  def_softmax_over_dim<log_softmax>(m, "log_softmax");
  m.def(
      "mse_loss",
      [](py::handle input, py::handle target, py::handle reduction) {
        Tensor x = tensor_arg(input, "mse_loss", "input"), t = tensor_arg(target, "mse_loss", "target");
        const Reduction red = reduction_arg(reduction, "mse_loss");
        py::gil_scoped_release r;
        return mse_loss(x, t, red);
      },
      arg("input"), arg("target"), arg("reduction") = "mean");
  m.def(
      "binary_cross_entropy",
      [](py::handle input, py::handle target, py::handle weight, py::handle reduction) {
        Tensor x = tensor_arg(input, "binary_cross_entropy", "input");
        Tensor t = tensor_arg(target, "binary_cross_entropy", "target");
        Tensor w = opt_tensor(weight, "binary_cross_entropy", "weight");
        const Reduction red = reduction_arg(reduction, "binary_cross_entropy");
        py::gil_scoped_release r;
        return binary_cross_entropy(x, t, w, red);
      },
      arg("input"), arg("target"), arg("weight") = none, arg("reduction") = "mean");
  m.def(
      "binary_cross_entropy_with_logits",
      [](py::handle input, py::handle target, py::handle weight, py::handle reduction, py::handle pos_weight) {
        const char* op = "binary_cross_entropy_with_logits";
        Tensor x = tensor_arg(input, op, "input"), t = tensor_arg(target, op, "target");
        Tensor w = opt_tensor(weight, op, "weight"), pw = opt_tensor(pos_weight, op, "pos_weight");
        const Reduction red = reduction_arg(reduction, op);
        py::gil_scoped_release r;
        return binary_cross_entropy_with_logits(x, t, w, pw, red);
      },
      arg("input"), arg("target"), arg("weight") = none, arg("reduction") = "mean", arg("pos_weight") = none);
  m.def(
      "nll_loss",
      [](py::handle input, py::handle target, py::handle weight, int64_t ignore_index, py::handle reduction) {
        Tensor x = tensor_arg(input, "nll_loss", "input"), t = tensor_arg(target, "nll_loss", "target");
        Tensor w = opt_tensor(weight, "nll_loss", "weight");
        const Reduction red = reduction_arg(reduction, "nll_loss");
        py::gil_scoped_release r;
        return nll_loss(x, t, w, red, ignore_index);
      },
      arg("input"), arg("target"), arg("weight") = none, arg("ignore_index") = -100, arg("reduction") = "mean");
  m.def(
      "cross_entropy",
      [](py::handle input, py::handle target, py::handle weight, int64_t ignore_index, py::handle reduction,
         double label_smoothing) {
        Tensor x = tensor_arg(input, "cross_entropy", "input"), t = tensor_arg(target, "cross_entropy", "target");
        if (is_floating(t.dtype()))
          raise_not_implemented(
              "cross_entropy(): class-probability (floating) targets are not supported by Strata; "
              "pass class indices (int64)");
        Tensor w = opt_tensor(weight, "cross_entropy", "weight");
        const Reduction red = reduction_arg(reduction, "cross_entropy");
        if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0))
          throw BindingValueError(
              msg("cross_entropy(): label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing));
        py::gil_scoped_release r;
        return cross_entropy(x, t, w, red, ignore_index, label_smoothing);
      },
      arg("input"), arg("target"), arg("weight") = none, arg("ignore_index") = -100, arg("reduction") = "mean",
      arg("label_smoothing") = 0.0);
}

void def_embedding_functions(py::module_& m) {
  using py::arg;
  const auto none = py::none();
  m.def(
      "_embedding_bag",
      [](py::handle weight, py::handle indices, py::handle offsets, py::handle mode, py::handle per_sample_weights,
         bool include_last_offset) {
        Tensor w = tensor_arg(weight, "embedding_bag", "weight"), i = tensor_arg(indices, "embedding_bag", "input");
        Tensor o = tensor_arg(offsets, "embedding_bag", "offsets");
        Tensor psw = opt_tensor(per_sample_weights, "embedding_bag", "per_sample_weights");
        const std::string md = py::str(mode).cast<std::string>();
        EmbeddingBagMode em;
        if (md == "sum")
          em = EmbeddingBagMode::Sum;
        else if (md == "mean")
          em = EmbeddingBagMode::Mean;
        else if (md == "max")
          raise_not_implemented("embedding_bag(): mode='max' is not supported by Strata");
        else
          throw BindingValueError(
              msg("embedding_bag(): mode has to be one of sum, mean or max, got ", quote_field(md)));
        py::gil_scoped_release r;
        return embedding_bag(w, i, o, em, psw, include_last_offset);
      },
      arg("weight"), arg("indices"), arg("offsets"), arg("mode") = "mean", arg("per_sample_weights") = none,
      arg("include_last_offset") = false, "1-D indices with offsets (see strata.nn.functional.embedding_bag).");
  m.def(
      "dot_interaction",
      [](py::handle features, bool self_interaction) {
        const std::vector<Tensor> fs = tensor_list(features, "dot_interaction", "features");
        py::gil_scoped_release r;
        return dot_interaction(fs, self_interaction);
      },
      arg("features"), arg("self_interaction") = false, "The DLRM dot interaction of [B, d] features.");
}

void def_transformer_ops(py::module_& m) {
  using py::arg;
  const auto none = py::none();
  m.def(
      "silu",
      [](py::handle input) {
        Tensor x = tensor_arg(input, "silu", "input");
        py::gil_scoped_release r;
        return silu(x);
      },
      arg("input"), "x * sigmoid(x) element-wise.");
  m.def(
      "l1_loss",
      [](py::handle input, py::handle target, py::handle reduction) {
        Tensor x = tensor_arg(input, "l1_loss", "input"), t = tensor_arg(target, "l1_loss", "target");
        const Reduction red = reduction_arg(reduction, "l1_loss");
        py::gil_scoped_release r;
        return l1_loss(x, t, red);
      },
      arg("input"), arg("target"), arg("reduction") = "mean");
  m.def(
      "embedding",
      [](py::handle weight, py::handle indices, py::handle padding_idx) {
        Tensor w = tensor_arg(weight, "embedding", "weight"), i = tensor_arg(indices, "embedding", "input");
        std::optional<int64_t> pad;
        if (!padding_idx.is_none()) pad = int_from_py(padding_idx, "embedding", "padding_idx");
        py::gil_scoped_release r;
        return embedding(w, i, pad);
      },
      arg("weight"), arg("indices"), arg("padding_idx") = none, "Rows of weight picked by indices.");
  m.def(
      "_embedding_renorm_",
      [](py::handle weight, py::handle indices, double max_norm, double norm_type) {
        Tensor w = tensor_arg(weight, "embedding", "weight"), i = tensor_arg(indices, "embedding", "input");
        py::gil_scoped_release r;
        embedding_renorm_(w, i, max_norm, norm_type);
      },
      arg("weight"), arg("indices"), arg("max_norm"), arg("norm_type") = 2.0,
      "Renormalizes the rows of weight named in indices to norm max_norm in place (not recorded).");
  m.def(
      "scaled_dot_product_attention",
      [](py::handle query, py::handle key, py::handle value, py::handle attn_mask, py::handle dropout_p, bool is_causal,
         py::handle scale) {
        const char* op = "scaled_dot_product_attention";
        Tensor q = tensor_arg(query, op, "query"), k = tensor_arg(key, op, "key"), v = tensor_arg(value, op, "value");
        Tensor mask = opt_tensor(attn_mask, op, "attn_mask");
        const double p = number_arg(dropout_p, op, "dropout_p");
        std::optional<double> sc;
        if (!scale.is_none()) sc = number_arg(scale, op, "scale");
        py::gil_scoped_release r;
        return scaled_dot_product_attention(q, k, v, mask, p, is_causal, sc);
      },
      arg("query"), arg("key"), arg("value"), arg("attn_mask") = none, arg("dropout_p") = 0.0, arg("is_causal") = false,
      py::kw_only(), arg("scale") = none, "Fused softmax(q kᵀ scale + mask) v (see ops/attention.h).");
}

}  // namespace

void def_nn_functions(py::module_& m) {
  def_conv(m);
  def_pooling(m);
  def_normalization(m);
  def_losses(m);
  def_embedding_functions(m);
  def_transformer_ops(m);
}

}  // namespace strata::python
