#include "models/state_dict.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/factories.h"

namespace strata {
namespace {

TEST(StateDict, FindsKeysInOrderAndReadsScalars) {
  StateDict d;
  d.emplace_back("0.weight", ones({2, 3}));
  state_put_scalar(d, "param_groups.0.lr", 0.125);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].first, "0.weight");
  ASSERT_NE(state_find(d, "0.weight"), nullptr);
  EXPECT_EQ(state_find(d, "0.weight")->numel(), 6);
  EXPECT_EQ(state_find(d, "0.bias"), nullptr);
  EXPECT_EQ(d[1].second.dtype(), DType::f64);
  EXPECT_DOUBLE_EQ(state_scalar(d, "param_groups.0.lr", "SGD state_dict"), 0.125);
}

TEST(StateDict, MissingKeysAndNonScalarsAreNamedInTheError) {
  StateDict d;
  d.emplace_back("w", ones({2}));
  try {
    state_at(d, "v", "SGD state_dict");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SGD state_dict: missing key 'v'"), std::string::npos) << e.what();
  }
  try {
    state_scalar(d, "w", "Adam state_dict");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("key 'w' must hold one number"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata
