#include "models/module.h"

#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "core/factories.h"
#include "models/activation.h"
#include "models/container.h"
#include "models/conv.h"
#include "models/linear.h"
#include "models/normalization.h"
#include "ops/linalg.h"
#include "ops/reduction.h"
#include "ops/shape_ops.h"
#include "tests/cpp/error_text.h"

namespace strata::nn {
namespace {

using testing_util::error_of;

std::vector<std::string> keys_of(const StateDict& d) {
  std::vector<std::string> out;
  for (const auto& [k, t] : d) out.push_back(k);
  return out;
}

template <typename V>
std::vector<std::string> names_of(const V& v) {
  std::vector<std::string> out;
  for (const auto& [k, t] : v) out.push_back(k);
  return out;
}

/// A custom module whose own parameter is registered after its child: PyTorch lists a module's
/// own parameters and buffers before its children's regardless of registration order.
class Block : public Module {
 public:
  Block() : Module("Block") {
    fc = register_module("fc", std::make_shared<Linear>(3, 3));
    register_parameter("scale", ones({3}));
    register_buffer("steps", zeros({}, {DType::i64, nullptr}));
    register_buffer("scratch", zeros({3}), /*persistent=*/false);
    register_parameter("unused", Tensor());
  }
  Tensor forward(const Tensor& x) override { return fc->forward(x); }
  std::shared_ptr<Linear> fc;
};

std::shared_ptr<Sequential> nested_model() {
  auto inner = std::make_shared<Sequential>(
      std::initializer_list<std::shared_ptr<Module>>{std::make_shared<Linear>(4, 3), std::make_shared<ReLU>()});
  return std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Conv2d>(3, 4, 3), std::make_shared<BatchNorm2d>(4), std::make_shared<ReLU>(), inner,
      std::make_shared<Block>(), std::make_shared<Linear>(3, 2, /*bias=*/false)});
}

TEST(Module, StateDictOrderAndNamesArePyTorchs) {
  auto model = nested_model();
  // torch: the same structure built with torch.nn (Block as a torch.nn.Module subclass).
  const std::vector<std::string> expected = {
      "0.weight",   "0.bias",   "1.weight", "1.bias",  "1.running_mean", "1.running_var", "1.num_batches_tracked",
      "3.0.weight", "3.0.bias", "4.scale",  "4.steps", "4.fc.weight",    "4.fc.bias",     "5.weight"};
  EXPECT_EQ(keys_of(model->state_dict()), expected);
  const std::vector<std::string> params = {"0.weight", "0.bias",  "1.weight",    "1.bias",    "3.0.weight",
                                           "3.0.bias", "4.scale", "4.fc.weight", "4.fc.bias", "5.weight"};
  EXPECT_EQ(names_of(model->named_parameters()), params);
  EXPECT_EQ(model->parameters().size(), params.size());
  const std::vector<std::string> buffers = {"1.running_mean", "1.running_var", "1.num_batches_tracked", "4.steps",
                                            "4.scratch"};
  EXPECT_EQ(names_of(model->named_buffers()), buffers);
  const std::vector<std::string> modules = {"", "0", "1", "2", "3", "3.0", "3.1", "4", "4.fc", "5"};
  EXPECT_EQ(names_of(model->named_modules()), modules);
  EXPECT_EQ(names_of(model->named_modules("net")).at(1), "net.0");
  EXPECT_EQ(names_of(model->named_children()), (std::vector<std::string>{"0", "1", "2", "3", "4", "5"}));
  EXPECT_EQ(names_of(model->child("4")->named_parameters("", /*recurse=*/false)), (std::vector<std::string>{"scale"}));
  EXPECT_EQ(names_of(model->named_parameters("m")).front(), "m.0.weight");
}

TEST(Module, StateDictTensorsAreDetachedViewsOfTheParameters) {
  Linear lin(2, 2);
  StateDict sd = lin.state_dict();
  ASSERT_EQ(sd.size(), 2u);
  EXPECT_FALSE(sd[0].second.requires_grad());
  EXPECT_TRUE(sd[0].second.shares_storage(lin.weight()));
  lin.weight().fill_(3.0);
  EXPECT_EQ(sd[0].second.at({1, 1}), 3.0);
}

