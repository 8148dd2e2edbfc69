// Issue 26 part 4, "the missing ops": element-wise math (ops/elementwise_math.h) as strata.<name>,
// Tensor.<name> and, where PyTorch has one, Tensor.<name>_; the statistics (ops/statistics.h), the
// shape transforms (ops/shape_transforms.h) and einsum (ops/einsum.h). The
// semantics are the C++ ops'; this file binds them and parses PyTorch's overloaded signatures.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bindings.h"
#include "ops/einsum.h"
#include "ops/elementwise_math.h"
#include "ops/shape_transforms.h"
#include "ops/statistics.h"

namespace strata::python {

namespace {

using UnaryOp = Tensor (*)(const Tensor&);

/// A one-tensor op and its PyTorch names.
struct UnaryEntry {
  const char* name;
  UnaryOp op;
  /// The op's backward reads its input, so the in-place form computes on a copy.
  bool saves_input;
  /// Other names of strata.<name> (torch.arcsin, torch.fix, ...), also Tensor methods.
  std::vector<const char*> aliases;
};

std::vector<UnaryEntry> unary_entries() {
  return {
      {"sin", &sin, true, {}},           {"cos", &cos, true, {}},           {"tan", &tan, false, {}},
      {"asin", &asin, true, {"arcsin"}}, {"acos", &acos, true, {"arccos"}}, {"atan", &atan, true, {"arctan"}},
      {"sinh", &sinh, true, {}},         {"cosh", &cosh, true, {}},         {"floor", &floor, false, {}},
      {"ceil", &ceil, false, {}},        {"trunc", &trunc, false, {"fix"}}, {"sign", &sign, false, {}},
      {"expm1", &expm1, false, {}},      {"log1p", &log1p, true, {}},       {"rsqrt", &rsqrt, false, {}},
      {"erf", &erf, true, {}},           {"square", &square, true, {}},     {"reciprocal", &reciprocal, false, {}},
  };
}

Tensor call_unary(UnaryOp op, const Tensor& x) {
  py::gil_scoped_release release;
  return op(x);
}

int64_t decimals_arg(py::handle decimals) { return int_from_py(decimals, "round", "decimals"); }

Tensor round_py(const Tensor& x, py::handle decimals) {
  const int64_t d = decimals_arg(decimals);
  py::gil_scoped_release release;
  return round(x, d);
}

Tensor atan2_py(py::handle input, py::handle other, const char* op) {
  const Tensor a = tensor_arg(input, op, "input"), b = tensor_arg(other, op, "other");
  py::gil_scoped_release release;
  return atan2(a, b);
}

void def_unary(py::module_& m, py::class_<Tensor>& cls) {
  using py::arg;
  for (const UnaryEntry& e : unary_entries()) {
    std::vector<const char*> names = e.aliases;
    names.insert(names.begin(), e.name);
    for (const char* name : names) {
      m.def(name, [e](py::handle input) { return call_unary(e.op, tensor_arg(input, e.name, "input")); }, arg("input"));
      cls.def(name, [e](const Tensor& t) { return call_unary(e.op, t); });
      const std::string in_place = std::string(name) + "_";
      cls.def(in_place.c_str(), [e, in_place](py::object self) {
        return inplace_op(std::move(self), in_place.c_str(), e.saves_input, false,
                          [op = e.op](const Tensor& a) { return op(a); });
      });
    }
  }
}

void def_round_atan2(py::module_& m, py::class_<Tensor>& cls) {
  using py::arg;
  m.def(
      "round",
      [](py::handle input, py::handle decimals) { return round_py(tensor_arg(input, "round", "input"), decimals); },
      arg("input"), py::kw_only(), arg("decimals") = 0,
      "Rounds to the nearest integer, halves to even; decimals= rounds to that many decimal places.");
  cls.def(
      "round", [](const Tensor& t, py::handle decimals) { return round_py(t, decimals); }, py::kw_only(),
      arg("decimals") = 0);
  cls.def(
      "round_",
      [](py::object self, py::handle decimals) {
        const int64_t d = decimals_arg(decimals);
        return inplace_op(std::move(self), "round_", false, false, [d](const Tensor& a) { return round(a, d); });
      },
      py::kw_only(), arg("decimals") = 0);
  for (const char* name : {"atan2", "arctan2"}) {
    m.def(
        name, [name](py::handle input, py::handle other) { return atan2_py(input, other, name); }, arg("input"),
        arg("other"), "The angle of (other, input) in (-pi, pi], with broadcasting and type promotion.");
    cls.def(name, [name](py::handle self, py::handle other) { return atan2_py(self, other, name); }, arg("other"));
    const std::string in_place = std::string(name) + "_";
    cls.def(
        in_place.c_str(),
        [in_place](py::object self, py::handle other) {
          const Tensor b = tensor_arg(other, in_place.c_str(), "other");
          return inplace_op(std::move(self), in_place.c_str(), true, b.requires_grad(),
                            [b](const Tensor& a) { return atan2(a, b); });
        },
        arg("other"));
  }
}

// ---- statistics --------------------------------------------------------------------------------

/// None (every dim), an int or a sequence of ints, each checked like PyTorch (IndexError).
Dims dims_arg(py::handle dim, const Tensor& t, const char* op) {
  if (dim.is_none()) return {};
  Dims dims = int_list_from_sequence(dim, op, "dim");
  for (int64_t d : dims) wrap_dim_py(d, t.dim(), op, /*scalar_ok=*/true);
  return dims;
}

/// torch.var / torch.std: var(input, dim=None, *, correction=1, keepdim=False), the older
/// var(input, dim, unbiased, keepdim) and var(input, unbiased) (a bool in dim's place).
Tensor var_std_py(const Tensor& t, py::handle dim, py::handle unbiased, bool keepdim, py::handle correction,
                  bool is_std) {
  const char* op = is_std ? "std" : "var";
  if (PyBool_Check(dim.ptr())) {
    if (!unbiased.is_none()) throw BindingTypeError(msg(op, "(): unbiased given twice (as dim and as unbiased)"));
    unbiased = dim;
    dim = py::none();
  }
  if (!unbiased.is_none() && !correction.is_none())
    throw BindingTypeError(msg(op, "(): cannot specify both unbiased and correction"));
  if (!unbiased.is_none() && !PyBool_Check(unbiased.ptr()))
    throw BindingTypeError(msg(op, "(): argument 'unbiased' must be bool, not ", Py_TYPE(unbiased.ptr())->tp_name));
  double c = 1.0;
  if (!unbiased.is_none()) c = unbiased.cast<bool>() ? 1.0 : 0.0;
  if (!correction.is_none()) c = scalar_arg(correction, op, "correction").to_double();
  const Dims dims = dims_arg(dim, t, op);
  py::gil_scoped_release release;
  return is_std ? std(t, dims, c, keepdim) : var(t, dims, c, keepdim);
}

/// torch.norm(input, p='fro', dim=None, keepdim=False, dtype=None): a number p or 'fro' (the
/// 2-norm over the dims).
Tensor norm_py(const Tensor& input, py::handle p, py::handle dim, bool keepdim, py::handle dtype) {
  double order = 2.0;
  if (py::isinstance<py::str>(p)) {
    const std::string s = p.cast<std::string>();
    if (s == "nuc") throw Error("norm(): p='nuc' (the nuclear norm) is not supported by Strata");
    if (s != "fro")
      throw Error(msg("norm(): order ", quote_field(s), " not supported (expected a number, 'fro' or 'nuc')"));
  } else if (!p.is_none()) {
    order = scalar_arg(p, "norm", "p").to_double();
  }
  const Tensor t = dtype.is_none() ? input : to_diff(input, dtype_from_py(dtype, "norm"), false);
  const Dims dims = dims_arg(dim, t, "norm");
  py::gil_scoped_release release;
  return norm(t, order, dims, keepdim);
}

Tensor logsumexp_py(const Tensor& t, py::handle dim, bool keepdim) {
  const Dims dims = int_list_from_sequence(dim, "logsumexp", "dim");
  for (int64_t d : dims) wrap_dim_py(d, t.dim(), "logsumexp", true);
  py::gil_scoped_release release;
  return logsumexp(t, dims, keepdim);
}

Tensor cumsum_py(const Tensor& t, py::handle dim, py::handle dtype) {
  const int64_t d = wrap_dim_py(int_from_py(dim, "cumsum", "dim"), t.dim(), "cumsum", true);
  const std::optional<DType> dt = optional_dtype(dtype, "cumsum");
  py::gil_scoped_release release;
  return cumsum(t, d, dt);
}

void def_statistics(py::module_& m, py::class_<Tensor>& cls) {
  using py::arg;
  const auto none = py::none();
  for (bool is_std : {false, true}) {
    const char* name = is_std ? "std" : "var";
    m.def(
        name,
        [is_std, name](py::handle input, py::handle dim, py::handle unbiased, bool keepdim, py::handle correction) {
          return var_std_py(tensor_arg(input, name, "input"), dim, unbiased, keepdim, correction, is_std);
        },
        arg("input"), arg("dim") = none, arg("unbiased") = none, arg("keepdim") = false, py::kw_only(),
        arg("correction") = none);
    cls.def(
        name,
        [is_std](const Tensor& t, py::handle dim, py::handle unbiased, bool keepdim, py::handle correction) {
          return var_std_py(t, dim, unbiased, keepdim, correction, is_std);
        },
        arg("dim") = none, arg("unbiased") = none, arg("keepdim") = false, py::kw_only(), arg("correction") = none);
  }
  m.def(
      "norm",
      [](py::handle input, py::handle p, py::handle dim, bool keepdim, py::handle dtype) {
        return norm_py(tensor_arg(input, "norm", "input"), p, dim, keepdim, dtype);
      },
      arg("input"), arg("p") = "fro", arg("dim") = none, arg("keepdim") = false, arg("dtype") = none);
  cls.def(
      "norm",
      [](const Tensor& t, py::handle p, py::handle dim, bool keepdim, py::handle dtype) {
        return norm_py(t, p, dim, keepdim, dtype);
      },
      arg("p") = "fro", arg("dim") = none, arg("keepdim") = false, arg("dtype") = none);
  m.def(
      "logsumexp",
      [](py::handle input, py::handle dim, bool keepdim) {
        return logsumexp_py(tensor_arg(input, "logsumexp", "input"), dim, keepdim);
      },
      arg("input"), arg("dim"), arg("keepdim") = false);
  cls.def(
      "logsumexp", [](const Tensor& t, py::handle dim, bool keepdim) { return logsumexp_py(t, dim, keepdim); },
      arg("dim"), arg("keepdim") = false);
  m.def(
      "cumsum",
      [](py::handle input, py::handle dim, py::handle dtype) {
        return cumsum_py(tensor_arg(input, "cumsum", "input"), dim, dtype);
      },
      arg("input"), arg("dim"), py::kw_only(), arg("dtype") = none);
  cls.def(
      "cumsum", [](const Tensor& t, py::handle dim, py::handle dtype) { return cumsum_py(t, dim, dtype); }, arg("dim"),
      py::kw_only(), arg("dtype") = none);
}

// ---- shape transforms and einsum -------------------------------------------------------------------

Tensor flip_py(const Tensor& t, const Dims& dims) {
  for (int64_t d : dims) wrap_dim_py(d, t.dim(), "flip", true);
  py::gil_scoped_release release;
  return flip(t, dims);
}

Tensor roll_py(const Tensor& t, py::handle shifts, py::handle dims) {
  const Dims s = int_list_from_sequence(shifts, "roll", "shifts");
  const Dims d = dims.is_none() ? Dims{} : int_list_from_sequence(dims, "roll", "dims");
  for (int64_t v : d) wrap_dim_py(v, t.dim(), "roll", true);
  py::gil_scoped_release release;
  return roll(t, s, d);
}

Tensor repeat_interleave_py(const Tensor& t, py::handle repeats, py::handle dim) {
  std::optional<int64_t> d;
  if (!dim.is_none()) d = wrap_dim_py(int_from_py(dim, "repeat_interleave", "dim"), t.dim(), "repeat_interleave", true);
  if (py::isinstance<Tensor>(repeats)) {
    const Tensor r = repeats.cast<Tensor>();
    py::gil_scoped_release release;
    return repeat_interleave(t, r, d);
  }
  const int64_t r = int_from_py(repeats, "repeat_interleave", "repeats");
  py::gil_scoped_release release;
  return repeat_interleave(t, r, d);
}

py::tuple chunk_py(const Tensor& t, py::handle chunks, py::handle dim) {
  const int64_t c = int_from_py(chunks, "chunk", "chunks");
  const int64_t d = int_from_py(dim, "chunk", "dim");
  if (t.dim() > 0) wrap_dim_py(d, t.dim(), "chunk");
  std::vector<Tensor> parts;
  {
    py::gil_scoped_release release;
    parts = chunk(t, c, d);
  }
  return tensors_tuple(parts);
}

Tensor triangle_py(const Tensor& t, py::handle diagonal, bool lower) {
  const int64_t k = int_from_py(diagonal, lower ? "tril" : "triu", "diagonal");
  py::gil_scoped_release release;
  return lower ? tril(t, k) : triu(t, k);
}

/// einsum(equation, *operands) or einsum(equation, [operands]).
Tensor einsum_py(py::handle equation, const py::args& operands) {
  if (!py::isinstance<py::str>(equation))
    throw BindingTypeError(msg("einsum(): argument 'equation' must be str, not ", Py_TYPE(equation.ptr())->tp_name));
  std::vector<Tensor> ts;
  if (operands.size() == 1 && !py::isinstance<Tensor>(operands[0]))
    ts = tensor_list(operands[0], "einsum", "operands");
  else
    ts = tensor_list(operands, "einsum", "operands");
  const std::string eq = equation.cast<std::string>();
  py::gil_scoped_release release;
  return einsum(eq, ts);
}

void def_shape_functions(py::module_& m) {
  using py::arg;
  const auto none = py::none();
  m.def(
      "stack",
      [](py::handle tensors, py::handle dim) {
        const std::vector<Tensor> ts = tensor_list(tensors, "stack", "tensors");
        const int64_t d = int_from_py(dim, "stack", "dim");
        if (!ts.empty()) wrap_dim_py(d, ts[0].dim() + 1, "stack");
        py::gil_scoped_release release;
        return stack(ts, d);
      },
      arg("tensors"), arg("dim") = 0, "Joins tensors of one shape along a new dim.");
  m.def(
      "chunk",
      [](py::handle input, py::handle chunks, py::handle dim) {
        return chunk_py(tensor_arg(input, "chunk", "input"), chunks, dim);
      },
      arg("input"), arg("chunks"), arg("dim") = 0);
  m.def(
      "flip",
      [](py::handle input, py::handle dims) {
        return flip_py(tensor_arg(input, "flip", "input"), int_list_from_sequence(dims, "flip", "dims"));
      },
      arg("input"), arg("dims"));
  m.def(
      "roll",
      [](py::handle input, py::handle shifts, py::handle dims) {
        return roll_py(tensor_arg(input, "roll", "input"), shifts, dims);
      },
      arg("input"), arg("shifts"), arg("dims") = none);
  m.def(
      "repeat_interleave",
      [](py::handle input, py::handle repeats, py::handle dim, py::handle) {
        return repeat_interleave_py(tensor_arg(input, "repeat_interleave", "input"), repeats, dim);
      },
      arg("input"), arg("repeats"), arg("dim") = none, py::kw_only(), arg("output_size") = none);
  for (bool lower : {true, false})
    m.def(
        lower ? "tril" : "triu",
        [lower](py::handle input, py::handle diagonal) {
          return triangle_py(tensor_arg(input, lower ? "tril" : "triu", "input"), diagonal, lower);
        },
        arg("input"), arg("diagonal") = 0);
  m.def(
      "einsum", [](py::handle equation, const py::args& operands) { return einsum_py(equation, operands); },
      arg("equation"), "Einstein summation (see ops/einsum.h for what is supported).");
}

void def_shape_methods(py::class_<Tensor>& cls) {
  using py::arg;
  const auto none = py::none();
  cls.def(
         "chunk", [](const Tensor& t, py::handle chunks, py::handle dim) { return chunk_py(t, chunks, dim); },
         arg("chunks"), arg("dim") = 0)
      .def("flip",
           [](const Tensor& t, const py::args& dims) { return flip_py(t, int_list_from_args(dims, "flip", "dims")); })
      .def(
          "roll", [](const Tensor& t, py::handle shifts, py::handle dims) { return roll_py(t, shifts, dims); },
          arg("shifts"), arg("dims") = none)
      .def("repeat",
           [](const Tensor& t, const py::args& sizes) {
             const Dims r = int_list_from_args(sizes, "repeat", "repeats");
             py::gil_scoped_release release;
             return repeat(t, r);
           })
      .def(
          "repeat_interleave",
          [](const Tensor& t, py::handle repeats, py::handle dim, py::handle) {
            return repeat_interleave_py(t, repeats, dim);
          },
          arg("repeats"), arg("dim") = none, py::kw_only(), arg("output_size") = none);
  for (bool lower : {true, false}) {
    const char* name = lower ? "tril" : "triu";
    cls.def(
        name, [lower](const Tensor& t, py::handle diagonal) { return triangle_py(t, diagonal, lower); },
        arg("diagonal") = 0);
    cls.def(
        lower ? "tril_" : "triu_",
        [lower](py::object self, py::handle diagonal) {
          const int64_t k = int_from_py(diagonal, lower ? "tril_" : "triu_", "diagonal");
          return inplace_op(std::move(self), lower ? "tril_" : "triu_", false, false,
                            [lower, k](const Tensor& a) { return lower ? tril(a, k) : triu(a, k); });
        },
        arg("diagonal") = 0);
  }
}

}  // namespace

void init_math(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(py::type::of<Tensor>());
  def_unary(m, cls);
  def_round_atan2(m, cls);
  def_statistics(m, cls);
  def_shape_functions(m);
  def_shape_methods(cls);
}

}  // namespace strata::python
