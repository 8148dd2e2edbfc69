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

/// Re-enables recording inside a NoGradGuard scope.
class EnableGradGuard : public GradModeGuard {
 public:
  EnableGradGuard() : GradModeGuard(true) {}
};

}  // namespace strata::autograd