TEST(Module, SharedModulesAndParametersAreListedOnce) {
  auto shared = std::make_shared<Linear>(2, 2);
  Sequential seq{shared, std::make_shared<ReLU>(), shared};
  EXPECT_EQ(names_of(seq.named_modules()), (std::vector<std::string>{"", "0", "1"}));
  EXPECT_EQ(names_of(seq.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias"}));
  EXPECT_EQ(names_of(seq.named_children()), (std::vector<std::string>{"0", "1"}));
  // state_dict follows every registration, as in PyTorch.
  EXPECT_EQ(keys_of(seq.state_dict()), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  // A tensor registered in two modules is one parameter.
  Module a("A");
  Tensor w = zeros({2});
  a.register_parameter("w", w);
  auto b = std::make_shared<Module>("B");
  b->register_parameter("v", a.parameter("w"));
  a.register_module("b", b);
  EXPECT_EQ(names_of(a.named_parameters()), (std::vector<std::string>{"w"}));
  // Sequential still runs a module held twice twice.
  shared->weight().copy_(tensor<float>({1, 1, 0, 1}, IntArrayRef{2, 2}));
  shared->bias().zero_();
  Tensor y = seq.forward(tensor<float>({1, 2}, IntArrayRef{1, 2}));
  EXPECT_EQ(y.at({0, 0}), 5.0);  // [1, 2] -> [3, 2] -> [5, 2]
  EXPECT_EQ(y.at({0, 1}), 2.0);
}

TEST(Module, RegistryNamesAreValidated) {
  Module m("Custom");
  m.register_parameter("w", zeros({2}));
  EXPECT_TRUE(m.parameter("w").requires_grad());
  EXPECT_ERROR_HAS(m.register_parameter("", zeros({1})), "Custom.register_parameter: the name must not be empty");
  EXPECT_ERROR_HAS(m.register_parameter("a.b", zeros({1})), "name 'a.b' must not contain \".\"");
  EXPECT_ERROR_HAS(m.register_buffer("w", zeros({1})), "Custom.register_buffer: 'w' is already a parameter");
  m.register_buffer("b", zeros({1}));
  EXPECT_ERROR_HAS(m.register_parameter("b", zeros({1})), "'b' is already a buffer");
  m.register_module("c", std::make_shared<ReLU>());
  EXPECT_ERROR_HAS(m.register_buffer("c", zeros({1})), "'c' is already a child module");
  EXPECT_ERROR_HAS(m.register_module("w", std::make_shared<ReLU>()), "'w' is already a parameter");
  EXPECT_ERROR_HAS(m.register_module("d", nullptr), "child 'd' is null");
  EXPECT_ERROR_HAS(m.register_parameter("i", zeros({2}, {DType::i64, nullptr})), "needs a floating dtype");
  EXPECT_ERROR_HAS(m.parameter("nope"), "Custom has no parameter 'nope'");
  EXPECT_ERROR_HAS(m.buffer("nope"), "Custom has no buffer 'nope'");
  EXPECT_ERROR_HAS(m.child("nope"), "Custom has no child module 'nope'");
  EXPECT_ERROR_HAS(m.forward(zeros({1})), "Custom has no forward(Tensor)");
  // Re-registering the same kind replaces in place (order kept); undefined parameters are listed nowhere.
  m.register_parameter("v", zeros({1}));
  m.register_parameter("w", ones({3}));
  EXPECT_EQ(names_of(m.named_parameters()), (std::vector<std::string>{"w", "v"}));
  EXPECT_EQ(m.parameter("w").numel(), 3);
  m.register_parameter("w", Tensor());
  EXPECT_TRUE(m.has_parameter("w"));
  EXPECT_FALSE(m.parameter("w").defined());
  EXPECT_EQ(names_of(m.named_parameters()), (std::vector<std::string>{"v"}));
  EXPECT_TRUE(m.unregister("w"));
  EXPECT_FALSE(m.has_parameter("w"));
  EXPECT_FALSE(m.unregister("w"));
  // A non-leaf is refused.
  Tensor leaf = ones({2}).set_requires_grad();
  Tensor computed = linear(ones({1, 2}), strata::reshape(leaf, {1, 2}));
  EXPECT_ERROR_HAS(m.register_parameter("z", computed), "must be a leaf tensor");
}

TEST(Module, TrainEvalAndZeroGradReachEveryModule) {
  auto model = nested_model();
  for (auto& m : model->modules()) EXPECT_TRUE(m->is_training());
  model->eval();
  for (auto& m : model->modules()) EXPECT_FALSE(m->is_training());
  model->train();
  for (auto& m : model->modules()) EXPECT_TRUE(m->is_training());

  Linear lin(3, 2);
  Tensor y = lin.forward(ones({4, 3}));
  sum(y).backward();
  ASSERT_TRUE(lin.weight().grad().defined());
  EXPECT_EQ(lin.bias().grad().at({0}), 4.0);
  lin.zero_grad();
  EXPECT_FALSE(lin.weight().grad().defined());
  EXPECT_FALSE(lin.bias().grad().defined());
}

TEST(Module, LoadStateDictCopiesValuesInPlace) {
  auto src = nested_model();
  auto dst = nested_model();
  src->child("1")->buffer("running_mean").fill_(0.5);
  src->child("1")->buffer("num_batches_tracked").fill_(7);
  const Tensor w_before = dst->child("0")->parameter("weight");
  const uint64_t version = w_before.version();
  LoadResult r = dst->load_state_dict(src->state_dict());
  EXPECT_TRUE(r.missing_keys.empty());
  EXPECT_TRUE(r.unexpected_keys.empty());
  const StateDict dst_state = dst->state_dict();
  for (const auto& [k, t] : src->state_dict()) {
    const Tensor* d = state_find(dst_state, k);
    ASSERT_NE(d, nullptr) << k;
    for (int64_t i = 0; i < t.numel(); ++i) {
      EXPECT_EQ(t.reshape({-1}).at({i}), d->reshape({-1}).at({i})) << k;
    }
  }
  EXPECT_EQ(dst->child("1")->buffer("num_batches_tracked").item<int64_t>(), 7);
  // In place: the same tensor object, still a leaf requiring grad, version bumped.
  EXPECT_TRUE(dst->child("0")->parameter("weight").shares_storage(w_before));
  EXPECT_TRUE(w_before.requires_grad());
  EXPECT_GT(w_before.version(), version);

  // f64 values are converted like copy_.
  Linear lin(2, 1);
  StateDict d64 = {{"weight", tensor<double>({0.25, -1.5}, IntArrayRef{1, 2})}, {"bias", tensor<double>({2.0})}};
  lin.load_state_dict(d64);
  EXPECT_EQ(lin.weight().dtype(), DType::f32);
  EXPECT_EQ(lin.weight().at({0, 1}), -1.5);
  EXPECT_EQ(lin.bias().at({0}), 2.0);
}

TEST(Module, LoadStateDictReportsMissingUnexpectedAndShapeErrors) {
  Sequential seq{std::make_shared<Linear>(4, 3), std::make_shared<ReLU>(), std::make_shared<Linear>(3, 2)};
  StateDict sd = seq.state_dict();
  StateDict partial = {sd[0], sd[1], {"2.weight", sd[2].second}, {"extra", zeros({1})}};
  partial[2].first = "3.weight";
  // torch: 'Error(s) in loading state_dict for Sequential:\n\tMissing key(s) in state_dict: "2.weight",
  // "2.bias". \n\tUnexpected key(s) in state_dict: "3.weight", "extra". '
  const std::string msg = error_of([&] { seq.load_state_dict(partial); });
  EXPECT_NE(msg.find("Error(s) in loading state_dict for Sequential:\n\tMissing key(s) in state_dict: \"2.weight\", "
                     "\"2.bias\". \n\tUnexpected key(s) in state_dict: \"3.weight\", \"extra\". "),
            std::string::npos)
      << msg;
  // Non-strict: no error, the keys are returned, matching entries are loaded.
  Tensor before = seq[2]->parameter("weight").clone();
  partial[0].second = full({3, 4}, 0.75);
  LoadResult r = seq.load_state_dict(partial, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"2.weight", "2.bias"}));
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"3.weight", "extra"}));
  EXPECT_EQ(seq[0]->parameter("weight").at({2, 3}), 0.75);
  EXPECT_EQ(seq[2]->parameter("weight").at({1, 2}), before.at({1, 2}));

  // A shape mismatch is an error even when not strict, and nothing is copied.
  StateDict bad = seq.state_dict();
  for (auto& [k, t] : bad) t = t.clone().fill_(9.0);
  bad[2].second = zeros({2, 4});
  const std::string shape_msg = error_of([&] { seq.load_state_dict(bad, /*strict=*/false); });
  EXPECT_NE(shape_msg.find("Error(s) in loading state_dict for Sequential:\n\tsize mismatch for 2.weight: copying a "
                           "param with shape [2, 4] from checkpoint, the shape in current model is [2, 3]."),
            std::string::npos)
      << shape_msg;
  EXPECT_EQ(seq[0]->parameter("weight").at({0, 0}), 0.75);
  // check_state_dict: the same errors and results, and nothing is copied even when it would load.
  EXPECT_NE(error_of([&] { seq.check_state_dict(bad, /*strict=*/false); }).find("size mismatch for 2.weight"),
            std::string::npos);
  bad[2].second = full({2, 3}, 9.0);
  EXPECT_TRUE(seq.check_state_dict(bad).missing_keys.empty());
  EXPECT_EQ(seq[0]->parameter("weight").at({0, 0}), 0.75);

  // BatchNorm's num_batches_tracked may be absent (PyTorch's older state_dicts).
  BatchNorm1d bn(3);
  StateDict no_count = bn.state_dict();
  no_count.pop_back();
  EXPECT_TRUE(bn.load_state_dict(no_count).missing_keys.empty());
}

