// strata._C's bindings of issue 26 part 7's functional ops: conv1d, conv_transpose2d, group_norm,
// pad, interpolate, normalize (torch.nn.functional's names; python/strata/nn/functional.py wraps
// them). Semantics live in ops/conv.h, ops/normalization.h and ops/resample.h; this file only
// parses arguments and raises the Python error types PyTorch raises for wrong arguments
// (ValueError, NotImplementedError, IndexError) before the op's own checks.

#include <pybind11/stl.h>

#include <cmath>
#include <string>

#include "bindings.h"
#include "ops/conv.h"
#include "ops/normalization.h"
#include "ops/resample.h"

namespace strata::python {
namespace {

using py::arg;

Tensor conv1d_py(py::handle input, py::handle weight, py::handle bias, py::handle stride, py::handle padding,
                 py::handle dilation, py::handle groups) {
  const char* op = "conv1d";
  const Tensor x = tensor_arg(input, op, "input"), w = tensor_arg(weight, op, "weight");
  const Tensor b = opt_tensor(bias, op, "bias");
  const Dims s = int_tuple_arg(stride, 1, op, "stride"), d = int_tuple_arg(dilation, 1, op, "dilation");
  const int64_t g = int_from_py(groups, op, "groups");
  if (py::isinstance<py::str>(padding)) {
    const std::string mode = padding.cast<std::string>();
    py::gil_scoped_release release;
    return conv1d(x, w, b, s, mode, d, g);
  }
  const Dims p = int_tuple_arg(padding, 1, op, "padding");
  py::gil_scoped_release release;
  return conv1d(x, w, b, s, p, d, g);
}

Tensor conv_transpose2d_py(py::handle input, py::handle weight, py::handle bias, py::handle stride, py::handle padding,
                           py::handle output_padding, py::handle groups, py::handle dilation) {
  const char* op = "conv_transpose2d";
  const Tensor x = tensor_arg(input, op, "input"), w = tensor_arg(weight, op, "weight");
  const Tensor b = opt_tensor(bias, op, "bias");
  if (py::isinstance<py::str>(padding))
    throw BindingTypeError("conv_transpose2d(): argument 'padding' must be an int or a tuple of ints, not str");
  const Dims s = int_tuple_arg(stride, 2, op, "stride"), p = int_tuple_arg(padding, 2, op, "padding");
  const Dims o = int_tuple_arg(output_padding, 2, op, "output_padding"), d = int_tuple_arg(dilation, 2, op, "dilation");
  const int64_t g = int_from_py(groups, op, "groups");
  py::gil_scoped_release release;
  return conv_transpose2d(x, w, b, s, p, o, g, d);
}

Tensor pad_py(py::handle input, py::handle pad_arg, const std::string& mode, py::handle value) {
  const char* op = "pad";
  const Tensor x = tensor_arg(input, op, "input");
  const Dims p = int_list_from_sequence(pad_arg, op, "pad");
  if (mode != "constant" && mode != "reflect" && mode != "replicate" && mode != "circular")
    raise_not_implemented(msg("pad(): unrecognised padding mode ", mode));
  if (mode != "constant") {  // PyTorch's supported (rank, pad length) pairs, NotImplementedError otherwise
    const auto pairs = static_cast<int64_t>(p.size() / 2);
    if (p.size() % 2 == 0 && !(pairs >= 1 && pairs <= 3 && (x.dim() == pairs + 1 || x.dim() == pairs + 2)))
      raise_not_implemented(msg("pad(): padding size ", p.size(), " is not supported for ", x.dim(),
                                "-D input in mode '", mode, "' (2-D or 3-D input: 2; 3-D or 4-D: 4; 4-D or 5-D: 6)"));
  }
  const double v = value.is_none() ? 0.0 : value.cast<double>();
  py::gil_scoped_release release;
  return pad(x, p, mode, v);
}

/// interpolate's argument errors that PyTorch raises as ValueError or NotImplementedError.
void check_interpolate_args(const Tensor& x, const std::string& mode, bool has_size, bool has_scale, std::size_t given,
                            bool align_corners_set) {
  const bool linear = mode == "linear" || mode == "bilinear";
  if (linear && mode == "linear" && x.dim() != 3)
    raise_not_implemented(msg("interpolate(): got ", x.dim(), "-D input, but linear mode needs 3-D input"));
  if (mode == "bilinear" && x.dim() != 4)
    raise_not_implemented(msg("interpolate(): got ", x.dim(), "-D input, but bilinear mode needs 4-D input"));
  if (x.dim() < 3 || x.dim() > 5)
    raise_not_implemented(msg("interpolate(): only 3-D, 4-D and 5-D input tensors are supported, got ", x.dim(), "-D"));
  if (!linear && mode != "nearest" && mode != "nearest-exact")
    raise_not_implemented(msg("interpolate(): mode '", mode,
                              "' is not supported by Strata ('nearest', "
                              "'nearest-exact', 'linear', 'bilinear')"));
  if (align_corners_set && !linear)
    throw BindingValueError("align_corners option can only be set with the interpolating modes: linear | bilinear");
  if (has_size == has_scale)
    throw BindingValueError(has_size ? "only one of size or scale_factor should be defined"
                                     : "either size or scale_factor should be defined");
  const auto spatial = static_cast<std::size_t>(x.dim() - 2);
  if (given != 1 && given != spatial)
    throw BindingValueError(msg("Input and output must have the same number of spatial dimensions, but got input with ",
                                spatial, " spatial dimensions and ", given,
                                has_size ? " output sizes" : " scale factors"));
}

Tensor interpolate_py(py::handle input, py::handle size, py::handle scale_factor, const std::string& mode,
                      std::optional<bool> align_corners, std::optional<bool> recompute_scale_factor, bool antialias) {
  const char* op = "interpolate";
  const Tensor x = tensor_arg(input, op, "input");
  if (antialias) raise_not_implemented("interpolate(): antialias=True is not supported by Strata");
  const Dims sizes = size.is_none() ? Dims{} : int_list_from_sequence(size, op, "size");
  std::vector<double> factors;
  if (!scale_factor.is_none()) {
    if (PySequence_Check(scale_factor.ptr()))
      for (py::handle f : scale_factor) factors.push_back(f.cast<double>());
    else
      factors.push_back(scale_factor.cast<double>());
  }
  check_interpolate_args(x, mode, !size.is_none(), !scale_factor.is_none(),
                         size.is_none() ? factors.size() : sizes.size(), align_corners.has_value());
  py::gil_scoped_release release;
  return interpolate(x, sizes, factors, mode, align_corners, recompute_scale_factor.value_or(false));
}

}  // namespace

void init_nn_extra(py::module_& m) {
  const py::object none = py::none();
  m.def("conv1d", &conv1d_py, arg("input"), arg("weight"), arg("bias") = none, arg("stride") = 1, arg("padding") = 0,
        arg("dilation") = 1, arg("groups") = 1, "1-D convolution over (N, C, L) input (torch.nn.functional.conv1d).");
  m.def("conv_transpose2d", &conv_transpose2d_py, arg("input"), arg("weight"), arg("bias") = none, arg("stride") = 1,
        arg("padding") = 0, arg("output_padding") = 0, arg("groups") = 1, arg("dilation") = 1,
        "2-D transposed convolution (torch.nn.functional.conv_transpose2d).");
  m.def(
      "group_norm",
      [](py::handle input, py::handle num_groups, py::handle weight, py::handle bias, double eps) {
        const char* op = "group_norm";
        const Tensor x = tensor_arg(input, op, "input");
        const int64_t g = int_from_py(num_groups, op, "num_groups");
        const Tensor w = opt_tensor(weight, op, "weight"), b = opt_tensor(bias, op, "bias");
        py::gil_scoped_release release;
        return group_norm(x, g, w, b, eps);
      },
      arg("input"), arg("num_groups"), arg("weight") = none, arg("bias") = none, arg("eps") = 1e-5,
      "Group normalization (torch.nn.functional.group_norm).");
  m.def("pad", &pad_py, arg("input"), arg("pad"), arg("mode") = "constant", arg("value") = none,
        "Pads the last dims, pad given last dim first (torch.nn.functional.pad).");
  m.def("interpolate", &interpolate_py, arg("input"), arg("size") = none, arg("scale_factor") = none,
        arg("mode") = "nearest", arg("align_corners") = none, arg("recompute_scale_factor") = none,
        arg("antialias") = false, "Resizes the spatial dims (torch.nn.functional.interpolate).");
  m.def(
      "normalize",
      [](py::handle input, double p, py::handle dim, double eps, py::handle out) {
        const char* op = "normalize";
        if (!out.is_none()) raise_not_implemented("normalize(): out= is not supported by Strata");
        const Tensor x = tensor_arg(input, op, "input");
        const int64_t d = wrap_dim_py(int_from_py(dim, op, "dim"), x.dim(), op, true);
        py::gil_scoped_release release;
        return normalize(x, p, d, eps);
      },
      arg("input"), arg("p") = 2.0, arg("dim") = 1, arg("eps") = 1e-12, arg("out") = none,
      "x / max(||x||_p, eps) along dim (torch.nn.functional.normalize).");
}

}  // namespace strata::python
