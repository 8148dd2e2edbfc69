// Harness cases for ops/einsum.h.

#include "ops/einsum.h"

#include <map>
#include <string>
#include <vector>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

/// The f64 reference: every assignment of values to the letters, the product of the operands'
/// elements added into the output's element. `inputs` and `output` are the explicit subscripts.
Tensor naive_einsum(const std::vector<std::string>& inputs, const std::string& output, const TensorList& ops) {
  std::map<char, int64_t> size;
  for (std::size_t k = 0; k < inputs.size(); ++k)
    for (std::size_t i = 0; i < inputs[k].size(); ++i) size[inputs[k][i]] = ops[k].size(static_cast<int64_t>(i));
  std::vector<char> letters;
  int64_t total = 1;
  for (const auto& [c, s] : size) letters.push_back(c), total *= s;
  Dims out_sizes;
  int64_t out_n = 1;
  for (char c : output) out_sizes.push_back(size[c]), out_n *= size[c];
  std::vector<std::vector<double>> vals;
  for (const Tensor& t : ops) vals.push_back(values_of(t));
  std::vector<double> out(static_cast<std::size_t>(out_n), 0.0);
  std::map<char, int64_t> at;
  for (int64_t i = 0; i < total; ++i) {
    int64_t rem = i;
    for (std::size_t l = letters.size(); l-- > 0;) at[letters[l]] = rem % size[letters[l]], rem /= size[letters[l]];
    double p = 1;
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      int64_t off = 0;
      for (char c : inputs[k]) off = off * size[c] + at[c];
      p *= vals[k][static_cast<std::size_t>(off)];
    }
    int64_t o = 0;
    for (char c : output) o = o * size[c] + at[c];
    out[static_cast<std::size_t>(o)] += p;
  }
  return from_values(out, out_sizes);
}

/// einsum(equation) over operands of `sizes`; `inputs` and `output` spell it out for the reference.
OpCase einsum_case(std::string name, std::string equation, std::vector<Dims> sizes, std::vector<std::string> inputs,
                   std::string output) {
  OpCase c;
  c.name = std::move(name);
  c.op = OpKind::einsum;
  c.inputs = [sizes](Generator& g) {
    TensorList in;
    for (const Dims& s : sizes) in.push_back(uniform64(s, g));
    return in;
  };
  c.run = [equation](const TensorList& in) { return TensorList{einsum(equation, in)}; };
  c.reference = [inputs, output](const TensorList& in) { return TensorList{naive_einsum(inputs, output, in)}; };
  for (std::size_t k = 0; k < sizes.size(); ++k) c.grad_inputs.push_back(static_cast<int>(k));
  return c;
}

STRATA_REGISTER_CASE(einsum_case("einsum/matmul", "ij,jk->ik", {{3, 4}, {4, 5}}, {"ij", "jk"}, "ik"));
STRATA_REGISTER_CASE(einsum_case("einsum/implicit_matmul", "ij,jk", {{3, 4}, {4, 2}}, {"ij", "jk"}, "ik"));
STRATA_REGISTER_CASE(einsum_case("einsum/batched", "bij,bjk->bik", {{2, 3, 4}, {2, 4, 3}}, {"bij", "bjk"}, "bik"));
STRATA_REGISTER_CASE(einsum_case("einsum/attention_scores", "bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}},
                                 {"bhqd", "bhkd"}, "bhqk"));
STRATA_REGISTER_CASE(einsum_case("einsum/dot", "i,i->", {{6}, {6}}, {"i", "i"}, ""));
STRATA_REGISTER_CASE(einsum_case("einsum/outer", "i,j->ij", {{3}, {4}}, {"i", "j"}, "ij"));
STRATA_REGISTER_CASE(einsum_case("einsum/hadamard", "ij,ij->ij", {{3, 4}, {3, 4}}, {"ij", "ij"}, "ij"));
STRATA_REGISTER_CASE(einsum_case("einsum/transpose", "ij->ji", {{3, 4}}, {"ij"}, "ji"));
STRATA_REGISTER_CASE(einsum_case("einsum/sum_all", "ij->", {{3, 4}}, {"ij"}, ""));
STRATA_REGISTER_CASE(einsum_case("einsum/row_sums_of_product", "ij,jk->i", {{3, 4}, {4, 2}}, {"ij", "jk"}, "i"));
STRATA_REGISTER_CASE(einsum_case("einsum/three_operands", "ab,bc, cd->da", {{2, 3}, {3, 4}, {4, 2}}, {"ab", "bc", "cd"},
                                 "da"));
STRATA_REGISTER_CASE(einsum_case("einsum/sum_before_contract", "abc,cd->ad", {{2, 3, 4}, {4, 3}}, {"abc", "cd"}, "ad"));

// ---- bad inputs ---------------------------------------------------------------------------------
STRATA_REGISTER_CASE(BadInputCase{
    "einsum/no_operands", OpKind::einsum, [] { einsum("ij->ij", {}); }, {"einsum", "at least one operand"}});
STRATA_REGISTER_CASE(BadInputCase{"einsum/operand_count",
                                  OpKind::einsum,
                                  [] { einsum("ij,jk->ik", {ones({2, 2})}); },
                                  {"ij,jk->ik", "names 2 operands", "1 were given"}});
STRATA_REGISTER_CASE(BadInputCase{
    "einsum/rank_mismatch", OpKind::einsum, [] { einsum("ij->i", {ones({2})}); }, {"operand 0 has 1 dims", "\"ij\""}});
STRATA_REGISTER_CASE(BadInputCase{"einsum/size_mismatch",
                                  OpKind::einsum,
                                  [] { einsum("ij,jk->ik", {ones({2, 3}), ones({4, 2})}); },
                                  {"subscript 'j' has size 4", "operand 1", "size 3"}});
STRATA_REGISTER_CASE(BadInputCase{
    "einsum/ellipsis", OpKind::einsum, [] { einsum("...ij->...ji", {ones({2, 2})}); }, {"ellipsis"}});
STRATA_REGISTER_CASE(BadInputCase{
    "einsum/diagonal", OpKind::einsum, [] { einsum("ii->i", {ones({2, 2})}); }, {"'i' repeats within one operand"}});
STRATA_REGISTER_CASE(BadInputCase{"einsum/unknown_output",
                                  OpKind::einsum,
                                  [] { einsum("ij->k", {ones({2, 2})}); },
                                  {"output subscript 'k' does not appear"}});
STRATA_REGISTER_CASE(BadInputCase{
    "einsum/invalid_character", OpKind::einsum, [] { einsum("i1->i", {ones({2, 2})}); }, {"invalid subscript '1'"}});
STRATA_REGISTER_CASE(BadInputCase{"einsum/dtype_mismatch",
                                  OpKind::einsum,
                                  [] { einsum("ij,jk->ik", {ones({2, 2}), ones({2, 2}, {DType::f64, nullptr})}); },
                                  {"f32", "f64"}});

}  // namespace
}  // namespace strata::testing