TEST(Module, ReprFollowsPyTorch) {
  Sequential seq{std::make_shared<Linear>(4, 3), std::make_shared<ReLU>()};
  EXPECT_EQ(seq.to_string(), "Sequential(\n  (0): Linear(in_features=4, out_features=3, bias=True)\n  (1): ReLU()\n)");
  Sequential nested{std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
                        std::make_shared<Conv2d>(3, 8, 3, 1, 1), std::make_shared<BatchNorm2d>(8)}),
                    std::make_shared<Linear>(2, 1, false)};
  // str(torch.nn.Sequential(torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, 1, 1), torch.nn.BatchNorm2d(8)),
  //                         torch.nn.Linear(2, 1, bias=False)))
  EXPECT_EQ(nested.to_string(),
            "Sequential(\n"
            "  (0): Sequential(\n"
            "    (0): Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
            "    (1): BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)\n"
            "  )\n"
            "  (1): Linear(in_features=2, out_features=1, bias=False)\n"
            ")");
  EXPECT_EQ(Block().to_string(), "Block(\n  (fc): Linear(in_features=3, out_features=3, bias=True)\n)");
  EXPECT_EQ(Module("Empty").to_string(), "Empty()");
}

TEST(Module, PythonFloatRepr) {
  EXPECT_EQ(py_float_repr(1e-5), "1e-05");
  EXPECT_EQ(py_float_repr(0.1), "0.1");
  EXPECT_EQ(py_float_repr(1.0), "1.0");
  EXPECT_EQ(py_float_repr(0.0001), "0.0001");
  EXPECT_EQ(py_float_repr(1.5e-7), "1.5e-07");
  EXPECT_EQ(py_float_repr(-0.01), "-0.01");
  EXPECT_EQ(py_float_repr(123.25), "123.25");
  EXPECT_EQ(py_float_repr(1e16), "1e+16");
  EXPECT_EQ(py_float_repr(1e15), "1000000000000000.0");
}

}  // namespace
}  // namespace strata::nn
