#include "models/optim/optimizer.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factories.h"

namespace strata::optim {

namespace detail {

std::string py_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // shortest round-trip digits: "-1.5e-03"
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const auto e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c != '.') digits += c;
  const int exp = std::atoi(sci.c_str() + e + 1);
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      std::string int_part = digits.substr(0, std::min<std::size_t>(digits.size(), exp + 1));
      while (static_cast<int>(int_part.size()) < exp + 1) int_part += '0';
      std::string frac = digits.size() > static_cast<std::size_t>(exp + 1) ? digits.substr(exp + 1) : "0";
      out = int_part + "." + frac;
    } else {
      out = "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += ebuf;
  }
  return sign + out;
}

double option(const Options& options, const char* key) {
  auto it = options.find(key);
  STRATA_ASSERT(it != options.end(), "optimizer option '", key, "' missing");
  return it->second;
}

}  // namespace detail

namespace {

// Two handles name the same parameter when they view the same elements of the same storage.
bool same_param(const Tensor& a, const Tensor& b) {
  return a.shares_storage(b) && a.offset() == b.offset() && a.sizes() == b.sizes() && a.strides() == b.strides();
}

std::string join_keys(const Options& options) {
  std::string out;
  for (const auto& [k, v] : options) out += (out.empty() ? "" : ", ") + k;
  return out;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Parses a non-negative decimal integer that makes up all of `s`.
bool parse_index(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  auto res = std::from_chars(s.data(), s.data() + s.size(), out);
  return res.ec == std::errc() && res.ptr == s.data() + s.size() && out >= 0;
}

// Runs check_options and prefixes its message with `where`.
template <typename Fn>
void with_context(const std::string& where, Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    throw Error(where + e.what());
  }
}

}  // namespace

Optimizer::Optimizer(std::string name, Options defaults) : name_(std::move(name)), defaults_(std::move(defaults)) {}

void Optimizer::init_groups(std::vector<ParamGroup> groups) {
  std::size_t total = 0;
  for (const auto& g : groups) total += g.params.size();
  STRATA_CHECK(total > 0, name_, ": optimizer got an empty parameter list");
  check_options(defaults_);
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::fill_and_check_group(ParamGroup& group, std::size_t gi) const {
  for (const auto& [key, value] : group.options) {
    STRATA_CHECK(defaults_.count(key) != 0, name_, ": unknown option '", key, "' in param group ", gi,
                 " (expected one of: ", join_keys(defaults_), ")");
  }
  for (const auto& [key, value] : defaults_) group.options.emplace(key, value);
  check_options(group.options);
  for (std::size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    STRATA_CHECK(p.defined(), name_, ": parameter ", i, " of param group ", gi, " is undefined");
    STRATA_CHECK(p.dtype() == DType::f32 || p.dtype() == DType::f64, name_, ": parameter ", i, " of param group ", gi,
                 " must be f32 or f64, got ", p.describe());
    STRATA_CHECK(p.is_leaf(), name_, ": can't optimize a non-leaf Tensor (parameter ", i, " of param group ", gi, ")");
    for (std::size_t j = 0; j < i; ++j) {
      STRATA_CHECK(!same_param(p, group.params[j]), name_, ": param group ", gi,
                   " contains a parameter twice (entries ", j, " and ", i, ")");
    }
    for (const auto& other : groups_) {
      for (const auto& q : other.params) {
        STRATA_CHECK(!same_param(p, q), name_, ": some parameters appear in more than one parameter group");
      }
    }
  }
}

void Optimizer::add_param_group(ParamGroup group) {
  fill_and_check_group(group, groups_.size());
  std::vector<ParamState> states(group.params.size());
  if (eager_state()) {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      init_state(group.params[i], group.options, states[i]);
      states[i].initialized = true;
    }
  }
  groups_.push_back(std::move(group));
  states_.push_back(std::move(states));
}

void Optimizer::check_group_options(const Options& options) const {
  for (const auto& [key, value] : options) {
    STRATA_CHECK(defaults_.count(key) != 0, name_, ": unknown option '", key,
                 "' (expected one of: ", join_keys(defaults_), ")");
  }
  STRATA_CHECK(options.size() == defaults_.size(), name_, ": options lack some of: ", join_keys(defaults_));
  check_options(options);
}

int64_t Optimizer::num_params() const {
  int64_t n = 0;
  for (const auto& g : groups_) n += static_cast<int64_t>(g.params.size());
  return n;
}

const ParamState& Optimizer::state(int64_t index) const {
  int64_t base = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const int64_t n = static_cast<int64_t>(states_[g].size());
    if (index >= base && index < base + n) return states_[g][index - base];
    base += n;
  }
  STRATA_FAIL(name_, ": parameter index ", index, " out of range (the optimizer has ", base, " parameters)");
}

