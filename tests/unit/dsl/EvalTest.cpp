//===- EvalTest.cpp - Host-side evaluation of signature expressions -------===//
#include "TestUtil.h"

#include "moec/dsl/Eval.h"

namespace moec::dsl {
namespace {

class RefOpEvalTest : public ::testing::Test {
protected:
  void SetUp() override { op = loadOpFile(test::refOpPath()); }

  /// Bindings for N tokens, R expanded rows, top-k K, the two modes and the rank of grad_expanded_x.
  static Bindings bind(int64_t n, int64_t r, int64_t k, int64_t dropPad, int64_t active, int64_t rank) {
    Bindings b;
    b.values = {{"N", n}, {"R", r}, {"H", 16}, {"K", k}, {"drop_pad_mode", dropPad}, {"active_num", active}};
    b.ranks = {{"grad_expanded_x", rank}, {"expanded_row_idx", 1}, {"grad_x", 2}};
    return b;
  }

  /// The indices of the requires that fail.
  std::vector<size_t> failing(const Bindings &b) const {
    std::vector<size_t> out;
    for (size_t i = 0; i < op->requires_.size(); ++i)
      if (!evalBool(*op->requires_[i].cond, b))
        out.push_back(i);
    return out;
  }

  std::unique_ptr<OpDef> op;
};

TEST_F(RefOpEvalTest, RequiresHoldForValidConfigs) {
  EXPECT_EQ(failing(bind(4, 8, 2, 0, 0, 2)), std::vector<size_t>{}); // dropless
  EXPECT_EQ(failing(bind(4, 5, 2, 0, 5, 2)), std::vector<size_t>{}); // active
  EXPECT_EQ(failing(bind(4, 6, 2, 1, 0, 3)), std::vector<size_t>{}); // drop/pad: R = E * C
}

TEST_F(RefOpEvalTest, RequiresCatchBadConfigs) {
  EXPECT_EQ(failing(bind(4, 8, 0, 0, 0, 2)), (std::vector<size_t>{0, 4})); // K = 0, so N*K != R
  EXPECT_EQ(failing(bind(4, 8, 2, 2, 0, 3)), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(failing(bind(4, 8, 2, 0, -1, 2)), (std::vector<size_t>{2, 5}));
  EXPECT_EQ(failing(bind(4, 8, 2, 1, 0, 2)), (std::vector<size_t>{3}));
  EXPECT_EQ(failing(bind(4, 7, 2, 0, 0, 2)), (std::vector<size_t>{4}));
  EXPECT_EQ(failing(bind(4, 7, 2, 0, 5, 2)), (std::vector<size_t>{5}));
}

TEST_F(RefOpEvalTest, RangeBoundsAndShapes) {
  const TensorDecl &idx = op->tensors[1];
  Bindings dropless = bind(4, 8, 2, 0, 0, 2);
  EXPECT_EQ(evalInt(*idx.rangeLo, dropless), 0);
  EXPECT_EQ(evalInt(*idx.rangeHi, dropless), 8);
  EXPECT_EQ(evalInt(*idx.shape[0].size, dropless), 8);
  Bindings dropPad = bind(4, 6, 2, 1, 0, 3);
  EXPECT_EQ(evalInt(*idx.rangeLo, dropPad), -1);
  EXPECT_EQ(evalInt(*idx.rangeHi, dropPad), 6);
}

TEST_F(RefOpEvalTest, AttrsByPublicName) {
  Bindings b;
  b.values = {{"top_k", 3}};
  auto shape = test::parseCondition("top_k * 2");
  EXPECT_EQ(evalInt(*shape->requires_[0].cond, b), 6);
}

int64_t evalText(const std::string &expr, const Bindings &b = {}) {
  return evalInt(*test::parseCondition(expr)->requires_[0].cond, b);
}

std::string evalError(const std::string &expr, const Bindings &b = {}) {
  try {
    evalText(expr, b);
  } catch (const EvalError &e) {
    return e.what();
  }
  return "no error";
}

TEST(EvalTest, IntegerArithmeticTruncatesLikeCpp) {
  EXPECT_EQ(evalText("-7 / 2"), -3);
  EXPECT_EQ(evalText("-7 % 2"), -1);
  EXPECT_EQ(evalText("7 % -2"), 1);
  EXPECT_EQ(evalText("1 + 2 * 3 - 4"), 3);
  EXPECT_EQ(evalText("-(2 - 5)"), 3);
}

TEST(EvalTest, LogicAndComparisons) {
  EXPECT_EQ(evalText("1 < 2 && 2 <= 2 && 3 > 2 && 3 >= 3 && 1 != 2 && 2 == 2"), 1);
  EXPECT_TRUE(evalBool(*test::parseCondition("!(1 > 2) || false")->requires_[0].cond, {}));
  EXPECT_EQ(evalText("true == false"), 0);
}

TEST(EvalTest, OnlyTheTakenBranchIsEvaluated) {
  Bindings b;
  b.values = {{"N", 0}};
  EXPECT_EQ(evalText("N == 0 ? 1 : 10 / N", b), 1);
  EXPECT_EQ(evalText("N == 0 || 10 / N > 1", b), 1); // short-circuit
  EXPECT_EQ(evalText("N != 0 && 10 / N > 1", b), 0);
}

TEST(EvalTest, Casts) {
  EXPECT_EQ(evalText("i8(300)"), 44);
  EXPECT_EQ(evalText("i32(4294967297)"), 1);
  EXPECT_EQ(evalText("bool(7) == true"), 1);
  EXPECT_EQ(evalError("f32(1) > f32(0)"), "cannot evaluate 'f32(1)' on the host");
}

TEST(EvalTest, Ranks) {
  Bindings b;
  b.ranks = {{"x", 3}};
  EXPECT_EQ(evalText("rank(x) * 2", b), 6);
  EXPECT_EQ(evalError("rank(y)", b), "no value for 'rank(y)'");
}

TEST(EvalTest, Present) {
  Bindings b;
  b.present = {{"probs", true}, {"map", false}};
  EXPECT_EQ(evalText("present(probs)", b), 1);
  EXPECT_EQ(evalText("present(map)", b), 0);
  EXPECT_EQ(evalText("!present(probs) || present(map)", b), 0);
  EXPECT_EQ(evalText("present(probs) ? 2 : 3", b), 2);
  EXPECT_EQ(evalError("present(g)", b), "no value for 'present(g)'");
}

TEST(EvalTest, MinMax) {
  Bindings b;
  b.values = {{"N", 4}, {"K", 7}};
  EXPECT_EQ(evalText("min(N, K)", b), 4);
  EXPECT_EQ(evalText("max(N, K)", b), 7);
  EXPECT_EQ(evalText("max(-3, min(N - 10, 0)) * 2", b), -6);
  EXPECT_EQ(evalError("min(N, Q)", b), "no value for 'Q'");
  EXPECT_EQ(evalError("max(N)", b), "cannot evaluate 'max(N)' on the host"); // unchecked arity
  EXPECT_EQ(evalError("foo(N, K)", b), "cannot evaluate 'foo(N, K)' on the host");
}

TEST(EvalTest, FmaAndFoldAreNotHostEvaluable) {
  EXPECT_EQ(evalError("fma(1.0, 2.0, 3.0) > 0.0"), "cannot evaluate 'fma(1.0, 2.0, 3.0)' on the host");
  EXPECT_EQ(evalError("fold(k < 4, a = 0) (a + k) > 1"),
            "cannot evaluate 'fold(k < 4, a = 0) (a + k)' on the host");
}

TEST(EvalTest, Errors) {
  Bindings b;
  b.values = {{"N", 4}, {"K", 2}};
  EXPECT_EQ(evalError("N / (K - 2)", b), "division by zero in 'N / (K - 2)'");
  EXPECT_EQ(evalError("N % 0", b), "division by zero in 'N % 0'");
  EXPECT_EQ(evalError("N + Q", b), "no value for 'Q'");
  EXPECT_EQ(evalError("x[0] > 1", b), "cannot evaluate 'x[0]' on the host");
  EXPECT_EQ(evalError("sum(k < 2) 1.0"), "cannot evaluate 'sum(k < 2) 1.0' on the host");
  EXPECT_EQ(evalError("1.5 > 1"), "cannot evaluate '1.5' on the host");
  EXPECT_EQ(evalError("9223372036854775807 + 1"), "integer overflow in '9223372036854775807 + 1'");
}

} // namespace
} // namespace moec::dsl
