#pragma once
/// @file
/// Grad mode: whether ops record nodes. Thread-local, on by default; `NoGradGuard` turns it off for
/// a scope (like `torch.no_grad()`), `EnableGradGuard` turns it back on.

namespace strata::autograd {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

/// Restores the previous grad mode when it goes out of scope.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~GradModeGuard() { GradMode::set_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

/// No op records a node while one is alive (on this thread).
class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

/// Inference mode (`torch.inference_mode`): a scope in which grad mode is off and that code can
/// ask about (`is_inference_mode_enabled`). Thread-local, off by default. Unlike PyTorch, tensors
/// made inside are ordinary tensors (there are no "inference tensors"): they may be used with
/// autograd afterwards.
class InferenceMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

/// Turns inference mode on (or off) for a scope, with grad mode off while it is on, and restores
/// both.
class InferenceModeGuard {
 public:
  explicit InferenceModeGuard(bool enabled = true)
      : previous_(InferenceMode::is_enabled()), grad_(!enabled && GradMode::is_enabled()) {
    InferenceMode::set_enabled(enabled);
  }
  ~InferenceModeGuard() { InferenceMode::set_enabled(previous_); }
  InferenceModeGuard(const InferenceModeGuard&) = delete;
  InferenceModeGuard& operator=(const InferenceModeGuard&) = delete;

 private:
  bool previous_;
  GradModeGuard grad_;
};

/// Re-enables recording inside a NoGradGuard scope.
class EnableGradGuard : public GradModeGuard {
 public:
  EnableGradGuard() : GradModeGuard(true) {}
};

}  // namespace strata::autograd
