#include "core/config.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/text.h"
#include "core/threading.h"

namespace strata {

namespace {

/// A plain decimal number filling all of `text` (no blanks, no sign but '-', no hex), finite.
std::optional<double> finite_number(std::string_view text) {
  double x = 0;
  const char* last = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), last, x);
  if (text.empty() || ec != std::errc() || ptr != last || !std::isfinite(x)) return std::nullopt;
  return x;
}

/// `text` split at every comma.
std::vector<std::string_view> comma_fields(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

constexpr std::string_view kModelSpellings =
    "auto, off, default, read=R,write=W,latency=L or R,W,L (read and write GB/s, latency ns)";

}  // namespace

std::size_t parse_bytes(std::string_view text, std::string_view what) {
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  const std::size_t digits_begin = i;
  unsigned long long value = 0;
  bool overflow = false;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    overflow = overflow || __builtin_mul_overflow(value, 10ull, &value) ||
               __builtin_add_overflow(value, static_cast<unsigned long long>(text[i] - '0'), &value);
    ++i;
  }
  const bool has_digits = i > digits_begin;
  unsigned shift = 0;
  if (i < text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[i]))) {
      case 'K':
        shift = 10;
        ++i;
        break;
      case 'M':
        shift = 20;
        ++i;
        break;
      case 'G':
        shift = 30;
        ++i;
        break;
      case 'T':
        shift = 40;
        ++i;
        break;
      default: break;
    }
    if (shift > 0 && i < text.size() && (text[i] == 'i' || text[i] == 'I')) ++i;
    if (i < text.size() && (text[i] == 'B' || text[i] == 'b')) ++i;
  }
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  STRATA_CHECK(has_digits && i == text.size(), what, ": expected a byte count (e.g. 1048576, 512M, 8G), got ",
               quote_field(text));
  STRATA_CHECK(!overflow && (shift == 0 || value <= (~0ull >> shift)), what, ": ", quote_field(text), " is too large");
  return static_cast<std::size_t>(value << shift);
}

// ---- the slow tier's backend and model -------------------------------------------------------------

std::string_view pm_backend_name(PmBackend backend) {
  switch (backend) {
    case PmBackend::Auto: return "auto";
    case PmBackend::Memkind: return "memkind";
    case PmBackend::Mmap: return "mmap";
    case PmBackend::Numa: return "numa";
  }
  return "?";
}

PmBackend parse_pm_backend(std::string_view text, std::string_view what) {
  for (PmBackend b : {PmBackend::Auto, PmBackend::Memkind, PmBackend::Mmap, PmBackend::Numa})
    if (text == pm_backend_name(b)) return b;
  STRATA_FAIL(what, ": expected auto, memkind, mmap or numa, got ", quote_field(text));
}

SlowTierModelSpec SlowTierModelSpec::custom(double read_gbps, double write_gbps, double latency_ns,
                                            std::string_view what) {
  const bool finite = std::isfinite(read_gbps) && std::isfinite(write_gbps) && std::isfinite(latency_ns);
  STRATA_CHECK(finite && read_gbps > 0 && write_gbps > 0 && latency_ns >= 0, what,
               ": read and write bandwidths must be positive and the latency non-negative (finite numbers), got read=",
               read_gbps, ",write=", write_gbps, ",latency=", latency_ns);
  return {Mode::Custom, read_gbps, write_gbps, latency_ns};
}

std::string SlowTierModelSpec::to_string() const {
  if (mode != Mode::Custom) return std::string(mode_name());
  std::ostringstream os;
  os << read_gbps << "," << write_gbps << "," << latency_ns;
  return os.str();
}

std::string_view SlowTierModelSpec::mode_name() const {
  switch (mode) {
    case Mode::Auto: return "auto";
    case Mode::Off: return "off";
    case Mode::Default: return "default";
    case Mode::Custom: return "custom";
  }
  return "?";
}

SlowTierModelSpec parse_slow_tier_model(std::string_view text, std::string_view what) {
  if (text == "auto") return {};
  if (text == "off") return SlowTierModelSpec::off();
  if (text == "default" || text == "on") return SlowTierModelSpec::defaults();
  // Three numbers: all keyed (read=,write=,latency=, in that order) or none.
  const std::vector<std::string_view> fields = comma_fields(text);
  constexpr std::array<std::string_view, 3> kKeys = {"read=", "write=", "latency="};
  const bool keyed = fields.front().starts_with(kKeys[0]);
  std::array<double, 3> x{};
  bool ok = fields.size() == 3;
  for (std::size_t k = 0; ok && k < 3; ++k) {
    std::string_view field = fields[k];
    if (keyed) {
      ok = field.starts_with(kKeys[k]);
      field.remove_prefix(ok ? kKeys[k].size() : 0);
    }
    const std::optional<double> number = finite_number(field);
    ok = ok && number.has_value();
    x[k] = number.value_or(0);
  }
  STRATA_CHECK(ok, what, ": expected ", kModelSpellings, ", got ", quote_field(text));
  return SlowTierModelSpec::custom(x[0], x[1], x[2], what);
}