void Optimizer::step() {
  // Validate everything first: a failed step leaves every parameter as it was.
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const ParamGroup& group = groups_[g];
    STRATA_CHECK(group.params.size() == states_[g].size(), name_, ".step: param group ", g, " now has ",
                 group.params.size(), " parameters but had ", states_[g].size(),
                 " (add parameters with add_param_group)");
    for (const auto& [key, value] : group.options) {
      STRATA_CHECK(defaults_.count(key) != 0, name_, ".step: unknown option '", key, "' in param group ", g,
                   " (expected one of: ", join_keys(defaults_), ")");
    }
    STRATA_CHECK(group.options.size() == defaults_.size(), name_, ".step: param group ", g,
                 " lacks options (expected all of: ", join_keys(defaults_), ")");
    with_context(name_ + ".step: param group " + std::to_string(g) + ": ", [&] { check_options(group.options); });
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      const Tensor& p = group.params[i];
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      STRATA_CHECK(grad.dtype() == p.dtype(), name_, ".step: gradient of parameter ", i, " of param group ", g,
                   " has dtype ", grad.dtype(), ", expected ", p.dtype(), " (the parameter's)");
      STRATA_CHECK(grad.sizes() == p.sizes(), name_, ".step: gradient of parameter ", i, " of param group ", g,
                   " has shape ", grad.sizes(), ", expected ", p.sizes(), " (the parameter's)");
    }
  }
  autograd::NoGradGuard no_grad;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const ParamGroup& group = groups_[g];
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      const Tensor& p = group.params[i];
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      ParamState& st = states_[g][i];
      if (!st.initialized) {
        init_state(p, group.options, st);
        st.initialized = true;
      }
      update(p, grad, group.options, st);
    }
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& group : groups_) {
    for (auto& p : group.params) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
      } else {
        grad.zero_();
      }
    }
  }
}

StateDict Optimizer::state_dict() const {
  StateDict dict;
  int64_t index = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (const ParamState& st : states_[g]) {
      if (st.initialized) {
        const std::string prefix = "state." + std::to_string(index) + ".";
        if (counts_steps()) dict.emplace_back(prefix + "step", scalar_tensor(static_cast<double>(st.step), DType::f32));
        for (const auto& [name, buffer] : st.buffers) dict.emplace_back(prefix + name, buffer.clone());
      }
      ++index;
    }
  }
  int64_t first = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    for (const auto& [key, value] : groups_[g].options) state_put_scalar(dict, prefix + key, value);
    const int64_t n = static_cast<int64_t>(groups_[g].params.size());
    Tensor ids = arange(static_cast<double>(first), static_cast<double>(first + n), 1.0, {DType::i64, nullptr});
    dict.emplace_back(prefix + "params", ids);
    first += n;
  }
  return dict;
}

void Optimizer::check_state_dict(const StateDict& dict) const { (void)prepare_load(dict); }

void Optimizer::load_state_dict(const StateDict& dict) {
  LoadedState loaded = prepare_load(dict);
  // Nothing above modified the optimizer.
  for (std::size_t g = 0; g < groups_.size(); ++g) groups_[g].options = std::move(loaded.options[g]);
  states_ = std::move(loaded.states);
}

