#include "models/module.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "core/error.h"

namespace strata::nn {

namespace {

/// Identity of a tensor handle (not of its storage): every copy of a handle shares the TensorImpl
/// and with it the autograd record, so the record's address identifies the parameter object the
/// way Python's `id(param)` does in PyTorch's de-duplication.
const void* tensor_identity(const Tensor& t) { return &t.autograd_meta(); }

std::string join_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

/// PyTorch's `_addindent`: indents every line but the first.
std::string add_indent(const std::string& s, int spaces) {
  std::string out;
  const std::string pad(static_cast<std::size_t>(spaces), ' ');
  for (char c : s) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

}  // namespace

std::string py_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form, then Python's layout rule: scientific when the
  // decimal exponent is < -4 or >= 16, fixed otherwise, with ".0" on integral values.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const std::size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp10 = std::atoi(sci.c_str() + e + 1);
  bool neg = false;
  if (!mant.empty() && mant[0] == '-') neg = true, mant.erase(0, 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exp10 < -4 || exp10 >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out.append(".").append(digits, 1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  } else if (exp10 < 0) {
    out.assign("0.");
    out.append(static_cast<std::size_t>(-exp10 - 1), '0');
    out.append(digits);
  } else {
    const std::size_t int_len = static_cast<std::size_t>(exp10) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  if (neg) out.insert(out.begin(), '-');
  return out;
}

std::string Size2::tuple_repr() const { return "(" + std::to_string(h) + ", " + std::to_string(w) + ")"; }

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

Module::~Module() = default;

Tensor Module::forward(const Tensor&) { STRATA_FAIL(type_name_, " has no forward(Tensor)"); }

// ---- registries ---------------------------------------------------------------------------------

void Module::check_new_name(const std::string& name, const char* what, int kind) const {
  STRATA_CHECK(!name.empty(), type_name_, ".", what, ": the name must not be empty");
  STRATA_CHECK(name.find('.') == std::string::npos, type_name_, ".", what, ": name '", name,
               "' must not contain \".\"");
  // kind: 0 parameter, 1 buffer, 2 module; re-registering the same kind replaces.
  STRATA_CHECK(kind == 0 || !has_parameter(name), type_name_, ".", what, ": '", name, "' is already a parameter");
  STRATA_CHECK(kind == 1 || !has_buffer(name), type_name_, ".", what, ": '", name, "' is already a buffer");
  STRATA_CHECK(kind == 2 || !has_child(name), type_name_, ".", what, ": '", name, "' is already a child module");
}

Module::TensorSlot* Module::find_slot(std::vector<TensorSlot>& slots, const std::string& name) {
  for (auto& s : slots) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const Module::TensorSlot* Module::find_slot(const std::vector<TensorSlot>& slots, const std::string& name) const {
  for (const auto& s : slots) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Tensor& Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
  check_new_name(name, "register_parameter", 0);
  if (value.defined()) {
    STRATA_CHECK(value.is_leaf(), type_name_, ".register_parameter: '", name,
                 "' must be a leaf tensor (use detach() on a computed tensor)");
    if (requires_grad) {
      STRATA_CHECK(is_floating(value.dtype()), type_name_, ".register_parameter: '", name,
                   "' needs a floating dtype to require grad, got ", value.dtype());
    }
    value.set_requires_grad(requires_grad);
  }
  if (TensorSlot* s = find_slot(parameters_, name)) {
    s->value = std::move(value);
    return s->value;
  }
  parameters_.push_back({name, std::move(value), true});
  return parameters_.back().value;
}

Tensor& Module::register_buffer(const std::string& name, Tensor value, bool persistent) {
  check_new_name(name, "register_buffer", 1);
  if (TensorSlot* s = find_slot(buffers_, name)) {
    s->value = std::move(value);
    s->persistent = persistent;
    return s->value;
  }
  buffers_.push_back({name, std::move(value), persistent});
  return buffers_.back().value;
}

std::shared_ptr<Module> Module::register_module(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "register_module", 2);
  STRATA_CHECK(module != nullptr, type_name_, ".register_module: child '", name, "' is null");
  STRATA_CHECK(module.get() != this, type_name_, ".register_module: a module cannot be its own child ('", name, "')");
  for (auto& c : children_) {
    if (c.name == name) {
      c.module = module;
      return module;
    }
  }
  children_.push_back({name, module});
  return module;
}

bool Module::unregister(const std::string& name) {
  auto erase_from = [&](auto& v) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it->name == name) {
        v.erase(it);
        return true;
      }
    }
    return false;
  };
  return erase_from(parameters_) || erase_from(buffers_) || erase_from(children_);
}