// ---- the environment -------------------------------------------------------------------------------

namespace environment {

namespace {

/// The value of the variable `name`, or nullopt when it is unset (Note [One configuration layer]).
std::optional<std::string_view> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string_view(v);
}

/// `name`'s value parsed by `parse(value, name)`, or nullopt when it is unset.
template <typename Parse>
auto parsed(const char* name, Parse parse) -> std::optional<decltype(parse(std::string_view{}, name))> {
  const std::optional<std::string_view> v = env(name);
  if (!v) return std::nullopt;
  return parse(*v, name);
}

double positive_number(std::string_view text, std::string_view name) {
  const std::optional<double> x = finite_number(text);
  STRATA_CHECK(x.has_value() && *x > 0, name, ": expected a positive number (GB/s), got ", quote_field(text));
  return *x;
}

/// `text` as one of `choices` (name → value), or the one-style error listing `accepted`.
template <typename T, std::size_t N>
T choice(std::string_view text, std::string_view name, const std::array<std::pair<std::string_view, T>, N>& choices,
         std::string_view accepted) {
  for (const auto& [spelling, value] : choices)
    if (text == spelling) return value;
  STRATA_FAIL(name, ": expected ", accepted, ", got ", quote_field(text));
}

}  // namespace

std::optional<std::size_t> fast_bytes() { return parsed("STRATA_FAST_BYTES", parse_bytes); }
std::optional<std::size_t> slow_bytes() { return parsed("STRATA_SLOW_BYTES", parse_bytes); }

std::optional<std::string> slow_dir() {
  return parsed("STRATA_SLOW_DIR", [](std::string_view text, std::string_view name) {
    STRATA_CHECK(!text.empty(), name, ": expected a directory, got ''");
    return std::string(text);
  });
}

std::optional<PmBackend> slow_backend() { return parsed("STRATA_SLOW_BACKEND", parse_pm_backend); }

std::optional<int> slow_numa_node() {
  return parsed("STRATA_SLOW_NUMA_NODE", [](std::string_view text, std::string_view name) {
    int n = -1;
    const char* last = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), last, n);
    STRATA_CHECK(!text.empty() && ec == std::errc() && ptr == last && n >= 0 && n < 4096, name,
                 ": expected a NUMA node number in [0, 4096), got ", quote_field(text));
    return n;
  });
}

std::optional<SlowTierModelSpec> slow_model() { return parsed("STRATA_SLOW_MODEL", parse_slow_tier_model); }
std::optional<double> dram_gbps() { return parsed("STRATA_DRAM_GBPS", positive_number); }
std::optional<double> dram_gather_gbps() { return parsed("STRATA_DRAM_GATHER_GBPS", positive_number); }

MemoryKind memory_kind() {
  constexpr std::array<std::pair<std::string_view, MemoryKind>, 2> kChoices = {
      {{"tiered", MemoryKind::Tiered}, {"dram", MemoryKind::Dram}}};
  return parsed("STRATA_MEMORY", [&](std::string_view text,
                                     std::string_view name) { return choice(text, name, kChoices, "tiered or dram"); })
      .value_or(MemoryKind::Tiered);
}

std::optional<int> num_threads() { return parsed("STRATA_NUM_THREADS", parse_num_threads); }

std::optional<DnnlPrimitives> dnnl_primitives() {
  constexpr std::array<std::pair<std::string_view, DnnlPrimitives>, 7> kChoices = {{{"auto", DnnlPrimitives::Auto},
                                                                                    {"1", DnnlPrimitives::Always},
                                                                                    {"on", DnnlPrimitives::Always},
                                                                                    {"always", DnnlPrimitives::Always},
                                                                                    {"0", DnnlPrimitives::Never},
                                                                                    {"off", DnnlPrimitives::Never},
                                                                                    {"never", DnnlPrimitives::Never}}};
  return parsed("STRATA_DNNL_PRIMITIVES", [&](std::string_view text, std::string_view name) {
    return choice(text, name, kChoices, "auto, 1 (on, always) or 0 (off, never)");
  });
}

std::optional<double> dist_timeout_seconds() {
  return parsed("STRATA_DIST_TIMEOUT", [](std::string_view text, std::string_view name) {
    const std::optional<double> x = finite_number(text);
    STRATA_CHECK(x.has_value(), name, ": expected a number of seconds (<= 0 waits forever), got ", quote_field(text));
    return *x;
  });
}

std::optional<int64_t> launcher_count(const char* variable) {
  STRATA_CHECK(
      std::string_view(variable).starts_with("OMPI_COMM_WORLD_") || std::string_view(variable).starts_with("PMI_"),
      "environment::launcher_count: ", variable, " is not a launcher variable");
  return parsed(variable, [](std::string_view text, std::string_view name) {
    int64_t n = -1;
    const char* last = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), last, n);
    STRATA_CHECK(!text.empty() && ec == std::errc() && ptr == last && n >= 0, name,
                 ": expected a non-negative integer, got ", quote_field(text));
    return n;
  });
}

}  // namespace environment

}  // namespace strata
