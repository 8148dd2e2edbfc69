#include "autograd/grad_mode.h"

namespace strata::autograd {

namespace {
thread_local bool grad_enabled = true;
thread_local bool inference_enabled = false;
}  // namespace

bool GradMode::is_enabled() { return grad_enabled; }
void GradMode::set_enabled(bool enabled) { grad_enabled = enabled; }

bool InferenceMode::is_enabled() { return inference_enabled; }
void InferenceMode::set_enabled(bool enabled) { inference_enabled = enabled; }

}  // namespace strata::autograd