Optimizer::LoadedState Optimizer::prepare_load(const StateDict& dict) const {
  const std::string what = name_ + " load_state_dict";
  // 1. Sort the keys into groups and per-parameter states.
  std::map<int64_t, std::map<std::string, const Tensor*>> groups;
  std::map<int64_t, std::map<std::string, const Tensor*>> states;
  for (const auto& [key, value] : dict) {
    const std::string_view k(key);
    auto split = [&](std::size_t prefix_len, std::map<int64_t, std::map<std::string, const Tensor*>>& into) {
      const auto dot = k.find('.', prefix_len);
      int64_t idx = 0;
      STRATA_CHECK(dot != std::string_view::npos && dot + 1 < k.size() &&
                       parse_index(k.substr(prefix_len, dot - prefix_len), idx),
                   what, ": malformed key '", key, "' (expected 'state.<i>.<name>' or 'param_groups.<g>.<option>')");
      STRATA_CHECK(value.defined(), what, ": key '", key, "' holds an undefined tensor");
      STRATA_CHECK(into[idx].emplace(std::string(k.substr(dot + 1)), &value).second, what, ": duplicate key '", key,
                   "'");
    };
    if (k.starts_with("state.")) {
      split(6, states);
    } else if (k.starts_with("param_groups.")) {
      split(13, groups);
    } else {
      STRATA_FAIL(what, ": unexpected key '", key, "' (expected 'state.<i>.<name>' or 'param_groups.<g>.<option>')");
    }
  }

  // 2. Groups: count, indices, parameter counts, options.
  STRATA_CHECK(groups.size() == groups_.size(), what, ": loaded state dict has ", groups.size(),
               " parameter groups, the optimizer has ", groups_.size());
  std::vector<Options> new_options(groups_.size());
  std::map<int64_t, std::pair<std::size_t, std::size_t>> id_map;  // saved index -> (group, position)
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    auto it = groups.find(static_cast<int64_t>(g));
    STRATA_CHECK(it != groups.end(), what, ": missing keys 'param_groups.", g, ".*' (the optimizer has ",
                 groups_.size(), " parameter groups)");
    auto params_it = it->second.find("params");
    STRATA_CHECK(params_it != it->second.end(), what, ": missing key '", prefix, "params'");
    const Tensor& ids = *params_it->second;
    STRATA_CHECK(ids.dim() == 1 && (ids.dtype() == DType::i64 || ids.dtype() == DType::i32), what, ": key '", prefix,
                 "params' must be a 1-D i64 tensor of parameter indices, got ", ids.describe());
    STRATA_CHECK(ids.size(0) == static_cast<int64_t>(groups_[g].params.size()), what,
                 ": loaded state dict contains a parameter group that doesn't match the size of optimizer's group ('",
                 prefix, "params' has ", ids.size(0), " entries, the optimizer's group ", g, " has ",
                 groups_[g].params.size(), " parameters)");
    for (int64_t j = 0; j < ids.size(0); ++j) {
      const auto id = static_cast<int64_t>(ids.at({j}));
      STRATA_CHECK(id >= 0, what, ": key '", prefix, "params' holds a negative index ", id);
      STRATA_CHECK(id_map.emplace(id, std::make_pair(g, static_cast<std::size_t>(j))).second, what,
                   ": parameter index ", id, " appears twice in 'param_groups.*.params'");
    }
    Options opts = groups_[g].options;
    for (const auto& [key, t] : it->second) {
      if (key == "params") continue;
      STRATA_CHECK(defaults_.count(key) != 0, what, ": unknown option '", prefix, key, "' (", name_,
                   " options: ", join_keys(defaults_), ")");
      STRATA_CHECK(t->numel() == 1, what, ": key '", prefix, key, "' must hold one number, got ", t->describe());
      opts[key] = t->item<double>();
    }
    with_context(what + ": param_groups." + std::to_string(g) + ": ", [&] { check_options(opts); });
    new_options[g] = std::move(opts);
  }

  // 3. States: names, shapes; converted to the parameter's dtype (copies owned by the optimizer).
  std::vector<std::vector<ParamState>> new_states(groups_.size());
  for (std::size_t g = 0; g < groups_.size(); ++g) new_states[g].resize(groups_[g].params.size());
  for (const auto& [id, entries] : states) {
    const std::string prefix = "state." + std::to_string(id) + ".";
    auto m = id_map.find(id);
    STRATA_CHECK(m != id_map.end(), what, ": key '", prefix, entries.begin()->first, "': no parameter has index ", id,
                 " in 'param_groups.*.params'");
    const auto [g, pos] = m->second;
    const Tensor& param = groups_[g].params[pos];
    const std::vector<std::string> names = buffer_names(new_options[g]);
    ParamState st;
    st.initialized = true;
    for (const auto& [name, t] : entries) {
      if (name == "step" && counts_steps()) {
        STRATA_CHECK(t->numel() == 1, what, ": key '", prefix, "step' must hold one number, got ", t->describe());
        const double s = t->item<double>();
        STRATA_CHECK(s >= 0 && s == std::floor(s) && s < 9.0e15, what, ": key '", prefix,
                     "step' must be a non-negative whole number, got ", detail::py_float(s));
        st.step = static_cast<int64_t>(s);
        continue;
      }
      STRATA_CHECK(std::find(names.begin(), names.end(), name) != names.end(), what, ": unexpected key '", prefix, name,
                   "' (", name_, " state for these options: ", counts_steps() ? "step" : "",
                   counts_steps() && !names.empty() ? ", " : "", join(names), ")");
      STRATA_CHECK(t->dtype() == DType::f32 || t->dtype() == DType::f64, what, ": key '", prefix, name,
                   "' must be f32 or f64, got ", t->describe());
      const Dims expected = buffer_shape(param, name);
      STRATA_CHECK(t->sizes() == expected, what, ": key '", prefix, name, "' has shape ", t->sizes(), ", expected ",
                   expected, " for parameter ", id, " of shape ", param.sizes());
      st.buffers.emplace(name, t->to(param.dtype(), /*copy=*/true).contiguous());
    }
    if (counts_steps()) STRATA_CHECK(entries.count("step") != 0, what, ": missing key '", prefix, "step'");
    for (const auto& name : names) {
      STRATA_CHECK(buffer_optional(name) || entries.count(name) != 0, what, ": missing key '", prefix, name, "'");
    }
    new_states[g][pos] = std::move(st);
  }

  return {std::move(new_options), std::move(new_states)};
}

}  // namespace strata::optim
