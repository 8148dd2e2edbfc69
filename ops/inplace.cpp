#include "ops/inplace.h"

#include <utility>

#include "autograd/grad_mode.h"
#include "autograd/view.h"
#include "core/type_promotion.h"
#include "ops/binary.h"
#include "ops/detail/op_util.h"
#include "ops/unary.h"

namespace strata {

namespace {

using namespace ops::detail;
using autograd::TensorList;

/// self copied, recorded (backward: the gradient as it is), so a node may save the copy.
Tensor clone_recorded(const Tensor& self) {
  Tensor out = self.clone();
  if (autograd::needs_grad({&self})) {
    auto node = autograd::make_node("CloneBackward", {&self},
                                    [](autograd::Node&, const TensorList& g) -> TensorList { return {g[0]}; });
    autograd::set_history({&out}, node);
  }
  return out;
}

/// `r` as a value with a node of its own: a leaf that requires grad gets an identity node, a
/// value that depends on nothing requiring grad a node sending zeros to self's old value (what
/// PyTorch records for fill_), so self keeps a history either way.
Tensor with_history(const Tensor& r, const Tensor& self_value) {
  if (r.grad_fn()) return r;
  Tensor out = r.detach();
  if (r.requires_grad()) {
    autograd::set_history(
        {&out}, autograd::make_node("AliasBackward", {&r},
                                    [](autograd::Node&, const TensorList& g) -> TensorList { return {g[0]}; }));
    return out;
  }
  const Dims sizes = self_value.sizes();
  const DType dtype = self_value.dtype();
  autograd::set_history({&out}, autograd::make_node("FillBackward", {&self_value},
                                                    [sizes, dtype](autograd::Node&, const TensorList&) -> TensorList {
                                                      return {zeros(sizes, {dtype, nullptr})};
                                                    }));
  return out;
}

/// op.compute on self (a recorded copy of it when the op saves it), checked against self's shape
/// and converted to self's dtype (Note [In-place ops], steps 2-3).
Tensor in_place_result(const Tensor& self, const InPlaceOp& op, bool record) {
  const Tensor src = (record && op.saves_self) ? clone_recorded(self) : self;
  Tensor r = op.compute(src);
  STRATA_CHECK(r.sizes() == self.sizes(), op.name, ": output with shape ", self.sizes(),
               " doesn't match the broadcast shape ", r.sizes());
  STRATA_CHECK(can_cast(r.dtype(), self.dtype()), op.name, ": result type ", dtype_name(r.dtype()),
               " can't be cast to the desired output type ", dtype_name(self.dtype()));
  r = convert_operand(r, self.dtype());
  return record ? with_history(r, src) : r;
}

/// Step 4 of Note [In-place ops]: self's (or its base's) history after the write of `r`.
void rebase_history(Tensor& self, const Tensor& r) {
  if (autograd::is_view(self)) {
    autograd::rebase_view_history(self, r);
    return;
  }
  ::strata::detail::AutogradMeta& m = self.autograd_meta();
  m.grad_fn = r.grad_fn();
  m.output_nr = r.output_nr();
}

/// add_/sub_ with a number: PyTorch's promotion of the number, alpha applied when it is not 1.
Tensor add_scalar(const Tensor& a, Scalar s, Scalar alpha, bool subtract) {
  const bool unit_alpha = !alpha.is_floating() && alpha.to_double() == 1.0;
  if (unit_alpha) return subtract ? sub(a, s) : add(a, s);
  const Tensor b = scalar_tensor(s, result_type(a, s));
  return subtract ? sub(a, b, alpha) : add(a, b, alpha);
}

}  // namespace

void check_in_place(const Tensor& self, const char* op) {
  check_defined(op, self, "self");
  STRATA_CHECK(!autograd::has_internal_overlap(self),
               "unsupported operation: more than one element of the written-to tensor refers to a single memory "
               "location. Please clone() the tensor before performing the operation. (",
               op, " on ", self.describe(), ")");
  if (!autograd::GradMode::is_enabled()) return;
  if (autograd::is_view(self)) {
    const Tensor base = autograd::view_base(self);
    STRATA_CHECK(!(base.is_leaf() && base.requires_grad()),
                 "a view of a leaf Variable that requires grad is being used in an in-place operation. (", op, " on ",
                 self.describe(), ", a view of ", base.describe(), "; use `with strata.no_grad():` or clone())");
  }
  STRATA_CHECK(!(self.is_leaf() && self.requires_grad()),
               "a leaf Variable that requires grad is being used in an in-place operation. (", op, " on ",
               self.describe(), "; use `with strata.no_grad():` or detach())");
}

Tensor& apply_in_place(Tensor& self, const InPlaceOp& op) {
  check_in_place(self, op.name);
  const bool record = autograd::GradMode::is_enabled() && (self.requires_grad() || op.other_requires_grad);
  if (!record && op.direct) {
    op.direct(self);
    self.bump_version();
    return self;
  }
  const Tensor r = in_place_result(self, op, record);
  {
    autograd::NoGradGuard no_grad;
    self.copy_(r);
  }
  if (record) rebase_history(self, r);
  return self;
}

Tensor& add_(Tensor& self, const Tensor& other, Scalar alpha) {
  check_defined("add_", other, "other");
  return apply_in_place(
      self, {"add_", [&](const Tensor& a) { return add(a, other, alpha); }, false, other.requires_grad(), {}});
}

Tensor& add_(Tensor& self, Scalar other, Scalar alpha) {
  return apply_in_place(
      self, {"add_", [&](const Tensor& a) { return add_scalar(a, other, alpha, false); }, false, false, {}});
}

Tensor& sub_(Tensor& self, const Tensor& other, Scalar alpha) {
  check_defined("sub_", other, "other");
  return apply_in_place(
      self, {"sub_", [&](const Tensor& a) { return sub(a, other, alpha); }, false, other.requires_grad(), {}});
}

Tensor& sub_(Tensor& self, Scalar other, Scalar alpha) {
  return apply_in_place(self,
                        {"sub_", [&](const Tensor& a) { return add_scalar(a, other, alpha, true); }, false, false, {}});
}

// mul and div save their first operand only when the second needs a gradient.
Tensor& mul_(Tensor& self, const Tensor& other) {
  check_defined("mul_", other, "other");
  const bool g = other.requires_grad();
  return apply_in_place(self, {"mul_", [&](const Tensor& a) { return mul(a, other); }, g, g, {}});
}

Tensor& mul_(Tensor& self, Scalar other) {
  return apply_in_place(self, {"mul_", [&](const Tensor& a) { return mul(a, other); }, false, false, {}});
}

Tensor& div_(Tensor& self, const Tensor& other) {
  check_defined("div_", other, "other");
  const bool g = other.requires_grad();
  return apply_in_place(self, {"div_", [&](const Tensor& a) { return div(a, other); }, g, g, {}});
}

Tensor& div_(Tensor& self, Scalar other) {
  return apply_in_place(self, {"div_", [&](const Tensor& a) { return div(a, other); }, false, false, {}});
}

Tensor& clamp_(Tensor& self, std::optional<double> min, std::optional<double> max) {
  return apply_in_place(self, {"clamp_", [&](const Tensor& a) { return clamp(a, min, max); }, true, false, {}});
}

Tensor& copy_(Tensor& self, const Tensor& src) {
  check_defined("copy_", src, "src");
  // src broadcast to self and converted, recorded as PyTorch's CopyBackwards (Note [In-place ops]).
  auto compute = [&](const Tensor& a) {
    Tensor out = src.detach().expand(a.sizes());
    if (out.dtype() != a.dtype()) out = out.to(a.dtype());
    if (!autograd::needs_grad({&a, &src})) return out;
    const Dims a_sizes = a.sizes(), src_sizes = src.sizes();
    const DType a_dtype = a.dtype(), src_dtype = src.dtype();
    auto node = autograd::make_node(
        "CopyBackwards", {&a, &src},
        [a_sizes, a_dtype, src_sizes, src_dtype](autograd::Node& n, const TensorList& g) -> TensorList {
          return {n.needs_input_grad(0) ? zeros(a_sizes, {a_dtype, nullptr}) : Tensor(),
                  n.needs_input_grad(1) ? sum_to_shape(g[0], src_sizes).to(src_dtype) : Tensor()};
        });
    autograd::set_history({&out}, node);
    return out;
  };
  return apply_in_place(self, {"copy_", compute, false, src.requires_grad(), [&](Tensor& s) { s.copy_(src); }});
}

Tensor& fill_(Tensor& self, Scalar value) {
  auto constant = [&](const Tensor& a) { return scalar_tensor(value, a.dtype()).expand(a.sizes()); };
  return apply_in_place(
      self, {"fill_", constant, false, false, [&](Tensor& s) { s.copy_(scalar_tensor(value, s.dtype())); }});
}

Tensor& zero_(Tensor& self) { return fill_(self, 0); }

}  // namespace strata
