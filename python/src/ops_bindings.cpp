// The ops of ops/op_list.h under PyTorch's names: strata.<op>(...) functions (strata._C), the
// Tensor methods and operators, and the in-place methods (add_, mul_, clamp_, ...).
//
// The in-place methods bind ops/inplace.h (Note [In-place ops]): the refusals, the version bump
// and the rebased histories, of views too (Note [CopySlices] in autograd/view.h), are C++'s; the
// methods here only pick the out-of-place op and convert the Python arguments.

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/view.h"
#include "bindings.h"
#include "core/factories.h"
#include "core/type_promotion.h"
#include "ops/binary.h"
#include "ops/index_reduction.h"
#include "ops/inplace.h"
#include "ops/linalg.h"
#include "ops/reduction.h"
#include "ops/shape_ops.h"
#include "ops/softmax_loss.h"
#include "ops/unary.h"
#include "ops_support.h"

namespace strata::python {

[[noreturn]] void raise_not_implemented(const std::string& what) {
  PyErr_SetString(PyExc_NotImplementedError, what.c_str());
  throw py::error_already_set();
}

Tensor tensor_arg(py::handle obj, const char* op, const char* name) {
  if (!py::isinstance<Tensor>(obj))
    throw BindingTypeError(msg(op, "(): argument '", name, "' must be Tensor, not ", Py_TYPE(obj.ptr())->tp_name));
  return obj.cast<Tensor>();
}

bool records_grad(const Tensor& t) { return autograd::GradMode::is_enabled() && t.requires_grad(); }

namespace {

// Sums `g` over the dims that broadcasting added or stretched, back to `target` sizes.
Tensor sum_to(const Tensor& g, const Dims& target) {
  if (g.sizes() == target) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(target.size());
  Dims dims;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(i);
  for (std::size_t i = 0; i < target.size(); ++i)
    if (target[i] == 1 && g.size(lead + static_cast<int64_t>(i)) != 1) dims.push_back(lead + static_cast<int64_t>(i));
  Tensor r = dims.empty() ? g : sum(g, dims, /*keepdim=*/true);
  return reshape(r, target);
}

}  // namespace

Tensor expand_diff(const Tensor& t, IntArrayRef sizes) {
  Tensor out = t.expand(sizes);
  if (!records_grad(t)) return out;
  const Dims in_sizes = t.sizes();
  auto node = autograd::make_node("ExpandBackward", {&t},
                                  [in_sizes](autograd::Node&, const autograd::TensorList& g) -> autograd::TensorList {
                                    return {sum_to(g[0], in_sizes)};
                                  });
  autograd::set_history({&out}, node);
  return out;
}

Tensor view_diff(const Tensor& t, IntArrayRef sizes) {
  Tensor raw = t.view(sizes);  // validates like Tensor.view
  if (!records_grad(t)) {
    autograd::mark_view(raw, t);  // Note [View tracking]: a write into it may still record
    return raw;
  }
  return reshape(t, raw.sizes());
}

Tensor clone_diff(const Tensor& t, bool contiguous_only) {
  if (contiguous_only && t.is_contiguous()) return t;
  Tensor out = contiguous_only ? t.contiguous() : t.clone();
  if (!records_grad(t)) return out;
  auto node = autograd::make_node(
      "CloneBackward", {&t},
      [](autograd::Node&, const autograd::TensorList& g) -> autograd::TensorList { return {g[0]}; });
  autograd::set_history({&out}, node);
  return out;
}

Tensor to_diff(const Tensor& t, DType dtype, bool copy) {
  Tensor out = t.to(dtype, copy);
  // Like PyTorch, a conversion to a non-floating dtype gives a tensor outside the graph.
  if (!records_grad(t) || (out.dtype() == t.dtype() && !copy) || !is_floating(dtype)) return out;
  const DType from = t.dtype();
  auto node = autograd::make_node(
      "ToCopyBackward", {&t},
      [from](autograd::Node&, const autograd::TensorList& g) -> autograd::TensorList { return {g[0].to(from)}; });
  autograd::set_history({&out}, node);
  return out;
}

// ---- binary ops with numbers (declared in ops_support.h) ----------------------------------------------

const char* bin_name(Bin b) {
  switch (b) {
    case Bin::Add: return "add";
    case Bin::Sub: return "sub";
    case Bin::Mul: return "mul";
    case Bin::Div: return "div";
    case Bin::Pow: return "pow";
    case Bin::Maximum: return "maximum";
    case Bin::FloorDiv: return "floor_divide";
    case Bin::Mod: return "remainder";
  }
  return "?";
}

// Type promotion (a zero-dim tensor next to one with dims, numbers) is the C++ ops' (Note [Type
// promotion] in core/type_promotion.h); Python numbers arrive as Scalars of their kind.
// The op on two tensors / a tensor and a number (callers release the GIL).
Tensor apply_bin(Bin op, const Tensor& a, const Tensor& b, Scalar alpha) {
  switch (op) {
    case Bin::Add: return add(a, b, alpha);
    case Bin::Sub: return sub(a, b, alpha);
    case Bin::Mul: return mul(a, b);
    case Bin::Div: return div(a, b);
    case Bin::Pow: return pow(a, b);
    case Bin::Maximum: return maximum(a, b);
    case Bin::FloorDiv: return floor_divide(a, b);
    case Bin::Mod: return remainder(a, b);
  }
  return Tensor();
}

Tensor apply_bin(Bin op, const Tensor& a, Scalar s) {
  switch (op) {
    case Bin::Add: return add(a, s);
    case Bin::Sub: return sub(a, s);
    case Bin::Mul: return mul(a, s);
    case Bin::Div: return div(a, s);
    case Bin::Pow: return pow(a, s);
    case Bin::Maximum: return maximum(a, scalar_tensor(s, result_type(a, s)));
    case Bin::FloorDiv: return floor_divide(a, s);
    case Bin::Mod: return remainder(a, s);
  }
  return Tensor();
}

Tensor bin_tt(Bin op, const Tensor& a, const Tensor& b, Scalar alpha) {
  py::gil_scoped_release release;
  return apply_bin(op, a, b, alpha);
}

// tensor (op) number
Tensor bin_ts(Bin op, const Tensor& a, Scalar s) {
  py::gil_scoped_release release;
  return apply_bin(op, a, s);
}

// number (op) tensor
Tensor bin_st(Bin op, Scalar s, const Tensor& b) {
  py::gil_scoped_release release;
  switch (op) {
    case Bin::Add: return add(b, s);
    case Bin::Sub: return sub(s, b);
    case Bin::Mul: return mul(b, s);
    case Bin::Div: return div(s, b);
    case Bin::Pow: return pow(s, b);
    case Bin::Maximum: return maximum(scalar_tensor(s, result_type(s, b)), b);
    case Bin::FloorDiv: return floor_divide(s, b);
    case Bin::Mod: return remainder(s, b);
  }
  return Tensor();
}

// The functional form: input and other are tensors or numbers (at least one tensor).
Tensor binary(Bin op, py::handle a, py::handle b, Scalar alpha) {
  const char* name = bin_name(op);
  const bool at = py::isinstance<Tensor>(a), bt = py::isinstance<Tensor>(b);
  const bool unit_alpha = !alpha.is_floating() && alpha.to_double() == 1.0;
  if (at && bt) return bin_tt(op, a.cast<Tensor>(), b.cast<Tensor>(), alpha);
  if (at && is_number(b)) {
    const Scalar s = scalar_arg(b, name, "other");
    if (unit_alpha) return bin_ts(op, a.cast<Tensor>(), s);
    return bin_tt(op, a.cast<Tensor>(), scalar_tensor(s, result_type(a.cast<Tensor>(), s)), alpha);
  }
  if (bt && is_number(a)) {
    const Tensor t = b.cast<Tensor>();
    if (!unit_alpha) {  // s + alpha * t  /  s - alpha * t
      Tensor scaled = bin_ts(Bin::Mul, t, alpha);
      return bin_st(op, scalar_arg(a, name, "input"), scaled);
    }
    return bin_st(op, scalar_arg(a, name, "input"), t);
  }
  if (!at && !bt && is_number(a) && is_number(b))
    throw BindingTypeError(msg(name, "(): at least one of 'input' and 'other' must be a Tensor, got two numbers"));
  py::handle bad = (at || is_number(a)) ? b : a;
  throw BindingTypeError(msg(name, "(): argument '", (bad.is(a) ? "input" : "other"),
                             "' must be Tensor or a number, not ", type_name(bad)));
}

// div's rounding_mode: None (true division) or "floor" (floor_divide); "trunc" is not supported.
Bin div_kind(py::handle rounding_mode) {
  if (rounding_mode.is_none()) return Bin::Div;
  if (!py::isinstance<py::str>(rounding_mode))
    throw BindingTypeError(msg("div(): argument 'rounding_mode' must be str or None, not ", type_name(rounding_mode)));
  const std::string mode = rounding_mode.cast<std::string>();
  if (mode == "floor") return Bin::FloorDiv;
  if (mode == "trunc") raise_not_implemented("div(): rounding_mode='trunc' is not supported by Strata (use 'floor')");
  throw BindingValueError(
      msg("div expected rounding_mode to be one of None, 'trunc', or 'floor' but found ", quote_field(mode)));
}

// The operator form: returns NotImplemented for operands it does not know (so Python tries the
// other side), `reflected` swaps the operands (__radd__ & co).
py::object operator_impl(Bin op, py::handle self, py::handle other, bool reflected) {
  if (!py::isinstance<Tensor>(other) && !is_number(other)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  if (reflected) return py::cast(binary(op, other, self));
  return py::cast(binary(op, self, other));
}

// ---- in-place -----------------------------------------------------------------------------------------

namespace {
// Note [In-place ops] in ops/inplace.h; `compute` runs without the GIL.
py::object inplace(py::object self_obj, const char* op, bool saves_self, bool other_requires_grad,
                   const std::function<Tensor(const Tensor&)>& compute) {
  Tensor& self = self_obj.cast<Tensor&>();
  {
    py::gil_scoped_release release;
    apply_in_place(self, {op, compute, saves_self, other_requires_grad, {}});
  }
  return self_obj;
}
}  // namespace

py::object inplace_binary(py::object self, Bin bop, const char* op, py::handle other, Scalar alpha) {
  const bool saves = bop == Bin::Mul || bop == Bin::Div || bop == Bin::Pow;
  if (py::isinstance<Tensor>(other)) {
    const Tensor b = other.cast<Tensor>();
    return inplace(self, op, saves, b.requires_grad(),
                   [bop, b, alpha](const Tensor& a) { return apply_bin(bop, a, b, alpha); });
  }
  const Scalar s = scalar_arg(other, op, "other");
  const bool unit_alpha = !alpha.is_floating() && alpha.to_double() == 1.0;
  return inplace(self, op, saves, false, [bop, s, alpha, unit_alpha](const Tensor& a) {
    return unit_alpha ? apply_bin(bop, a, s) : apply_bin(bop, a, scalar_tensor(s, result_type(a, s)), alpha);
  });
}

// ---- reductions ---------------------------------------------------------------------------------------

Tensor sum_impl(const Tensor& input, py::handle dim, bool keepdim, py::handle dtype, bool mean_op) {
  const char* op = mean_op ? "mean" : "sum";
  // dtype=: the input is converted first and the result has that dtype (PyTorch's meaning),
  // recorded when it requires grad.
  const std::optional<DType> dt = optional_dtype(dtype, op);
  const Tensor t = dt ? to_diff(input, *dt, false) : input;
  const auto dims = dims_arg(dim, op);
  if (dims)
    for (int64_t d : *dims) wrap_dim_py(d, t.dim(), op, true);
  py::gil_scoped_release release;
  Tensor r;
  if (!dims || dims->empty()) {
    Dims all;
    for (int64_t d = 0; d < t.dim(); ++d) all.push_back(d);
    r = !keepdim ? (mean_op ? mean(t) : sum(t)) : (mean_op ? mean(t, all, true) : sum(t, all, true));
  } else {
    r = mean_op ? mean(t, *dims, keepdim) : sum(t, *dims, keepdim);
  }
  return dt ? to_diff(r, *dt, false) : r;
}

Tensor amax_impl(const Tensor& t, py::handle dim, bool keepdim) {
  Dims dims = dim.is_none() ? Dims{} : int_list_from_sequence(dim, "amax", "dim");
  for (int64_t d : dims) wrap_dim_py(d, t.dim(), "amax", true);
  if (dims.empty())  // torch.amax(x, dim=()) reduces every dim
    for (int64_t d = 0; d < t.dim(); ++d) dims.push_back(d);
  py::gil_scoped_release release;
  if (dims.empty()) return keepdim ? reshape(max(t), t.sizes()) : max(t);  // a 0-dim input
  return amax(t, dims, keepdim);
}

py::object max_impl(const Tensor& t, py::handle dim, py::handle keepdim) {
  if (!dim.is_none() && py::isinstance<Tensor>(dim)) {
    Tensor other = dim.cast<Tensor>();
    return py::cast(bin_tt(Bin::Maximum, t, other, 1));
  }
  if (!dim.is_none()) return extreme_dim_py(t, dim, keepdim, /*is_max=*/true);
  if (!keepdim.is_none()) throw BindingTypeError("max(): keepdim needs a dim (max(input, dim, keepdim))");
  py::gil_scoped_release release;
  return py::cast(max(t));
}

// ---- shapes -------------------------------------------------------------------------------------------

std::vector<Tensor> tensor_list(py::handle seq, const char* op, const char* name) {
  if (py::isinstance<Tensor>(seq) || !PySequence_Check(seq.ptr()) || py::isinstance<py::str>(seq))
    throw BindingTypeError(
        msg(op, "(): argument '", name, "' must be a tuple or list of Tensors, not ", type_name(seq)));
  std::vector<Tensor> out;
  std::size_t i = 0;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(seq)) {
    if (!py::isinstance<Tensor>(item))
      throw BindingTypeError(msg(op, "(): expected a sequence of Tensors, but element ", i, " is ", type_name(item)));
    out.push_back(item.cast<Tensor>());
    ++i;
  }
  return out;
}

py::tuple tensors_tuple(const std::vector<Tensor>& ts) {
  py::tuple out(ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) out[i] = py::cast(ts[i]);
  return out;
}

py::tuple split_impl(const Tensor& t, py::handle split_size, int64_t dim) {
  wrap_dim_py(dim, t.dim(), "split");
  std::vector<Tensor> parts;
  if (!PyBool_Check(split_size.ptr()) && PyIndex_Check(split_size.ptr())) {
    const int64_t n = int_from_py(split_size, "split", "split_size");
    if (n <= 0) throw BindingValueError(msg("split(): split_size must be positive, got ", n));
    py::gil_scoped_release release;
    parts = split(t, n, dim);
  } else {
    const Dims sizes = int_list_from_sequence(split_size, "split", "split_size_or_sections");
    py::gil_scoped_release release;
    parts = split(t, sizes, dim);
  }
  return tensors_tuple(parts);
}

Tensor index_arg(py::handle h, const char* op) {
  Tensor idx = tensor_arg(h, op, "index");
  if (idx.dtype() != DType::i64 && idx.dtype() != DType::i32)
    throw BindingTypeError(msg(op, "(): index must be an int64 or int32 tensor, got ", dtype_py_name(idx.dtype())));
  return idx;
}

// ---- module functions -----------------------------------------------------------------------------

Activation no_act() { return Activation::None; }

bool gelu_tanh(py::handle approximate) {
  if (!py::isinstance<py::str>(approximate))
    throw BindingTypeError(msg("gelu(): argument 'approximate' must be str, not ", type_name(approximate)));
  const std::string a = approximate.cast<std::string>();
  if (a == "none") return false;
  if (a == "tanh") return true;
  throw BindingValueError(msg("gelu(): approximate must be 'none' or 'tanh', got ", quote_field(a)));
}

std::optional<double> opt_number(py::handle h, const char* op, const char* name) {
  if (h.is_none()) return std::nullopt;
  if (py::isinstance<Tensor>(h)) {
    const Tensor& t = h.cast<const Tensor&>();
    if (t.numel() != 1)
      raise_not_implemented(
          msg(op, "(): a tensor '", name, "' bound is not supported (only numbers), got ", t.describe()));
    return t.item<double>();
  }
  return number_arg(h, op, name);
}

Tensor clamp_impl(const Tensor& t, py::handle min, py::handle max) {
  const auto lo = opt_number(min, "clamp", "min");
  const auto hi = opt_number(max, "clamp", "max");
  if (!lo && !hi) throw BindingValueError("clamp(): at least one of 'min' or 'max' must not be None");
  py::gil_scoped_release release;
  return clamp(t, lo, hi);
}

namespace {

void def_linalg(py::module_& m) {
  using py::arg;
  const auto none = py::none();
  m.def(
      "matmul",
      [](py::handle a, py::handle b) {
        Tensor x = tensor_arg(a, "matmul", "input"), y = tensor_arg(b, "matmul", "other");
        py::gil_scoped_release r;
        return matmul(x, y);
      },
      arg("input"), arg("other"), "Matrix product with broadcasting (torch.matmul).");
  m.def(
      "linear",
      [](py::handle input, py::handle weight, py::handle bias) {
        Tensor x = tensor_arg(input, "linear", "input"), w = tensor_arg(weight, "linear", "weight");
        Tensor b = opt_tensor(bias, "linear", "bias");
        py::gil_scoped_release r;
        return linear(x, w, b, no_act());
      },
      arg("input"), arg("weight"), arg("bias") = none, "input @ weight.T + bias (torch.nn.functional.linear).");
  m.def(
      "bmm",
      [](py::handle a, py::handle b) {
        Tensor x = tensor_arg(a, "bmm", "input"), y = tensor_arg(b, "bmm", "mat2");
        py::gil_scoped_release r;
        return bmm(x, y);
      },
      arg("input"), arg("mat2"), "Batched matrix product of 3-D tensors (torch.bmm).");
}

void def_unary(py::module_& m) {
  using py::arg;
  const auto none = py::none();
#define STRATA_DEF_UNARY(NAME, DOC)                   \
  m.def(                                              \
      #NAME,                                          \
      [](py::handle input) {                          \
        Tensor x = tensor_arg(input, #NAME, "input"); \
        py::gil_scoped_release r;                     \
        return NAME(x);                               \
      },                                              \
      arg("input"), DOC);
  STRATA_DEF_UNARY(relu, "max(x, 0) element-wise (NaN stays NaN, as in PyTorch).")
  STRATA_DEF_UNARY(sigmoid, "1 / (1 + exp(-x)) element-wise.")
  STRATA_DEF_UNARY(tanh, "tanh(x) element-wise.")
  STRATA_DEF_UNARY(exp, "exp(x) element-wise.")
  STRATA_DEF_UNARY(log, "Natural logarithm element-wise.")
  STRATA_DEF_UNARY(sqrt, "Square root element-wise.")
#undef STRATA_DEF_UNARY
  m.def(
      "leaky_relu",
      [](py::handle input, py::handle negative_slope) {
        Tensor x = tensor_arg(input, "leaky_relu", "input");
        const double s = number_arg(negative_slope, "leaky_relu", "negative_slope");
        py::gil_scoped_release r;
        return leaky_relu(x, s);
      },
      arg("input"), arg("negative_slope") = 0.01, "x if x > 0 else negative_slope * x.");
  m.def(
      "gelu",
      [](py::handle input, py::handle approximate) {
        Tensor x = tensor_arg(input, "gelu", "input");
        const bool t = gelu_tanh(approximate);
        py::gil_scoped_release r;
        return gelu(x, t);
      },
      arg("input"), py::kw_only(), arg("approximate") = "none", "GELU, exact ('none') or the tanh approximation.");
  m.def(
      "pow", [](py::handle input, py::handle exponent) { return binary(Bin::Pow, input, exponent); }, arg("input"),
      arg("exponent"), "input ** exponent (tensor or number on either side).");
  m.def(
      "clamp",
      [](py::handle input, py::handle min, py::handle max) {
        return clamp_impl(tensor_arg(input, "clamp", "input"), min, max);
      },
      arg("input"), arg("min") = none, arg("max") = none, "Clamps into [min, max] (either bound may be None).");
  m.def(
      "dropout",
      [](py::handle input, py::handle p, bool train) {
        Tensor x = tensor_arg(input, "dropout", "input");
        const double prob = number_arg(p, "dropout", "p");
        if (!(prob >= 0.0 && prob <= 1.0))
          throw BindingValueError(msg("dropout probability has to be between 0 and 1, but got ", prob));
        py::gil_scoped_release r;
        return dropout(x, prob, train);
      },
      arg("input"), arg("p") = 0.5, arg("train") = true, "Dropout (torch.dropout(input, p, train)).");
}

void def_binary(py::module_& m) {
  using py::arg;
  const auto none = py::none();
  m.def(
      "add",
      [](py::handle input, py::handle other, py::handle alpha) {
        return binary(Bin::Add, input, other, scalar_arg(alpha, "add", "alpha"));
      },
      arg("input"), arg("other"), py::kw_only(), arg("alpha") = 1, "input + alpha * other.");
  m.def(
      "sub",
      [](py::handle input, py::handle other, py::handle alpha) {
        return binary(Bin::Sub, input, other, scalar_arg(alpha, "sub", "alpha"));
      },
      arg("input"), arg("other"), py::kw_only(), arg("alpha") = 1, "input - alpha * other.");
  m.def(
      "mul", [](py::handle input, py::handle other) { return binary(Bin::Mul, input, other); }, arg("input"),
      arg("other"), "input * other.");
  m.def(
      "div",
      [](py::handle input, py::handle other, py::handle rounding_mode) {
        return binary(div_kind(rounding_mode), input, other);
      },
      arg("input"), arg("other"), py::kw_only(), arg("rounding_mode") = none, "input / other (true division).");
  m.def(
      "floor_divide", [](py::handle input, py::handle other) { return binary(Bin::FloorDiv, input, other); },
      arg("input"), arg("other"), "floor(input / other), Python's // (integer inputs stay integer).");
  m.def(
      "remainder", [](py::handle input, py::handle other) { return binary(Bin::Mod, input, other); }, arg("input"),
      arg("other"), "Python's %: the remainder with the sign of the divisor.");
  m.def(
      "maximum",
      [](py::handle input, py::handle other) {
        return bin_tt(Bin::Maximum, tensor_arg(input, "maximum", "input"), tensor_arg(other, "maximum", "other"), 1);
      },
      arg("input"), arg("other"), "Element-wise maximum (NaN propagates).");
  m.def(
      "where",
      [](py::handle condition, py::handle input, py::handle other) {
        Tensor c = tensor_arg(condition, "where", "condition");
        if (c.dtype() != DType::boolean && c.dtype() != DType::u8)
          throw BindingTypeError(
              msg("where(): expected condition to be a bool tensor, got ", dtype_py_name(c.dtype())));
        const TensorOrScalar a = tensor_or_scalar(input, "where", "input"),
                             b = tensor_or_scalar(other, "where", "other");
        py::gil_scoped_release r;
        return std::visit([&](const auto& x, const auto& y) { return where(c, x, y); }, a, b);
      },
      arg("condition"), arg("input"), arg("other"), "condition ? input : other element-wise, broadcasting.");
}

void def_reductions(py::module_& m) {
  using py::arg;
  const auto none = py::none();
  m.def(
      "sum",
      [](py::handle input, py::handle dim, bool keepdim, py::handle dtype) {
        return sum_impl(tensor_arg(input, "sum", "input"), dim, keepdim, dtype, false);
      },
      arg("input"), arg("dim") = none, arg("keepdim") = false, py::kw_only(), arg("dtype") = none,
      "Sum over dims (all when dim is None).");
  m.def(
      "mean",
      [](py::handle input, py::handle dim, bool keepdim, py::handle dtype) {
        return sum_impl(tensor_arg(input, "mean", "input"), dim, keepdim, dtype, true);
      },
      arg("input"), arg("dim") = none, arg("keepdim") = false, py::kw_only(), arg("dtype") = none,
      "Mean over dims (all when dim is None).");
  m.def(
      "amax",
      [](py::handle input, py::handle dim, bool keepdim) {
        return amax_impl(tensor_arg(input, "amax", "input"), dim, keepdim);
      },
      arg("input"), arg("dim") = py::tuple(), arg("keepdim") = false, "Maximum over dims (all when dim=()).");
  m.def(
      "max",
      [](py::handle input, py::handle dim, py::handle keepdim) {
        return max_impl(tensor_arg(input, "max", "input"), dim, keepdim);
      },
      arg("input"), arg("dim") = none, arg("keepdim") = none,
      "max(input): the maximum of all elements; max(input, other): element-wise maximum.");
}

void def_shape_functions(py::module_& m) {
  using py::arg;
  const auto none = py::none();
  m.def(
      "reshape",
      [](py::handle input, py::handle shape) {
        Tensor x = tensor_arg(input, "reshape", "input");
        const Dims s = int_list_from_sequence(shape, "reshape", "shape");
        py::gil_scoped_release r;
        return reshape(x, s);
      },
      arg("input"), arg("shape"));
  m.def(
      "flatten",
      [](py::handle input, int64_t start_dim, int64_t end_dim) {
        Tensor x = tensor_arg(input, "flatten", "input");
        wrap_dim_py(start_dim, x.dim(), "flatten", true);
        wrap_dim_py(end_dim, x.dim(), "flatten", true);
        py::gil_scoped_release r;
        return flatten(x, start_dim, end_dim);
      },
      arg("input"), arg("start_dim") = 0, arg("end_dim") = -1);
  m.def(
      "transpose",
      [](py::handle input, int64_t dim0, int64_t dim1) {
        Tensor x = tensor_arg(input, "transpose", "input");
        wrap_dim_py(dim0, x.dim(), "transpose", true);
        wrap_dim_py(dim1, x.dim(), "transpose", true);
        py::gil_scoped_release r;
        if (x.dim() == 0) return reshape(x, x.sizes());
        return transpose(x, dim0, dim1);
      },
      arg("input"), arg("dim0"), arg("dim1"));
  m.def(
      "permute",
      [](py::handle input, py::handle dims) {
        Tensor x = tensor_arg(input, "permute", "input");
        const Dims d = int_list_from_sequence(dims, "permute", "dims");
        if (static_cast<int64_t>(d.size()) == x.dim())
          for (int64_t v : d) wrap_dim_py(v, x.dim(), "permute");
        return permute(x, d);
      },
      arg("input"), arg("dims"));
  m.def(
      "cat",
      [](py::handle tensors, int64_t dim) {
        const std::vector<Tensor> ts = tensor_list(tensors, "cat", "tensors");
        if (ts.empty()) throw BindingValueError("cat(): expected a non-empty list of Tensors");
        py::gil_scoped_release r;
        return cat(ts, dim);
      },
      arg("tensors"), arg("dim") = 0, "Concatenates along dim.");
  m.def(
      "concat",
      [](py::handle tensors, int64_t dim) {
        const std::vector<Tensor> ts = tensor_list(tensors, "concat", "tensors");
        if (ts.empty()) throw BindingValueError("concat(): expected a non-empty list of Tensors");
        py::gil_scoped_release r;
        return cat(ts, dim);
      },
      arg("tensors"), arg("dim") = 0, "Alias of cat.");
  m.def(
      "split",
      [](py::handle tensor, py::handle split_size_or_sections, int64_t dim) {
        return split_impl(tensor_arg(tensor, "split", "tensor"), split_size_or_sections, dim);
      },
      arg("tensor"), arg("split_size_or_sections"), arg("dim") = 0, "Splits into views along dim.");
  m.def(
      "narrow",
      [](py::handle input, int64_t dim, int64_t start, int64_t length) {
        Tensor x = tensor_arg(input, "narrow", "input");
        const int64_t d = wrap_dim_py(dim, x.dim(), "narrow");
        const int64_t n = x.size(d);
        if (start < 0) start += n;
        if (start < 0 || length < 0 || start + length > n)
          throw BindingIndexError(
              msg("narrow(): start (", start, ") + length (", length, ") exceeds dimension size (", n, ")"));
        return slice(x, d, start, start + length, 1);
      },
      arg("input"), arg("dim"), arg("start"), arg("length"));
  m.def(
      "index_select",
      [](py::handle input, py::handle dim, py::handle index) {
        Tensor x = tensor_arg(input, "index_select", "input");
        const int64_t d = wrap_dim_py(dim_arg(dim, "index_select"), x.dim(), "index_select", true);
        Tensor idx = index_arg(index, "index_select");
        py::gil_scoped_release r;
        return index_select(x, d, idx);
      },
      arg("input"), arg("dim"), arg("index"));
  m.def(
      "gather",
      [](py::handle input, py::handle dim, py::handle index, bool sparse_grad) {
        if (sparse_grad) raise_not_implemented("gather(): sparse_grad=True is not supported by Strata");
        Tensor x = tensor_arg(input, "gather", "input");
        const int64_t d = wrap_dim_py(dim_arg(dim, "gather"), x.dim(), "gather", true);
        Tensor idx = index_arg(index, "gather");
        py::gil_scoped_release r;
        return gather(x, d, idx);
      },
      arg("input"), arg("dim"), arg("index"), py::kw_only(), arg("sparse_grad") = false);
}

void def_functions(py::module_& m) {
  def_linalg(m);
  def_unary(m);
  def_binary(m);
  def_reductions(m);
  def_shape_functions(m);
  def_nn_functions(m);
}

// ---- issue 26 parts 7-8: silu, l1_loss, embedding, scaled_dot_product_attention ---------------------

}  // namespace

py::object inplace_op(py::object self, const char* op, bool saves_self, bool other_requires_grad,
                      const std::function<Tensor(const Tensor&)>& compute) {
  return inplace(std::move(self), op, saves_self, other_requires_grad, compute);
}

void init_ops(py::module_& m) {
  def_functions(m);
  def_unary_methods();
  def_op_methods();
  def_arithmetic_methods();
  def_reduction_and_index_methods();
  def_fill_methods();
  def_operators();
}

}  // namespace strata::python
