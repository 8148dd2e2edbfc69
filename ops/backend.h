#pragma once
/// @file
/// The backend interface: which implementation runs the ops, with a capability query.
///
/// The CPU backend (oneDNN primitives where oneDNN has them, our TBB kernels elsewhere) supports
/// every op and is the reference. A second backend (ops/sim, the simulated accelerator) registers
/// itself by name; while it is selected, an op it does not support fails with an error naming the
/// op and the backend instead of silently running elsewhere.

#include <string>
#include <string_view>
#include <vector>

#include "ops/op_list.h"

namespace strata {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  /// True when this backend can run `op` (forward and backward).
  virtual bool supports(OpKind op) const = 0;
  /// What implements `op` here, for reports ("oneDNN convolution", "Strata kernel (TBB)").
  virtual std::string implementation(OpKind op) const = 0;
};

/// The CPU backend (always registered, the default).
Backend& cpu_backend();
/// Makes a backend selectable by name; the backend must outlive the process's use of it.
void register_backend(Backend& backend);
/// Null if no backend has that name.
Backend* find_backend(std::string_view name);
std::vector<std::string> backend_names();

/// The backend ops run on, per thread (CPU unless a BackendGuard says otherwise).
Backend& current_backend();

/// Selects a backend for this thread until destroyed.
class BackendGuard {
 public:
  explicit BackendGuard(Backend& backend);
  /// By registered name; throws strata::Error listing the known backends.
  explicit BackendGuard(std::string_view name);
  ~BackendGuard();
  BackendGuard(const BackendGuard&) = delete;
  BackendGuard& operator=(const BackendGuard&) = delete;

 private:
  Backend* previous_;
};

namespace ops::detail {
/// Called at the entry of every op: throws unless the current backend supports `op`.
void check_backend(OpKind op);
}  // namespace ops::detail

}  // namespace strata
