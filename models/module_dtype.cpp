#include "models/module_dtype.h"

#include "autograd/grad_mode.h"
#include "core/error.h"

namespace strata::nn {

namespace {

void convert(Tensor t, DType dtype) {
  if (!t.defined() || !is_floating(t.dtype()) || t.dtype() == dtype) return;
  t.set_data(t.to(dtype));
}

}  // namespace

void convert_floating(Module& module, DType dtype) {
  STRATA_CHECK(is_floating(dtype), module.type_name(), ".to: nn.Module.to only accepts floating point dtypes, but got ",
               dtype);
  autograd::NoGradGuard no_grad;
  for (const Tensor& p : module.parameters()) {
    convert(p, dtype);
    convert(p.grad(), dtype);
  }
  for (const Tensor& b : module.buffers()) convert(b, dtype);
}

}  // namespace strata::nn
