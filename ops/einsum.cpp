#include "ops/einsum.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <vector>

#include "ops/detail/op_util.h"
#include "ops/linalg.h"
#include "ops/reduction.h"
#include "ops/shape_ops.h"

namespace strata {

namespace {

using namespace ops::detail;

/// A parsed equation: each operand's letters and the output's.
struct Equation {
  std::vector<std::string> inputs;
  std::string output;
};

/// The letters of `part` (spaces dropped); refuses anything but letters.
std::string letters_of(const std::string& equation, const std::string& part, const char* what) {
  std::string out;
  for (char c : part) {
    if (c == ' ') continue;
    STRATA_CHECK(c != '.', "einsum: \"", equation, "\": ellipsis (...) is not supported by Strata's einsum");
    STRATA_CHECK(std::isalpha(static_cast<unsigned char>(c)), "einsum: \"", equation, "\": invalid subscript '", c,
                 "' in the ", what, " (expected letters a-z, A-Z)");
    out.push_back(c);
  }
  return out;
}

Equation parse(const std::string& equation, std::size_t operands) {
  Equation eq;
  const std::size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = lhs.find(',', start);
    eq.inputs.push_back(letters_of(equation, lhs.substr(start, comma - start), "operands"));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  STRATA_CHECK(eq.inputs.size() == operands, "einsum: \"", equation, "\" names ", eq.inputs.size(), " operands, but ",
               operands, " were given");
  std::array<int, 128> count{};
  for (const std::string& in : eq.inputs) {
    for (std::size_t i = 0; i < in.size(); ++i) {
      STRATA_CHECK(in.find(in[i], i + 1) == std::string::npos, "einsum: \"", equation, "\": subscript '", in[i],
                   "' repeats within one operand (diagonals are not supported by Strata's einsum)");
      ++count[static_cast<unsigned char>(in[i])];
    }
  }
  if (arrow != std::string::npos) {
    eq.output = letters_of(equation, equation.substr(arrow + 2), "output");
    for (std::size_t i = 0; i < eq.output.size(); ++i) {
      const char c = eq.output[i];
      STRATA_CHECK(count[static_cast<unsigned char>(c)] > 0, "einsum: \"", equation, "\": output subscript '", c,
                   "' does not appear in any operand");
      STRATA_CHECK(eq.output.find(c, i + 1) == std::string::npos, "einsum: \"", equation, "\": output subscript '", c,
                   "' appears more than once");
    }
  } else {  // implicit output: the letters used once, alphabetically (upper case first, as ASCII)
    for (int c = 0; c < 128; ++c)
      if (count[static_cast<std::size_t>(c)] == 1) eq.output.push_back(static_cast<char>(c));
  }
  return eq;
}

/// An operand during the contraction: the tensor and the letter of each of its dims.
struct Term {
  Tensor t;
  std::string letters;
};

/// Sums away the dims of `term` whose letters `needed` lacks.
Term sum_unneeded(Term term, const std::string& needed) {
  std::vector<int64_t> dims;
  std::string kept;
  for (std::size_t i = 0; i < term.letters.size(); ++i) {
    if (needed.find(term.letters[i]) == std::string::npos)
      dims.push_back(static_cast<int64_t>(i));
    else
      kept.push_back(term.letters[i]);
  }
  if (dims.empty()) return term;
  return {sum(term.t, dims), kept};
}

/// The dims of `term` for `letters`, in that order, and the product of their sizes.
std::pair<Dims, int64_t> positions(const Term& term, const std::string& letters) {
  Dims p;
  int64_t n = 1;
  for (char c : letters) {
    const auto i = static_cast<int64_t>(term.letters.find(c));
    p.push_back(i);
    n *= term.t.size(i);
  }
  return {p, n};
}

/// `to` followed by `from`.
void append(Dims& to, const Dims& from) {
  for (int64_t v : from) to.push_back(v);
}

/// a ⋅ b over their common letters; `needed` lists the letters used after this step.
Term contract(const Term& a, const Term& b, const std::string& needed) {
  std::string batch, left, right, inner;
  for (char c : a.letters) {
    const bool in_b = b.letters.find(c) != std::string::npos;
    const bool later = needed.find(c) != std::string::npos;
    (in_b ? (later ? batch : inner) : left).push_back(c);
  }
  for (char c : b.letters)
    if (a.letters.find(c) == std::string::npos) right.push_back(c);
  const auto [pb, nb] = positions(a, batch);
  const auto [pl, nl] = positions(a, left);
  const auto [pi, ni] = positions(a, inner);
  const auto [pr, nr] = positions(b, right);
  Dims perm_a = pb, perm_b = positions(b, batch).first;
  append(perm_a, pl);
  append(perm_a, pi);
  append(perm_b, positions(b, inner).first);
  append(perm_b, pr);
  const Tensor am = reshape(permute(a.t, perm_a), {nb, nl, ni});
  const Tensor bm = reshape(permute(b.t, perm_b), {nb, ni, nr});
  Dims out_sizes;
  for (int64_t d : pb) out_sizes.push_back(a.t.size(d));
  for (int64_t d : pl) out_sizes.push_back(a.t.size(d));
  for (int64_t d : pr) out_sizes.push_back(b.t.size(d));
  return {reshape(bmm(am, bm), out_sizes), batch + left + right};
}

/// Checks that the operands have one dtype and every letter one size across them.
void check_sizes(const std::string& equation, const Equation& eq, const std::vector<Tensor>& operands) {
  std::array<int64_t, 128> size;
  size.fill(-1);
  for (std::size_t k = 0; k < operands.size(); ++k) {
    STRATA_CHECK(operands[k].defined(), "einsum: operand ", k, " is undefined");
    check_same_dtype("einsum", operands[0], operands[k]);
    STRATA_CHECK(operands[k].dim() == static_cast<int64_t>(eq.inputs[k].size()), "einsum: \"", equation, "\": operand ",
                 k, " has ", operands[k].dim(), " dims (", operands[k].describe(), ") but its subscripts \"",
                 eq.inputs[k], "\" name ", eq.inputs[k].size());
    for (std::size_t i = 0; i < eq.inputs[k].size(); ++i) {
      int64_t& s = size[static_cast<unsigned char>(eq.inputs[k][i])];
      const int64_t have = operands[k].size(static_cast<int64_t>(i));
      STRATA_CHECK(s < 0 || s == have, "einsum: \"", equation, "\": subscript '", eq.inputs[k][i], "' has size ", have,
                   " in operand ", k, " (", operands[k].describe(), ") but size ", s,
                   " before (Strata's einsum does not broadcast size-1 dims)");
      s = have;
    }
  }
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  check_backend(OpKind::einsum);
  STRATA_CHECK(!operands.empty(), "einsum: expected at least one operand for \"", equation, "\"");
  const Equation eq = parse(equation, operands.size());
  check_sizes(equation, eq, operands);
  // needed_after[k]: the letters of the output and of operands k+1, ...
  std::vector<std::string> needed_after(operands.size());
  std::string needed = eq.output;
  for (std::size_t k = operands.size(); k-- > 0;) {
    needed_after[k] = needed;
    needed += eq.inputs[k];
  }
  Term acc = sum_unneeded({operands[0], eq.inputs[0]}, needed_after[0]);
  for (std::size_t k = 1; k < operands.size(); ++k) {
    const Term next = sum_unneeded({operands[k], eq.inputs[k]}, needed_after[k] + acc.letters);
    acc = contract(acc, next, needed_after[k]);
  }
  acc = sum_unneeded(acc, eq.output);
  Dims perm;
  for (char c : eq.output) perm.push_back(static_cast<int64_t>(acc.letters.find(c)));
  return perm.empty() ? reshape(acc.t, {}) : permute(acc.t, perm);  // a new (recorded) view, never an operand
}

}  // namespace strata
