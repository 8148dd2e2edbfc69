#include "ops/backend.h"

#include <algorithm>
#include <mutex>
#include <sstream>

#include "core/error.h"

namespace strata {

namespace {

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  bool supports(OpKind) const override { return true; }
  std::string implementation(OpKind op) const override {
    switch (op) {
      case OpKind::matmul:
      case OpKind::linear:
      case OpKind::bmm: return "oneDNN sgemm (f32) / Strata blocked kernel (f64) + fused epilogue";
      case OpKind::conv2d: return "oneDNN convolution primitives (cached)";
      default: return "Strata kernel (TBB)";
    }
  }
};

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<Backend*>& registry() {
  static std::vector<Backend*> r{&cpu_backend()};
  return r;
}
thread_local Backend* current = nullptr;
thread_local ops::detail::OpRecorder* recorder = nullptr;

}  // namespace

Backend& cpu_backend() {
  static CpuBackend cpu;
  return cpu;
}

void register_backend(Backend& backend) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto& r = registry();
  for (Backend* b : r) {
    if (b == &backend) return;
    STRATA_CHECK(b->name() != backend.name(), "register_backend: a backend named '", backend.name(),
                 "' is already registered");
  }
  r.push_back(&backend);
}

Backend* find_backend(std::string_view name) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (Backend* b : registry())
    if (b->name() == name) return b;
  return nullptr;
}

std::vector<std::string> backend_names() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> out;
  for (Backend* b : registry()) out.emplace_back(b->name());
  return out;
}

Backend& current_backend() { return current != nullptr ? *current : cpu_backend(); }

BackendGuard::BackendGuard(Backend& backend) : previous_(current) { current = &backend; }

BackendGuard::BackendGuard(std::string_view name) : previous_(current) {
  Backend* b = find_backend(name);
  if (b == nullptr) {
    std::ostringstream known;
    for (const auto& n : backend_names()) known << " " << n;
    STRATA_FAIL("unknown backend '", name, "'; registered:", known.str());
  }
  current = b;
}

BackendGuard::~BackendGuard() { current = previous_; }

namespace ops::detail {
void check_backend(OpKind op) {
  if (current == nullptr) return;  // the CPU backend supports everything
  STRATA_CHECK(current->supports(op), op_name(op), ": not supported by the '", current->name(), "' backend");
}

OpRecorder* op_recorder() { return recorder; }

OpRecorder* set_op_recorder(OpRecorder* r) {
  OpRecorder* previous = recorder;
  recorder = r;
  return previous;
}
}  // namespace ops::detail

}  // namespace strata
