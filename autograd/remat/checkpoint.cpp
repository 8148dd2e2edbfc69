#include "autograd/remat/checkpoint.h"

#include <any>
#include <memory>
#include <string>
#include <utility>

#include "autograd/saved_tensor.h"
#include "core/error.h"
#include "core/rng.h"

namespace strata::remat {

namespace {

thread_local int recompute_depth = 0;

// One checkpointed segment (Note [Checkpointed segments]). Owned by the hooks its saved values
// were packed with, so it lives exactly as long as some SavedTensor of the segment does.
struct Frame {
  SegmentFn fn;
  std::shared_ptr<autograd::Node> input_saver;  // never runs; holds the inputs as saved values
  std::vector<bool> input_requires_grad;
  bool preserve_rng = true;
  detail::RngState rng;
  std::vector<autograd::TensorMeta> originals;  // shape and dtype of each value, in save order
  std::vector<bool> handle_alive;               // false once the SavedTensor holding it was released
  TensorList recomputed;                        // filled by the re-run, emptied as handles die
  bool recomputed_done = false;
  bool recomputing = false;
};

// What a pack hook leaves in place of a segment value.
struct Handle {
  std::shared_ptr<Frame> frame;
  std::size_t index;
  Handle(std::shared_ptr<Frame> f, std::size_t i) : frame(std::move(f)), index(i) {}
  ~Handle() {
    frame->handle_alive[index] = false;
    frame->recomputed[index] = Tensor();
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

void recompute(Frame& f) {
  STRATA_CHECK(!f.recomputing,
               "checkpoint: a value saved inside the checkpointed function was needed while that function "
               "was being recomputed (the function differentiates through its own saved values?)");
  TensorList inputs;
  inputs.reserve(f.input_requires_grad.size());
  for (std::size_t i = 0; i < f.input_requires_grad.size(); ++i) {
    Tensor x = f.input_saver->saved(i);
    if (x.defined()) {
      x = x.detach();
      if (f.input_requires_grad[i]) x.set_requires_grad(true);
    }
    inputs.push_back(std::move(x));
  }

  std::size_t count = 0;
  std::vector<uint64_t> versions(f.originals.size(), 0);
  auto capture = autograd::make_saved_tensor_hooks(
      [&f, &count, &versions](const Tensor& value) -> std::any {
        const std::size_t i = count++;
        STRATA_CHECK(i < f.originals.size(),
                     "checkpoint: the recomputation saved more values for backward than the "
                     "original forward did (",
                     f.originals.size(), "); the checkpointed function must be deterministic");
        const autograd::TensorMeta& m = f.originals[i];
        STRATA_CHECK(value.sizes() == m.sizes && value.dtype() == m.dtype, "checkpoint: value ", i,
                     " saved by the recomputation has shape ", value.sizes(), " ", value.dtype(),
                     ", but the original forward saved shape ", IntArrayRef(m.sizes), " ", m.dtype,
                     "; the checkpointed function must be deterministic");
        if (f.handle_alive[i]) {
          f.recomputed[i] = value;
          versions[i] = value.version();
        }
        return std::any();
      },
      [](std::any&) -> Tensor {
        STRATA_FAIL("checkpoint: internal error: the recomputation's own graph was differentiated");
      });

  f.recomputing = true;
  struct Reset {
    Frame& f;
    ~Reset() { f.recomputing = false; }
  } reset{f};
  {
    const detail::RngState saved_rng = detail::RngState::current();
    struct RestoreRng {
      const detail::RngState& s;
      bool active;
      ~RestoreRng() {
        if (active) s.restore();
      }
    } restore{saved_rng, f.preserve_rng};
    if (f.preserve_rng) f.rng.restore();
    detail::RecomputeScope scope;
    autograd::SavedTensorHooksGuard guard(capture);
    autograd::EnableGradGuard grad_on;
    TensorList discarded = f.fn(inputs);
    (void)discarded;
  }
  STRATA_CHECK(count == f.originals.size(), "checkpoint: the original forward saved ", f.originals.size(),
               " values for backward but the recomputation saved ", count,
               "; the checkpointed function must be deterministic");
  for (std::size_t i = 0; i < f.recomputed.size(); ++i) {
    STRATA_CHECK(!f.recomputed[i].defined() || f.recomputed[i].version() == versions[i], "checkpoint: value ", i,
                 " saved by the recomputation (shape ", f.recomputed[i].sizes(),
                 ") was modified in place after it was saved; clone it before modifying it");
  }
  f.recomputed_done = true;
}

}  // namespace

namespace detail {

RecomputeScope::RecomputeScope() { ++recompute_depth; }
RecomputeScope::~RecomputeScope() { --recompute_depth; }

RngState RngState::current() {
  Generator& g = default_generator();
  return {g.seed(), g.offset()};
}

void RngState::restore() const {
  Generator& g = default_generator();
  g.manual_seed(seed);
  g.set_offset(offset);
}

}  // namespace detail

bool in_recompute() { return recompute_depth > 0; }

TensorList checkpoint(SegmentFn fn, const TensorList& inputs, bool preserve_rng_state) {
  STRATA_CHECK(static_cast<bool>(fn), "checkpoint: the function to checkpoint is empty");
  if (!autograd::GradMode::is_enabled()) return fn(inputs);

  auto frame = std::make_shared<Frame>();
  frame->fn = std::move(fn);
  frame->preserve_rng = preserve_rng_state;
  if (preserve_rng_state) frame->rng = detail::RngState::current();
  // Saved under the enclosing hooks (an enclosing checkpoint recomputes them).
  frame->input_saver = autograd::make_node("CheckpointInputs", TensorList{},
                                           [](autograd::Node&, const TensorList&) -> TensorList { return {}; });
  for (const Tensor& x : inputs) {
    frame->input_saver->save(x);
    frame->input_requires_grad.push_back(x.defined() && x.requires_grad());
  }

  std::weak_ptr<Frame> weak = frame;
  auto hooks = autograd::make_saved_tensor_hooks(
      [weak](const Tensor& value) -> std::any {
        std::shared_ptr<Frame> f = weak.lock();
        STRATA_ASSERT(f != nullptr, "checkpoint: a value was saved into a segment that no longer exists");
        const std::size_t i = f->originals.size();
        f->originals.push_back({value.sizes(), value.dtype()});
        f->handle_alive.push_back(true);
        f->recomputed.emplace_back();
        return std::make_shared<Handle>(std::move(f), i);
      },
      [](std::any& packed) -> Tensor {
        auto handle = std::any_cast<std::shared_ptr<Handle>>(packed);
        Frame& f = *handle->frame;
        if (!f.recomputed_done) recompute(f);
        const Tensor& t = f.recomputed[handle->index];
        STRATA_ASSERT(t.defined(), "checkpoint: recomputed value ", handle->index, " is missing");
        return t;
      });
  // The handles own the frame; the hooks only observe it (no cycle). Keep the frame alive until
  // the forward returns, even if nothing was saved.
  TensorList outputs;
  {
    autograd::SavedTensorHooksGuard guard(hooks);
    outputs = frame->fn(inputs);
  }
  return outputs;
}

Tensor checkpoint_sequential(const std::vector<StepFn>& functions, int64_t segments, const Tensor& input,
                             bool preserve_rng_state) {
  const auto n = static_cast<int64_t>(functions.size());
  STRATA_CHECK(n >= 1, "checkpoint_sequential: no functions to run");
  STRATA_CHECK(segments >= 1, "checkpoint_sequential: segments must be at least 1, got ", segments);
  STRATA_CHECK(segments <= n, "checkpoint_sequential: ", segments, " segments requested for ", n,
               " functions; segments must be between 1 and the number of functions");
  for (int64_t i = 0; i < n; ++i)
    STRATA_CHECK(static_cast<bool>(functions[i]), "checkpoint_sequential: function ", i, " is empty");
  const int64_t size = n / segments;
  Tensor x = input;
  int64_t start = 0;
  for (int64_t s = 0; s + 1 < segments; ++s, start += size) {
    // The segment keeps its own copies of the closures: it may be re-run after the caller's
    // vector is gone.
    std::vector<StepFn> part(functions.begin() + start, functions.begin() + start + size);
    SegmentFn run = [part = std::move(part)](const TensorList& in) -> TensorList {
      Tensor y = in[0];
      for (const StepFn& f : part) y = f(y);
      return {y};
    };
    x = checkpoint(std::move(run), {x}, preserve_rng_state)[0];
  }
  for (int64_t i = start; i < n; ++i) x = functions[i](x);
  return x;
}

}  // namespace strata::remat
