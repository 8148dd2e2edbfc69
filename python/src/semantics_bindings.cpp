// Tensor semantics as PyTorch's (issue 26): comparison, logical and bitwise operators that return
// tensors (never Python identity; __hash__ stays identity-based, as torch's), the index-returning
// reductions with torch.return_types' named tuples, prod/amin/min/any/all, and the type-promotion
// queries (strata.result_type, promote_types, can_cast). The semantics are the C++ ops'
// (ops/comparison.h, ops/index_reduction.h, core/type_promotion.h); this file binds them.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "core/type_promotion.h"
#include "ops/binary.h"
#include "ops/comparison.h"
#include "ops/index_reduction.h"
#include "ops/reduction.h"
#include "ops/unary.h"

namespace strata::python {

namespace {

py::object not_implemented() { return py::reinterpret_borrow<py::object>(Py_NotImplemented); }

// ---- torch.return_types -------------------------------------------------------------------------

// strata.return_types.<name>: named tuples (values, indices), like torch.return_types.max. Made
// once at import; the module keeps them alive.
py::object g_return_types;

py::object values_indices(const char* name, ValuesIndices r) {
  return g_return_types.attr(name)(py::cast(std::move(r.values)), py::cast(std::move(r.indices)));
}

void def_return_types(py::module_& m) {
  py::module_ rt = m.def_submodule("return_types", "Named tuples (values, indices) returned by max, min, topk, sort.");
  py::object namedtuple = py::module_::import("collections").attr("namedtuple");
  for (const char* name : {"max", "min", "topk", "sort"}) {
    py::object cls = namedtuple(name, py::make_tuple("values", "indices"));
    cls.attr("__module__") = "strata.return_types";
    rt.attr(name) = cls;
  }
  g_return_types = rt;
  g_return_types.inc_ref();  // lives as long as the process, like the dtype objects
}

// ---- comparisons ----------------------------------------------------------------------------------

enum class Cmp { Eq, Ne, Lt, Le, Gt, Ge };

const char* cmp_name(Cmp c) {
  switch (c) {
    case Cmp::Eq: return "eq";
    case Cmp::Ne: return "ne";
    case Cmp::Lt: return "lt";
    case Cmp::Le: return "le";
    case Cmp::Gt: return "gt";
    case Cmp::Ge: return "ge";
  }
  return "?";
}

template <typename Other>
Tensor apply_cmp(Cmp c, const Tensor& a, const Other& b) {
  py::gil_scoped_release release;
  switch (c) {
    case Cmp::Eq: return eq(a, b);
    case Cmp::Ne: return ne(a, b);
    case Cmp::Lt: return lt(a, b);
    case Cmp::Le: return le(a, b);
    case Cmp::Gt: return gt(a, b);
    case Cmp::Ge: return ge(a, b);
  }
  return Tensor();
}

// torch.eq(input, other): a tensor and a tensor or a number.
Tensor compare_fn(Cmp c, py::handle input, py::handle other) {
  const Tensor a = tensor_arg(input, cmp_name(c), "input");
  if (py::isinstance<Tensor>(other)) return apply_cmp(c, a, other.cast<Tensor>());
  if (is_number(other)) return apply_cmp(c, a, scalar_arg(other, cmp_name(c), "other"));
  throw BindingTypeError(msg(cmp_name(c), "(): argument 'other' must be Tensor or a number, not ", type_name(other)));
}

// The operator: NotImplemented for what it does not know, so `t == None` is False and `t == "a"`
// is False, as with torch. Python reflects `1 < t` into `t > 1` itself.
py::object compare_operator(Cmp c, py::handle self, py::handle other) {
  if (!py::isinstance<Tensor>(other) && !is_number(other)) return not_implemented();
  return py::cast(compare_fn(c, self, other));
}

// ---- logical and bitwise --------------------------------------------------------------------------

enum class Bit { And, Or, Xor };

Tensor bitwise_fn(Bit op, py::handle input, py::handle other) {
  const char* name = op == Bit::And ? "bitwise_and" : op == Bit::Or ? "bitwise_or" : "bitwise_xor";
  const Tensor a = tensor_arg(input, name, "input");
  if (py::isinstance<Tensor>(other)) {
    const Tensor b = other.cast<Tensor>();
    py::gil_scoped_release release;
    return op == Bit::And ? bitwise_and(a, b) : op == Bit::Or ? bitwise_or(a, b) : bitwise_xor(a, b);
  }
  const Scalar s = scalar_arg(other, name, "other");
  py::gil_scoped_release release;
  return op == Bit::And ? bitwise_and(a, s) : op == Bit::Or ? bitwise_or(a, s) : bitwise_xor(a, s);
}

py::object bitwise_operator(Bit op, py::handle self, py::handle other) {
  if (!py::isinstance<Tensor>(other) && !is_number(other)) return not_implemented();
  return py::cast(bitwise_fn(op, self, other));
}

Tensor invert(const Tensor& t) {
  if (is_floating(t.dtype()))
    throw BindingTypeError(
        msg("~ (operator.invert) is only implemented on integer and Boolean-type tensors, got ", t.describe()));
  py::gil_scoped_release release;
  return bitwise_not(t);
}

/// logical_and, logical_or and logical_xor: (name, binding) for strata.<name> and Tensor.<name>.
std::vector<std::pair<const char*, std::function<Tensor(py::handle, py::handle)>>> logical_ops() {
  using Op = Tensor (*)(const Tensor&, const Tensor&);
  std::vector<std::pair<const char*, std::function<Tensor(py::handle, py::handle)>>> out;
  for (auto [name, op] :
       {std::pair<const char*, Op>{"logical_and", &logical_and}, std::pair<const char*, Op>{"logical_or", &logical_or},
        std::pair<const char*, Op>{"logical_xor", &logical_xor}})
    out.emplace_back(name, [name, op](py::handle input, py::handle other) {
      const Tensor a = tensor_arg(input, name, "input"), b = tensor_arg(other, name, "other");
      py::gil_scoped_release release;
      return op(a, b);
    });
  return out;
}

// ---- reductions -------------------------------------------------------------------------------------

std::optional<int64_t> opt_dim(py::handle dim, const Tensor& t, const char* op) {
  if (dim.is_none()) return std::nullopt;
  return wrap_dim_py(int_from_py(dim, op, "dim"), t.dim(), op, /*scalar_ok=*/true);
}

bool keepdim_arg(py::handle keepdim) { return !keepdim.is_none() && keepdim.cast<bool>(); }

/// None (every dim), an int or a sequence of ints, each checked like PyTorch (IndexError).
Dims reduce_dims(py::handle dim, const Tensor& t, const char* op) {
  if (dim.is_none()) return {};
  Dims dims = int_list_from_sequence(dim, op, "dim");
  for (int64_t d : dims) wrap_dim_py(d, t.dim(), op, true);
  return dims;
}

/// The input converted for dtype= (PyTorch's meaning), recorded when it requires grad.
Tensor with_dtype(const Tensor& t, py::handle dtype, const char* op) {
  return dtype.is_none() ? t : to_diff(t, dtype_from_py(dtype, op), false);
}

Tensor prod_py(const Tensor& input, py::handle dim, bool keepdim, py::handle dtype) {
  const Tensor t = with_dtype(input, dtype, "prod");
  const auto d = opt_dim(dim, t, "prod");
  Tensor r;
  {
    py::gil_scoped_release release;
    r = d ? prod(t, *d, keepdim) : prod(t);
  }
  return with_dtype(r, dtype, "prod");  // the result has dtype= too (an integer dtype stays itself)
}

Tensor any_all_py(const Tensor& t, py::handle dim, bool keepdim, bool is_any) {
  const Dims dims = reduce_dims(dim, t, is_any ? "any" : "all");
  py::gil_scoped_release release;
  return is_any ? any(t, dims, keepdim) : all(t, dims, keepdim);
}

Tensor amin_py(const Tensor& t, py::handle dim, bool keepdim) {
  Dims dims = dim.is_none() ? Dims{} : int_list_from_sequence(dim, "amin", "dim");
  for (int64_t d : dims) wrap_dim_py(d, t.dim(), "amin", true);
  py::gil_scoped_release release;
  if (dims.empty()) {  // amin(x, dim=()) reduces every dim
    if (t.dim() == 0) return keepdim ? min(t).reshape(t.sizes()) : min(t);
    for (int64_t d = 0; d < t.dim(); ++d) dims.push_back(d);
  }
  return amin(t, dims, keepdim);
}

/// min(input) / min(input, dim, keepdim) / min(input, other).
py::object min_py(const Tensor& t, py::handle dim, py::handle keepdim) {
  if (py::isinstance<Tensor>(dim)) {
    const Tensor other = dim.cast<Tensor>();
    py::gil_scoped_release release;
    return py::cast(minimum(t, other));
  }
  if (!dim.is_none()) return extreme_dim_py(t, dim, keepdim, /*is_max=*/false);
  if (!keepdim.is_none()) throw BindingTypeError("min(): keepdim needs a dim (min(input, dim, keepdim))");
  py::gil_scoped_release release;
  return py::cast(min(t));
}

Tensor arg_py(const Tensor& t, py::handle dim, bool keepdim, bool is_max) {
  const auto d = opt_dim(dim, t, is_max ? "argmax" : "argmin");
  py::gil_scoped_release release;
  return is_max ? argmax(t, d, keepdim) : argmin(t, d, keepdim);
}

py::object topk_py(const Tensor& t, py::handle k, py::handle dim, bool largest, bool sorted) {
  const int64_t kk = int_from_py(k, "topk", "k");
  const int64_t d = wrap_dim_py(int_from_py(dim, "topk", "dim"), t.dim(), "topk", true);
  ValuesIndices r;
  {
    py::gil_scoped_release release;
    r = topk(t, kk, d, largest, sorted);
  }
  return values_indices("topk", std::move(r));
}

ValuesIndices sort_impl(const Tensor& t, py::handle dim, bool descending) {
  const int64_t d = wrap_dim_py(int_from_py(dim, "sort", "dim"), t.dim(), "sort", true);
  py::gil_scoped_release release;
  return sort(t, d, descending);
}

// ---- promotion queries ------------------------------------------------------------------------------

/// torch.result_type's operands: tensors and numbers.
void add_operand(ResultType& r, py::handle h, const char* name) {
  if (py::isinstance<Tensor>(h))
    r.add(h.cast<const Tensor&>());
  else if (is_number(h))
    r.add(scalar_arg(h, "result_type", name));
  else
    throw BindingTypeError(msg("result_type(): argument '", name, "' must be Tensor or a number, not ", type_name(h)));
}

void def_functions(py::module_& m) {
  using py::arg;
  for (Cmp c : {Cmp::Eq, Cmp::Ne, Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge})
    m.def(
        cmp_name(c), [c](py::handle input, py::handle other) { return compare_fn(c, input, other); }, arg("input"),
        arg("other"), "Element-wise comparison (a bool tensor), with broadcasting and type promotion.");
  // PyTorch's long names.
  for (auto [alias, c] :
       {std::pair{"greater", Cmp::Gt}, std::pair{"greater_equal", Cmp::Ge}, std::pair{"less", Cmp::Lt},
        std::pair{"less_equal", Cmp::Le}, std::pair{"not_equal", Cmp::Ne}})
    m.def(
        alias, [c](py::handle input, py::handle other) { return compare_fn(c, input, other); }, arg("input"),
        arg("other"));
  for (const auto& [name, fn] : logical_ops()) m.def(name, fn, arg("input"), arg("other"));
  m.def(
      "logical_not",
      [](py::handle a) {
        const Tensor t = tensor_arg(a, "logical_not", "input");
        py::gil_scoped_release r;
        return logical_not(t);
      },
      arg("input"));
  m.def(
      "bitwise_and", [](py::handle a, py::handle b) { return bitwise_fn(Bit::And, a, b); }, arg("input"), arg("other"));
  m.def("bitwise_or", [](py::handle a, py::handle b) { return bitwise_fn(Bit::Or, a, b); }, arg("input"), arg("other"));
  m.def(
      "bitwise_xor", [](py::handle a, py::handle b) { return bitwise_fn(Bit::Xor, a, b); }, arg("input"), arg("other"));
  m.def(
      "bitwise_not",
      [](py::handle a) {
        const Tensor t = tensor_arg(a, "bitwise_not", "input");
        py::gil_scoped_release r;
        return bitwise_not(t);
      },
      arg("input"));
  m.def(
      "minimum",
      [](py::handle a, py::handle b) {
        const Tensor x = tensor_arg(a, "minimum", "input"), y = tensor_arg(b, "minimum", "other");
        py::gil_scoped_release r;
        return minimum(x, y);
      },
      arg("input"), arg("other"), "Element-wise minimum (NaN propagates).");
  for (const char* name : {"neg", "negative"})
    m.def(
        name,
        [](py::handle a) {
          const Tensor t = tensor_arg(a, "neg", "input");
          py::gil_scoped_release r;
          return neg(t);
        },
        arg("input"));
  for (const char* name : {"abs", "absolute"})
    m.def(
        name,
        [](py::handle a) {
          const Tensor t = tensor_arg(a, "abs", "input");
          py::gil_scoped_release r;
          return abs(t);
        },
        arg("input"));
}

void def_reduction_functions(py::module_& m) {
  using py::arg;
  const auto none = py::none();
  m.def(
      "prod",
      [](py::handle input, py::handle dim, bool keepdim, py::handle dtype) {
        return prod_py(tensor_arg(input, "prod", "input"), dim, keepdim, dtype);
      },
      arg("input"), arg("dim") = none, arg("keepdim") = false, py::kw_only(), arg("dtype") = none);
  m.def(
      "amin",
      [](py::handle input, py::handle dim, bool keepdim) {
        return amin_py(tensor_arg(input, "amin", "input"), dim, keepdim);
      },
      arg("input"), arg("dim") = py::tuple(), arg("keepdim") = false);
  m.def(
      "min",
      [](py::handle input, py::handle dim, py::handle keepdim) {
        return min_py(tensor_arg(input, "min", "input"), dim, keepdim);
      },
      arg("input"), arg("dim") = none, arg("keepdim") = none,
      "min(input): the minimum; min(input, dim, keepdim): (values, indices); min(input, other): minimum.");
  m.def(
      "argmax",
      [](py::handle input, py::handle dim, bool keepdim) {
        return arg_py(tensor_arg(input, "argmax", "input"), dim, keepdim, true);
      },
      arg("input"), arg("dim") = none, arg("keepdim") = false);
  m.def(
      "argmin",
      [](py::handle input, py::handle dim, bool keepdim) {
        return arg_py(tensor_arg(input, "argmin", "input"), dim, keepdim, false);
      },
      arg("input"), arg("dim") = none, arg("keepdim") = false);
  m.def(
      "topk",
      [](py::handle input, py::handle k, py::handle dim, bool largest, bool sorted) {
        return topk_py(tensor_arg(input, "topk", "input"), k, dim, largest, sorted);
      },
      arg("input"), arg("k"), arg("dim") = -1, arg("largest") = true, arg("sorted") = true);
  m.def(
      "sort",
      [](py::handle input, py::handle dim, bool descending, py::handle) {
        return values_indices("sort", sort_impl(tensor_arg(input, "sort", "input"), dim, descending));
      },
      arg("input"), arg("dim") = -1, arg("descending") = false, py::kw_only(), arg("stable") = none,
      "Sorted values and indices (always stable).");
  m.def(
      "argsort",
      [](py::handle input, py::handle dim, bool descending, py::handle) {
        return sort_impl(tensor_arg(input, "argsort", "input"), dim, descending).indices;
      },
      arg("input"), arg("dim") = -1, arg("descending") = false, py::kw_only(), arg("stable") = none);
  m.def(
      "any",
      [](py::handle input, py::handle dim, bool keepdim) {
        return any_all_py(tensor_arg(input, "any", "input"), dim, keepdim, true);
      },
      arg("input"), arg("dim") = none, arg("keepdim") = false);
  m.def(
      "all",
      [](py::handle input, py::handle dim, bool keepdim) {
        return any_all_py(tensor_arg(input, "all", "input"), dim, keepdim, false);
      },
      arg("input"), arg("dim") = none, arg("keepdim") = false);
  m.def(
      "result_type",
      [](py::handle a, py::handle b) {
        ResultType r;
        add_operand(r, a, "tensor1");
        add_operand(r, b, "tensor2");
        return dtype_object(r.get());
      },
      arg("tensor1"), arg("tensor2"), "The dtype an op of the two operands computes in (torch.result_type).");
  m.def(
      "promote_types",
      [](py::handle a, py::handle b) {
        return dtype_object(promote_types(dtype_from_py(a, "promote_types"), dtype_from_py(b, "promote_types")));
      },
      arg("type1"), arg("type2"));
  m.def(
      "can_cast",
      [](py::handle from, py::handle to) {
        return can_cast(dtype_from_py(from, "can_cast"), dtype_from_py(to, "can_cast"));
      },
      arg("from_"), arg("to"));
}

void def_methods(py::module_&) {
  using py::arg;
  const auto none = py::none();
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(py::type::of<Tensor>());
  for (Cmp c : {Cmp::Eq, Cmp::Ne, Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge}) {
    cls.def(cmp_name(c), [c](py::handle self, py::handle other) { return compare_fn(c, self, other); }, arg("other"));
    const std::string dunder = std::string("__") + cmp_name(c) + "__";
    cls.def(
        dunder.c_str(), [c](py::handle self, py::handle other) { return compare_operator(c, self, other); },
        py::is_operator());
  }
  // Defining __eq__ would make instances unhashable; PyTorch hashes a tensor by identity.
  cls.def("__hash__", [](py::handle self) { return py::hash(py::int_(reinterpret_cast<std::uintptr_t>(self.ptr()))); });
  for (auto [name, op] : {std::pair{"and", Bit::And}, std::pair{"or", Bit::Or}, std::pair{"xor", Bit::Xor}}) {
    const std::string fn = std::string("bitwise_") + name;
    cls.def(fn.c_str(), [op](py::handle self, py::handle other) { return bitwise_fn(op, self, other); }, arg("other"));
    for (const char* prefix : {"__", "__r"}) {  // & | ^ are symmetric: __rand__ is __and__
      const std::string dunder = std::string(prefix) + name + "__";
      cls.def(
          dunder.c_str(), [op](py::handle self, py::handle other) { return bitwise_operator(op, self, other); },
          py::is_operator());
    }
  }
  for (const auto& [name, fn] : logical_ops()) cls.def(name, fn, arg("other"));
  cls.def("__invert__", [](const Tensor& t) { return invert(t); })
      .def("bitwise_not",
           [](const Tensor& t) {
             py::gil_scoped_release r;
             return bitwise_not(t);
           })
      .def("logical_not",
           [](const Tensor& t) {
             py::gil_scoped_release r;
             return logical_not(t);
           })
      .def(
          "minimum",
          [](const Tensor& t, py::handle other) {
            const Tensor o = tensor_arg(other, "minimum", "other");
            py::gil_scoped_release r;
            return minimum(t, o);
          },
          arg("other"))
      .def("abs",
           [](const Tensor& t) {
             py::gil_scoped_release r;
             return abs(t);
           })
      .def("__abs__",
           [](const Tensor& t) {
             py::gil_scoped_release r;
             return abs(t);
           })
      .def("negative",
           [](const Tensor& t) {
             py::gil_scoped_release r;
             return neg(t);
           })
      .def(
          "prod",
          [](const Tensor& t, py::handle dim, bool keepdim, py::handle dtype) {
            return prod_py(t, dim, keepdim, dtype);
          },
          arg("dim") = none, arg("keepdim") = false, py::kw_only(), arg("dtype") = none)
      .def(
          "amin", [](const Tensor& t, py::handle dim, bool keepdim) { return amin_py(t, dim, keepdim); },
          arg("dim") = py::tuple(), arg("keepdim") = false)
      .def(
          "min", [](const Tensor& t, py::handle dim, py::handle keepdim) { return min_py(t, dim, keepdim); },
          arg("dim") = none, arg("keepdim") = none)
      .def(
          "argmax", [](const Tensor& t, py::handle dim, bool keepdim) { return arg_py(t, dim, keepdim, true); },
          arg("dim") = none, arg("keepdim") = false)
      .def(
          "argmin", [](const Tensor& t, py::handle dim, bool keepdim) { return arg_py(t, dim, keepdim, false); },
          arg("dim") = none, arg("keepdim") = false)
      .def(
          "topk",
          [](const Tensor& t, py::handle k, py::handle dim, bool largest, bool sorted) {
            return topk_py(t, k, dim, largest, sorted);
          },
          arg("k"), arg("dim") = -1, arg("largest") = true, arg("sorted") = true)
      .def(
          "sort",
          [](const Tensor& t, py::handle dim, bool descending, py::handle) {
            return values_indices("sort", sort_impl(t, dim, descending));
          },
          arg("dim") = -1, arg("descending") = false, py::kw_only(), arg("stable") = none)
      .def(
          "argsort",
          [](const Tensor& t, py::handle dim, bool descending, py::handle) {
            return sort_impl(t, dim, descending).indices;
          },
          arg("dim") = -1, arg("descending") = false, py::kw_only(), arg("stable") = none)
      .def(
          "any", [](const Tensor& t, py::handle dim, bool keepdim) { return any_all_py(t, dim, keepdim, true); },
          arg("dim") = none, arg("keepdim") = false)
      .def(
          "all", [](const Tensor& t, py::handle dim, bool keepdim) { return any_all_py(t, dim, keepdim, false); },
          arg("dim") = none, arg("keepdim") = false)
      .def("half", [](const Tensor& t) {
        py::gil_scoped_release r;
        return to_diff(t, DType::f16, false);
      });
}

}  // namespace

py::object extreme_dim_py(const Tensor& t, py::handle dim, py::handle keepdim, bool is_max) {
  const char* op = is_max ? "max" : "min";
  const int64_t d = wrap_dim_py(int_from_py(dim, op, "dim"), t.dim(), op, /*scalar_ok=*/true);
  const bool keep = keepdim_arg(keepdim);
  ValuesIndices r;
  {
    py::gil_scoped_release release;
    r = is_max ? max(t, d, keep) : min(t, d, keep);
  }
  return values_indices(op, std::move(r));
}

void init_semantics(py::module_& m) {
  def_return_types(m);
  def_functions(m);
  def_reduction_functions(m);
  def_methods(m);
}

}  // namespace strata::python
