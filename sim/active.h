#pragma once
/// @file
/// The scalar active type and tracer of the simulated accelerator (DESIGN.md §3 "sim";
/// TapeFlow §II-B, §V): imperative code written against `sim::Active` and `sim::Array` records a
/// fully unrolled forward (FWD) dataflow trace (sim/trace.h); `Tracer::finish()` generates the
/// reverse (REV) pass by reverse-mode differentiation of that dataflow, with an Enzyme-style tape
/// (struct-of-arrays: one tape array per static store site, indexed by loop iteration, in DRAM
/// behind the cache). The TapeFlow passes (sim/tapeflow.h) rewrite the resulting Program; the
/// replay (sim/replay.h) executes it functionally.
///
/// Usage:
/// @code
///   sim::Tracer tr("dot");
///   sim::Array x = tr.input("x", {1, 2, 3});       // differentiable input
///   sim::Array w = tr.constant("w", {4, 5, 6});    // inactive input (no gradient)
///   sim::Array loss = tr.output("loss", 1);        // its gradient is seeded with 1
///   sim::Active s = 0.0;
///   {
///     sim::Loop l("i");
///     for (size_t i = 0; i < 3; ++i) { l.next(); s = s + x.load(i) * w.load(i); }
///   }
///   loss.store(0, s);
///   sim::Program p = tr.finish();
/// @endcode
///
/// Note [Sim tracer semantics]
/// - One Tracer is current per thread (the constructor makes it current, the destructor clears
///   it); Actives, Arrays and Loops belong to it. Actives carry their value, computed eagerly, so
///   C++ control flow on values (`if (a < b)`) resolves at trace time, as in a fully unrolled IR.
/// - An Active built from a double is a constant: it becomes a `Const` instruction (an immediate:
///   one per distinct value and phase) when combined with a traced value.
/// - Activity: loads from differentiable arrays (input/output/temp) are active, loads from
///   `constant` arrays and `param`s are not; an op is active if a source is; Cmp is never active.
///   Storing an active value into a constant array is an error.
/// - Loops: `Loop l("name")` opens a static loop (identified by its name inside its parent loop);
///   `l.next()` starts an iteration; instructions carry the innermost started loop and its
///   iteration number, counted across all executions of that static loop (so a nested loop's
///   iterations are numbered 0.. over the whole program; this is the tape index).
/// - REV (Enzyme-style): FWD instructions are differentiated in reverse order; SSA adjoints are
///   REV values; a load's adjoint is accumulated into the array's gradient (shadow) array with
///   Load/Add/Store, and a store to an array moves the shadow's value into the stored value's
///   adjoint and zeroes the shadow (Load, Store of 0). Gradient arrays start at 0 except outputs,
///   whose gradient holds the seed.
/// - What REV needs from FWD: constants are rematerialized (immediates); `param`s are re-read;
///   a value loaded from an array element that no later FWD store overwrites is re-loaded from the
///   array in REV (Enzyme's treatment of unmodified memory); every other value is cached on the
///   tape (TapeStore in FWD, TapeLoad in REV). Cheap arithmetic is not recomputed: recomputation
///   needs its operands in REV (themselves taped or re-loaded), and the paper's Enzyme and
///   TapeFlow share whatever recomputation Enzyme applies, so the tape is the object of study.
/// - Tape placement: a value's TapeStore sits right after the last FWD instruction whose
///   derivative uses it (for nearly every value: its own definition or the instruction right
///   after it in the same iteration), with that instruction's loop and iteration; its TapeLoad sits
///   at that instruction's derivative, the value's first use in REV. Enzyme's tape site is (loop,
///   k-th tape store of the iteration): one array of `iterations` doubles per site, 64-byte
///   aligned, after the program's arrays; the entry is `site base + 8 * iteration`.
/// - Derivatives that need a comparison (Max, Min) use Cmp: `Cmp(a, b)` is 1.0 if a < b, else
///   0.0; `Select(c, a, b)` is a if c != 0, else b.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/trace.h"

namespace strata::sim {

class Tracer;
namespace detail {
struct TracerState;
}

/// A traced scalar double: its value (computed eagerly) and its SSA id in the trace.
class Active {
 public:
  /// A constant (an immediate until combined with a traced value).
  Active(double constant = 0.0) : value_(constant) {}  // NOLINT(google-explicit-constructor)

  double value() const { return value_; }
  /// The SSA id, or kNone for a constant that was not materialized.
  uint32_t id() const { return id_; }
  bool is_constant() const { return id_ == kNone; }