bool Module::has_parameter(const std::string& name) const { return find_slot(parameters_, name) != nullptr; }
bool Module::has_buffer(const std::string& name) const { return find_slot(buffers_, name) != nullptr; }
bool Module::has_child(const std::string& name) const {
  for (const auto& c : children_) {
    if (c.name == name) return true;
  }
  return false;
}

Tensor& Module::parameter(const std::string& name) {
  TensorSlot* s = find_slot(parameters_, name);
  STRATA_CHECK(s != nullptr, type_name_, " has no parameter '", name, "'");
  return s->value;
}
const Tensor& Module::parameter(const std::string& name) const { return const_cast<Module*>(this)->parameter(name); }
Tensor& Module::buffer(const std::string& name) {
  TensorSlot* s = find_slot(buffers_, name);
  STRATA_CHECK(s != nullptr, type_name_, " has no buffer '", name, "'");
  return s->value;
}
const Tensor& Module::buffer(const std::string& name) const { return const_cast<Module*>(this)->buffer(name); }

bool Module::is_persistent_buffer(const std::string& name) const {
  const TensorSlot* s = find_slot(buffers_, name);
  STRATA_CHECK(s != nullptr, type_name_, " has no buffer '", name, "'");
  return s->persistent;
}

std::shared_ptr<Module> Module::child(const std::string& name) const {
  for (const auto& c : children_) {
    if (c.name == name) return c.module;
  }
  STRATA_FAIL(type_name_, " has no child module '", name, "'");
}

// ---- traversals ---------------------------------------------------------------------------------

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules(const std::string& prefix) {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::unordered_set<const Module*> seen;
  // Pre-order; a module reached again under another name is skipped (with its subtree).
  struct Walk {
    std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out;
    std::unordered_set<const Module*>& seen;
    void operator()(const std::shared_ptr<Module>& m, const std::string& p) {
      if (!seen.insert(m.get()).second) return;
      out.emplace_back(p, m);
      for (const auto& c : m->children_) (*this)(c.module, join_name(p, c.name));
    }
  } walk{out, seen};
  std::shared_ptr<Module> self;
  try {
    self = shared_from_this();
  } catch (const std::bad_weak_ptr&) {
    // Not owned by a shared_ptr (e.g. a module on the stack): a non-owning handle for the walk.
    self = std::shared_ptr<Module>(std::shared_ptr<Module>(), this);
  }
  walk(self, prefix);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules() {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [n, m] : named_modules()) out.push_back(m);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::unordered_set<const Module*> seen;
  for (const auto& c : children_) {
    if (seen.insert(c.module.get()).second) out.emplace_back(c.name, c.module);
  }
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [n, m] : named_children()) out.push_back(m);
  return out;
}

// named_parameters / named_buffers: the defined tensors of one registry of this module and (with
// `recurse`) of its descendants in pre-order, each tensor once.
std::vector<std::pair<std::string, Tensor>> Module::named_slots(std::vector<TensorSlot> Module::* registry,
                                                                const std::string& prefix, bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const void*> seen;
  auto take = [&](const Module& m, const std::string& p) {
    for (const auto& s : m.*registry) {
      if (s.value.defined() && seen.insert(tensor_identity(s.value)).second) {
        out.emplace_back(join_name(p, s.name), s.value);
      }
    }
  };
  if (!recurse) {
    take(*this, prefix);
    return out;
  }
  for (auto& [p, m] : const_cast<Module*>(this)->named_modules(prefix)) take(*m, p);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(const std::string& prefix, bool recurse) const {
  return named_slots(&Module::parameters_, prefix, recurse);
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters("", recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(const std::string& prefix, bool recurse) const {
  return named_slots(&Module::buffers_, prefix, recurse);
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers("", recurse)) out.push_back(t);
  return out;
}

// ---- modes --------------------------------------------------------------------------------------

Module& Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.module->train(on);
  return *this;
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.set_grad(Tensor());
}

// ---- state --------------------------------------------------------------------------------------

void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (const auto& s : parameters_) {
    if (s.value.defined()) out.emplace_back(prefix + s.name, s.value.detach());
  }
  for (const auto& s : buffers_) {
    if (s.value.defined() && s.persistent) out.emplace_back(prefix + s.name, s.value.detach());
  }
  for (const auto& c : children_) c.module->collect_state(prefix + c.name + ".", out);
}

