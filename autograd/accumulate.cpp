#include "autograd/accumulate.h"

#include <type_traits>

#include "core/detail/strided_loop.h"
#include "core/factories.h"
#include "core/pin_set.h"

namespace strata::autograd::detail {

namespace {

void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  STRATA_CHECK(a.sizes() == b.sizes() && a.dtype() == b.dtype(), "autograd ", op, ": gradient ", b.describe(),
               " does not match ", a.describe());
  STRATA_CHECK(is_floating(a.dtype()), "autograd ", op, ": gradients must be floating point, got ", a.describe());
}

template <typename T>
void add_rows(Tensor out, const Tensor& a, const Tensor& b) {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  ::strata::detail::StridedOperands<3> ops;
  ops.sizes = out.sizes();
  const Tensor* ts[3] = {&out, &a, &b};
  for (int k = 0; k < 3; ++k) {
    Dims st;
    for (int64_t s : ts[k]->strides()) st.push_back(s * static_cast<int64_t>(sizeof(T)));
    ops.strides[k] = st;
    ops.base[k] = static_cast<char*>(ts[k]->data_ptr());
  }
  ::strata::detail::for_each_row<3>(
      ops, [](const std::array<char*, 3>& p, const std::array<int64_t, 3>& st, int64_t n) {
        char* o = p[0];
        const char* x = p[1];
        const char* y = p[2];
        if (st[0] == sizeof(T) && st[1] == sizeof(T) && st[2] == sizeof(T)) {
          T* oo = reinterpret_cast<T*>(o);
          const T* xx = reinterpret_cast<const T*>(x);
          const T* yy = reinterpret_cast<const T*>(y);
          for (int64_t i = 0; i < n; ++i) oo[i] = static_cast<T>(static_cast<Acc>(xx[i]) + static_cast<Acc>(yy[i]));
          return;
        }
        for (int64_t i = 0; i < n; ++i) {
          *reinterpret_cast<T*>(o + i * st[0]) =
              static_cast<T>(static_cast<Acc>(*reinterpret_cast<const T*>(x + i * st[1])) +
                             static_cast<Acc>(*reinterpret_cast<const T*>(y + i * st[2])));
        }
      });
}

void add(const Tensor& out, const Tensor& a, const Tensor& b) {
  PinSet pins;
  pins.add(a, AccessMode::Read).add(b, AccessMode::Read).add(out, AccessMode::Write);
  pins.acquire();
  switch (out.dtype()) {
    case DType::f32: add_rows<float>(out, a, b); break;
    case DType::f64: add_rows<double>(out, a, b); break;
    case DType::bf16: add_rows<BFloat16>(out, a, b); break;
    case DType::f16: add_rows<Half>(out, a, b); break;
    default: STRATA_ASSERT(false, "autograd add: unexpected dtype ", out.dtype());
  }
}

}  // namespace

Tensor sum_gradients(const Tensor& a, const Tensor& b) {
  check_pair("sum_gradients", a, b);
  Tensor out = empty(a.sizes(), {a.dtype(), nullptr});
  add(out, a, b);
  return out;
}

void accumulate_into(const Tensor& acc, const Tensor& g) {
  check_pair("accumulate_into", acc, g);
  add(acc, acc, g);
  acc.bump_version();
}

}  // namespace strata::autograd::detail
