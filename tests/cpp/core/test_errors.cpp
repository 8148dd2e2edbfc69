// Error reporting: STRATA_CHECK / STRATA_ASSERT, and operations on undefined tensors.

#include "core/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "core/factories.h"
#include "core/tensor.h"
#include "test_util.h"

namespace {

using namespace strata;
using strata_test::NamesOp;
using strata_test::values;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

static_assert(std::is_base_of_v<std::runtime_error, Error>);

int check_line = 0;
void failing_check(int x) {
  check_line = __LINE__ + 1;
  STRATA_CHECK(x > 0, "my_op: expected a positive value, got ", x, " for shape ", Dims{2, 3});
}

TEST(Errors, CheckMessageLeadsAndLocationFollows) {
  try {
    failing_check(-4);
    FAIL() << "no throw";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_THAT(msg, StartsWith("my_op: expected a positive value, got -4 for shape [2, 3]"));
    EXPECT_THAT(msg, HasSubstr("test_errors.cpp:" + std::to_string(check_line)));
    EXPECT_THAT(msg, Not(HasSubstr("/")));  // basename only
  }
  EXPECT_NO_THROW(failing_check(1));
}

TEST(Errors, CheckWithoutMessageNamesTheCondition) {
  try {
    const int answer = 41;
    STRATA_CHECK(answer == 42);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("answer == 42"), HasSubstr("test_errors.cpp:")));
  }
}

TEST(Errors, CheckEvaluatesConditionOnceAndMessageLazily) {
  int cond_evals = 0, msg_evals = 0;
  auto cond = [&] {
    ++cond_evals;
    return true;
  };
  auto msg = [&] {
    ++msg_evals;
    return std::string("expensive");
  };
  STRATA_CHECK(cond(), msg());
  EXPECT_EQ(cond_evals, 1);
  EXPECT_EQ(msg_evals, 0) << "the message must only be built on failure";
  auto fail = [&] {
    ++cond_evals;
    return false;
  };
  EXPECT_THROW(STRATA_CHECK(fail(), msg()), Error);
  EXPECT_EQ(cond_evals, 2);
  EXPECT_EQ(msg_evals, 1);
}

TEST(Errors, CheckIsASingleStatement) {
  // The macro must behave in an unbraced if/else.
  bool threw = false;
  try {
    if (true)
      STRATA_CHECK(false, "inside if");
    else
      threw = false;
  } catch (const Error&) {
    threw = true;
  }
  EXPECT_TRUE(threw);
}

TEST(Errors, AssertReportsABug) {
  try {
    STRATA_ASSERT(1 + 1 == 3, "arithmetic is broken: ", 2);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(),
                AllOf(HasSubstr("internal error"), HasSubstr("1 + 1 == 3"), HasSubstr("arithmetic is broken: 2"),
                      HasSubstr("test_errors.cpp:"), HasSubstr("bug in Strata")));
  }
  try {
    STRATA_ASSERT(false);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("internal error"), HasSubstr("false")));
  }
  EXPECT_NO_THROW(STRATA_ASSERT(true, "fine"));
}

TEST(Errors, StripLocationHelperOnlyStripsLocations) {
  // The helper the other tests rely on.
  EXPECT_EQ(strata_test::strip_location("view: bad (tensor.cpp:12)"), "view: bad");
  EXPECT_EQ(strata_test::strip_location("view: bad (expected 3)"), "view: bad (expected 3)");
  EXPECT_EQ(strata_test::strip_location("view: shape (2, 3)"), "view: shape (2, 3)");
  EXPECT_EQ(strata_test::strip_location("x"), "x");
}

// ---- undefined tensors -------------------------------------------------------------------------

TEST(UndefinedTensor, OnlyDefinedIsAllowed) {
  Tensor u;
  EXPECT_FALSE(u.defined());
  const auto undefined = HasSubstr("undefined");
  EXPECT_THAT(ERROR_MESSAGE(u.dtype()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.dim()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.sizes()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.strides()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.size(0)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.stride(0)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.offset()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.numel()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.itemsize()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.nbytes()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.is_contiguous()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.storage()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.data_ptr()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.data<float>()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.item<float>()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.at({0})), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.version()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.bump_version()), undefined);
}

TEST(UndefinedTensor, ViewsAndCopies) {
  Tensor u;
  Tensor d = zeros({2, 2});
  const auto undefined = HasSubstr("undefined");
  EXPECT_THAT(ERROR_MESSAGE(u.view({1})), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.reshape({1})), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.narrow(0, 0, 1)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.slice(0)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.select(0, 0)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.transpose(0, 1)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.permute({0})), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.t()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.expand({2})), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.expand_as(d)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(d.expand_as(u)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.broadcast_to({2})), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.squeeze()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.squeeze(0)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.unsqueeze(0)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.flatten()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.as_strided({1}, {1})), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.contiguous()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.clone()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.to(DType::f64)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.copy_(d)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(d.copy_(u)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.fill_(1.0)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.zero_()), undefined);
  EXPECT_THAT(ERROR_MESSAGE(empty_like(u)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(ones_like(u)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(u.shares_storage(d)), undefined);
  EXPECT_THAT(ERROR_MESSAGE(d.shares_storage(u)), undefined);
  EXPECT_EQ(values(d), std::vector<double>(4, 0.0)) << "failed ops must leave their operands alone";
}

TEST(UndefinedTensor, MessagesNameTheOperation) {
  // Besides "undefined", a user needs to know which call got the undefined tensor.
  Tensor u;
  Tensor d = zeros({2});
  EXPECT_THAT(ERROR_MESSAGE(d.copy_(u)), HasSubstr("copy_"));
  EXPECT_THAT(ERROR_MESSAGE(u.view({1})), HasSubstr("view"));
  EXPECT_THAT(ERROR_MESSAGE(u.clone()), HasSubstr("clone"));
  EXPECT_THAT(ERROR_MESSAGE(u.fill_(0)), HasSubstr("fill_"));
  EXPECT_THAT(ERROR_MESSAGE(u.to(DType::i32)), NamesOp("to"));
  EXPECT_THAT(ERROR_MESSAGE(zeros_like(u)), HasSubstr("zeros_like"));
  EXPECT_THAT(ERROR_MESSAGE(d.expand_as(u)), HasSubstr("expand"));
}

TEST(UndefinedTensor, PrintingDoesNotCrash) {
  Tensor u;
  // Printing an undefined tensor is either a clear error or a clear marker; never a crash.
  try {
    const std::string s = u.to_string();
    EXPECT_THAT(s, HasSubstr("undefined"));
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("undefined"));
  }
  try {
    const std::string s = u.describe();
    EXPECT_THAT(s, HasSubstr("undefined"));
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("undefined"));
  }
}

TEST(UndefinedTensor, HandlesCopyAndAssign) {
  Tensor u;
  Tensor v = u;
  EXPECT_FALSE(v.defined());
  v = zeros({1});
  EXPECT_TRUE(v.defined());
  v = Tensor();
  EXPECT_FALSE(v.defined());
}

}  // namespace
