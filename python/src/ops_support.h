#pragma once
// What ops_bindings.cpp (the strata.<op> functions) shares with tensor_method_bindings.cpp (the
// same ops as Tensor methods and operators): the binary ops on tensors or numbers, the in-place
// binary ops, and the argument handling of reductions, split, indexing and clamp.

#include <optional>

#include "bindings.h"

namespace strata::python {

/// The binary ops that take numbers on either side.
enum class Bin { Add, Sub, Mul, Div, Pow, Maximum, FloorDiv, Mod };

/// `a op alpha * b` on two tensors (alpha only for Add and Sub).
Tensor bin_tt(Bin op, const Tensor& a, const Tensor& b, Scalar alpha);
/// The functional form: `a` and `b` are tensors or numbers, at least one a tensor.
Tensor binary(Bin op, py::handle a, py::handle b, Scalar alpha = 1);
/// Div for rounding_mode None, FloorDiv for "floor" ("trunc" raises NotImplementedError).
Bin div_kind(py::handle rounding_mode);
/// A Python operator (`__add__`, or `__radd__` when `reflected`): NotImplemented for other types.
py::object operator_impl(Bin op, py::handle self, py::handle other, bool reflected);
/// `self.op_(other, alpha=)` through inplace_op.
py::object inplace_binary(py::object self, Bin bop, const char* op, py::handle other, Scalar alpha);

Tensor sum_impl(const Tensor& input, py::handle dim, bool keepdim, py::handle dtype, bool mean_op);
Tensor amax_impl(const Tensor& t, py::handle dim, bool keepdim);
/// max(), max(dim) (values, indices) or max(other).
py::object max_impl(const Tensor& t, py::handle dim, py::handle keepdim);
py::tuple split_impl(const Tensor& t, py::handle split_size, int64_t dim);
/// An index tensor argument (integer dtype).
Tensor index_arg(py::handle h, const char* op);
/// None or a number.
std::optional<double> opt_number(py::handle h, const char* op, const char* name);
Tensor clamp_impl(const Tensor& t, py::handle min, py::handle max);

/// The Tensor methods and operators (tensor_method_bindings.cpp), registered by init_ops.
void def_unary_methods();
void def_op_methods();
void def_arithmetic_methods();
void def_reduction_and_index_methods();
void def_fill_methods();
void def_operators();

}  // namespace strata::python