 private:
  friend struct detail::TracerState;
  friend class Tracer;
  Active(double v, uint32_t id) : value_(v), id_(id) {}
  double value_ = 0.0;
  uint32_t id_ = kNone;
};

Active operator+(const Active& a, const Active& b);
Active operator-(const Active& a, const Active& b);
Active operator*(const Active& a, const Active& b);
Active operator/(const Active& a, const Active& b);
Active operator-(const Active& a);
Active& operator+=(Active& a, const Active& b);
Active& operator-=(Active& a, const Active& b);
Active& operator*=(Active& a, const Active& b);
Active exp(const Active& a);
Active log(const Active& a);
Active sqrt(const Active& a);
Active sin(const Active& a);
Active cos(const Active& a);
Active tanh(const Active& a);
Active max(const Active& a, const Active& b);
Active min(const Active& a, const Active& b);
/// 1.0 if a < b else 0.0 (a Cmp instruction; never active).
Active less(const Active& a, const Active& b);
/// `cond != 0 ? a : b` (a Select instruction; differentiable in a and b).
Active select(const Active& cond, const Active& a, const Active& b);
/// Value comparisons, resolved at trace time (data-dependent control flow in an unrolled trace).
inline bool operator<(const Active& a, const Active& b) { return a.value() < b.value(); }
inline bool operator>(const Active& a, const Active& b) { return a.value() > b.value(); }
inline bool operator<=(const Active& a, const Active& b) { return a.value() <= b.value(); }
inline bool operator>=(const Active& a, const Active& b) { return a.value() >= b.value(); }

/// What an array is to the program.
enum class ArrayKind : uint8_t {
  Input,     ///< differentiable input (its gradient is a result)
  Constant,  ///< inactive input: no gradient array
  Output,    ///< differentiable output (zero-initialized; its gradient array holds the seed)
  Temp,      ///< differentiable scratch state (zero-initialized)
};

/// A program array of doubles in simulated DRAM (and, unless Constant, its gradient array).
class Array {
 public:
  Array() = default;
  /// Records a Load of element i.
  Active load(size_t i) const;
  /// Records a Store of v into element i.
  void store(size_t i, const Active& v) const;
  size_t size() const;
  const std::string& name() const;
  /// Current value of element i (trace-time value).
  double value(size_t i) const;
  uint64_t base() const;       ///< DRAM byte address of element 0
  uint64_t grad_base() const;  ///< DRAM byte address of the gradient's element 0 (0 if Constant)

 private:
  friend class Tracer;
  friend struct detail::TracerState;
  Array(Tracer* t, uint32_t index) : tracer_(t), index_(index) {}
  Tracer* tracer_ = nullptr;
  uint32_t index_ = 0;
};

/// An array as the finished program describes it (initial memory and results for replay).
struct ArrayInfo {
  std::string name;
  ArrayKind kind = ArrayKind::Input;
  uint64_t base = 0;
  uint64_t grad_base = 0;            ///< 0 for Constant arrays
  std::vector<double> initial;       ///< values before FWD
  std::vector<double> final_values;  ///< values after FWD (as traced)
  std::vector<double> seed;          ///< initial gradient (outputs: the seed; others: zeros)
};

/// One tape value: the FWD instruction that stores it and the REV instruction that loads it.
struct TapeEntry {
  uint32_t store = kNone;  ///< index in Trace::instrs of the TapeStore (or SpadStore)
  uint32_t load = kNone;   ///< index in Trace::instrs of the TapeLoad (or SpadLoad)
  uint32_t site = kNone;   ///< Enzyme tape site (index into Program::sites)
};

/// An Enzyme tape site: one static tape store in a loop body, its own array of doubles.
struct TapeSite {
  uint32_t loop = kNone;  ///< innermost loop (kNone outside loops)
  uint32_t ordinal = 0;   ///< k-th tape store of an iteration of that loop
  uint64_t base = 0;      ///< DRAM address of the site's array
  uint64_t entries = 0;   ///< the array's length (the loop's iteration count)
};

/// A traced program: the trace, its arrays, and the bookkeeping the passes need.
struct Program {
  Trace trace;
  std::vector<ArrayInfo> arrays;
  /// Per instruction: for REV instructions the index of the FWD instruction whose derivative it
  /// is (FtoR inverted); for FWD instructions the instruction itself.
  std::vector<uint32_t> origin;
  std::vector<TapeEntry> tape;  ///< in FWD store order
  std::vector<TapeSite> sites;
  std::vector<uint64_t> loop_iterations;  ///< by loop id
  uint64_t tape_base = 0;                 ///< first DRAM byte after the program's arrays (tape space)

  /// The array named `name` (throws strata::Error naming the known arrays if absent).
  const ArrayInfo& array(const std::string& name) const;
};

/// Records FWD instructions and generates REV. Current for its thread while alive.
class Tracer {
 public:
  explicit Tracer(std::string name);
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  /// The thread's current tracer (throws strata::Error if none).
  static Tracer& current();

  Array input(const std::string& name, std::vector<double> values);
  Array constant(const std::string& name, std::vector<double> values);
  /// An output of n zeros whose gradient is seeded with `seed` (every element).
  Array output(const std::string& name, size_t n, double seed = 1.0);
  Array temp(const std::string& name, size_t n);
  /// A scalar argument (an Input instruction; inactive).
  Active param(double value);

  /// Generates REV and lays out the tape; the tracer cannot record afterwards.
  Program finish();

  detail::TracerState& state() { return *state_; }

 private:
  std::unique_ptr<detail::TracerState> state_;
};

/// A static loop of the traced program; `next()` starts each iteration. Closed on destruction.
class Loop {
 public:
  explicit Loop(const std::string& name);
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;
  void next();
  uint32_t id() const { return id_; }

 private:
  Tracer* tracer_;
  uint32_t id_;
  size_t depth_;
};

/// Runs body(i) for i in [0, n) as the iterations of loop `name`.
template <typename F>
void for_range(const std::string& name, size_t n, F&& body) {
  Loop l(name);
  for (size_t i = 0; i < n; ++i) {
    l.next();
    body(i);
  }
}

}  // namespace strata::sim