StateDict Module::state_dict() const {
  StateDict out;
  collect_state("", out);
  return out;
}

struct Module::Expected {
  std::string key;
  Tensor target;
  bool optional;
};

void Module::collect_expected(const std::string& prefix, std::vector<Expected>& out) {
  for (auto& s : parameters_) {
    if (s.value.defined()) out.push_back({prefix + s.name, s.value, missing_key_ok(s.name)});
  }
  for (auto& s : buffers_) {
    if (s.value.defined() && s.persistent) out.push_back({prefix + s.name, s.value, missing_key_ok(s.name)});
  }
  for (auto& c : children_) c.module->collect_expected(prefix + c.name + ".", out);
}

bool Module::missing_key_ok(const std::string&) const { return false; }

LoadResult Module::load_state_dict(const StateDict& state, bool strict) {
  std::vector<std::pair<Tensor, Tensor>> copies;  // (target, source)
  LoadResult result = plan_load(state, strict, copies);
  autograd::NoGradGuard no_grad;
  for (auto& [target, src] : copies) {
    Tensor dst = target;  // the handle shares the parameter's TensorImpl: copy_ writes in place
    dst.copy_(src);
  }
  return result;
}

LoadResult Module::check_state_dict(const StateDict& state, bool strict) {
  std::vector<std::pair<Tensor, Tensor>> copies;
  return plan_load(state, strict, copies);
}

LoadResult Module::plan_load(const StateDict& state, bool strict, std::vector<std::pair<Tensor, Tensor>>& copies) {
  std::vector<Expected> expected;
  collect_expected("", expected);

  LoadResult result;
  std::vector<std::string> errors;
  std::set<std::string> expected_keys;
  for (const Expected& e : expected) {
    expected_keys.insert(e.key);
    const Tensor* src = state_find(state, e.key);
    if (src == nullptr || !src->defined()) {
      if (!e.optional) result.missing_keys.push_back(e.key);
      continue;
    }
    if (!(src->sizes() == e.target.sizes())) {
      errors.push_back("size mismatch for " + e.key + ": copying a param with shape " +
                       strata::to_string(src->sizes()) + " from checkpoint, the shape in current model is " +
                       strata::to_string(e.target.sizes()) + ".");
      continue;
    }
    copies.emplace_back(e.target, *src);
  }
  std::set<std::string> seen_unexpected;
  for (const auto& [k, t] : state) {
    if (!expected_keys.count(k) && seen_unexpected.insert(k).second) result.unexpected_keys.push_back(k);
  }

  std::vector<std::string> all_errors;
  auto quoted = [](const std::vector<std::string>& keys) {
    std::string s;
    for (std::size_t i = 0; i < keys.size(); ++i) s += (i ? ", \"" : "\"") + keys[i] + "\"";
    return s;
  };
  if (strict && !result.missing_keys.empty()) {
    all_errors.push_back("Missing key(s) in state_dict: " + quoted(result.missing_keys) + ". ");
  }
  if (strict && !result.unexpected_keys.empty()) {
    all_errors.push_back("Unexpected key(s) in state_dict: " + quoted(result.unexpected_keys) + ". ");
  }
  all_errors.insert(all_errors.end(), errors.begin(), errors.end());
  if (!all_errors.empty()) {
    std::string msg = "Error(s) in loading state_dict for " + type_name_ + ":";
    for (const auto& e : all_errors) msg += "\n\t" + e;
    STRATA_FAIL(msg);
  }
  return result;
}

// ---- printing -----------------------------------------------------------------------------------

std::string Module::extra_repr() const { return ""; }

std::string Module::to_string() const {
  std::vector<std::string> extra_lines;
  const std::string extra = extra_repr();
  if (!extra.empty()) {
    std::stringstream ss(extra);
    std::string line;
    while (std::getline(ss, line)) extra_lines.push_back(line);
  }
  std::vector<std::string> child_lines;
  for (const auto& c : children_) {
    child_lines.push_back("(" + c.name + "): " + add_indent(c.module->to_string(), 2));
  }
  std::string out = type_name_ + "(";
  if (!extra_lines.empty() || !child_lines.empty()) {
    if (extra_lines.size() == 1 && child_lines.empty()) {
      out += extra_lines[0];
    } else {
      out += "\n";
      for (const auto& l : extra_lines) out += "  " + l + "\n";
      for (const auto& l : child_lines) out += "  " + l + "\n";
    }
  }
  out += ")";
  return out;
}

}  // namespace strata::nn
