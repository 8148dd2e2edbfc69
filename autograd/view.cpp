#include "autograd/view.h"

#include <mutex>
#include <utility>

#include "core/factories.h"

namespace strata::autograd {

namespace {

/// Where a tensor's elements sit in its storage (the as_strided geometry).
struct Geometry {
  Dims sizes, strides;
  int64_t offset = 0;
  explicit Geometry(const Tensor& t) : sizes(t.sizes()), strides(t.strides()), offset(t.offset()) {}
};

/// Elements from the first to one past the last the geometry addresses (0 when it has none).
int64_t span(const Geometry& g) {
  int64_t last = 0;
  for (std::size_t d = 0; d < g.sizes.size(); ++d) {
    if (g.sizes[d] == 0) return 0;
    last += (g.sizes[d] - 1) * g.strides[d];
  }
  return last + 1;
}

/// A zeroed buffer standing for the base's storage region: `base` is the base's elements in it,
/// `region` the view's.
struct BaseBuffer {
  Tensor base, region;
};

BaseBuffer base_buffer(const Geometry& base, const Geometry& view, DType dtype) {
  const Tensor flat = zeros({span(base)}, {dtype, nullptr});
  return {flat.as_strided(base.sizes, base.strides, 0),
          flat.as_strided(view.sizes, view.strides, view.offset - base.offset)};
}

/// The gradient of a view, in zeros shaped as its base (AsStridedBackward's backward).
Tensor view_grad_to_base(const Tensor& g, const Geometry& base, const Geometry& view) {
  BaseBuffer buf = base_buffer(base, view, g.dtype());
  buf.region.copy_(g);
  return buf.base.is_contiguous() ? buf.base : buf.base.contiguous();
}

/// The view's history as a function of its base's current one (Note [View tracking]).
void regenerate(::strata::detail::AutogradMeta& m, const Tensor& view) {
  m.view_version = view.version();
  const Tensor base = m.view_base;
  if (!base.requires_grad()) {
    m.grad_fn = nullptr;
    m.output_nr = 0;
    return;
  }
  const Geometry bg(base), vg(view);
  auto node = make_node("AsStridedBackward", {&base}, [bg, vg](Node&, const TensorList& g) -> TensorList {
    return {view_grad_to_base(g[0], bg, vg)};
  });
  node->add_output(view);
  m.grad_fn = std::move(node);
  m.output_nr = 0;
}

void install_refresh() {
  static std::once_flag once;
  std::call_once(once, [] { ::strata::detail::set_view_refresh(&refresh_view); });
}

}  // namespace

bool is_view(const Tensor& t) {
  const ::strata::detail::AutogradMeta* m = t.defined() ? t.autograd_meta_if_any() : nullptr;
  return m != nullptr && m->view_base.defined();
}

Tensor view_base(const Tensor& t) { return is_view(t) ? t.autograd_meta_if_any()->view_base : Tensor(); }

bool has_internal_overlap(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) == 0 && t.size(d) > 1) return true;
  return false;
}

void mark_view(Tensor& out, const Tensor& in) {
  if (!GradMode::is_enabled() || out.is_same(in) || !out.shares_storage(in) || has_internal_overlap(out)) return;
  install_refresh();
  ::strata::detail::AutogradMeta& m = out.autograd_meta();
  m.view_base = is_view(in) ? view_base(in) : in;
  m.view_version = out.version();
}

void refresh_view(const Tensor& view) {
  ::strata::detail::AutogradMeta* m = view.autograd_meta_if_any();
  if (m == nullptr || !m->view_base.defined() || m->view_version == view.version()) return;
  regenerate(*m, view);
}

void rebase_view_history(const Tensor& view, const Tensor& value) {
  const Tensor base = view_base(view);
  STRATA_ASSERT(base.defined(), "rebase_view_history: ", view.describe(), " is not a tracked view");
  const Geometry bg(base), vg(view);
  auto node = make_node("CopySlices", {&base, &value}, [bg, vg](Node& n, const TensorList& g) -> TensorList {
    BaseBuffer buf = base_buffer(bg, vg, g[0].dtype());
    buf.base.copy_(g[0]);
    Tensor g_value = n.needs_input_grad(1) ? buf.region.clone() : Tensor();
    if (!n.needs_input_grad(0)) return {Tensor(), g_value};
    buf.region.zero_();
    return {buf.base.is_contiguous() ? buf.base : buf.base.contiguous(), g_value};
  });
  ::strata::detail::AutogradMeta& bm = base.autograd_meta();
  bm.grad_fn = node;
  bm.output_nr = 0;
  node->add_output(base);
  regenerate(view.autograd_meta(), view);
}

}  // namespace strata::autograd
