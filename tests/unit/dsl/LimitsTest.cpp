//===- LimitsTest.cpp - Front-end limits on nesting and size --------------===//
//
// Found by a hostile-input review: 10,000 nested parentheses, braces or ifs overflowed the parser's
// stack, a 30,000-term chain overflowed later recursive passes, and 5,000 nested sums overflowed MLIR.
// Each is now a located error, well before any stack is at risk.
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <functional>

namespace moec::dsl {
namespace {

std::string repeat(const std::string &s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i)
    out += s;
  return out;
}

/// Loads `text`, expecting a DslError whose plain message contains `message`; returns the error.
DslError expectError(const std::string &text, const std::string &message) {
  try {
    loadOpText("deep.moe", text);
  } catch (const DslError &e) {
    EXPECT_NE(e.message().find(message), std::string::npos) << e.message();
    EXPECT_EQ(std::string(e.what()).rfind("deep.moe:", 0), 0u) << e.what();
    return e;
  }
  ADD_FAILURE() << "no error";
  return DslError(SourceLoc{}, "");
}

TEST(Limits, DeepParenthesesAreAnErrorNotACrash) {
  std::string expr = repeat("(", 10000) + "f32(x[n, h])" + repeat(")", 10000);
  DslError e = expectError(test::wrapBody("y[n, h] = T(" + expr + ")"), "nesting is too deep");
  EXPECT_EQ(e.loc().line, 7);
}

TEST(Limits, DeepBracesAndIfsAreAnError) {
  expectError(test::wrapBody(repeat("if true {", 10000) + "y[n, h] = x[n, h]" + repeat("}", 10000)),
              "nesting is too deep");
  expectError(test::wrapBody("y[n, h] = " + repeat("{", 10000) + "x[n, h]" + repeat("}", 10000)),
              "nesting is too deep");
}

TEST(Limits, LongOperatorChainsCountAsNesting) {
  std::string chain = "f32(x[n, h])";
  for (int i = 0; i < 30000; ++i)
    chain += " + 1.0";
  expectError(test::wrapBody("y[n, h] = T(" + chain + ")"), "nesting is too deep");
}

TEST(Limits, DeeplyNestedSumsAreAnError) {
  std::string body = "f32(x[n, h])";
  for (int i = 0; i < 5000; ++i)
    body = "sum(k" + std::to_string(i) + " < 2) " + body;
  expectError(test::wrapBody("y[n, h] = T(" + body + ")"), "nesting is too deep");
}

TEST(Limits, ReasonableNestingStillParses) {
  std::string expr = repeat("(", 100) + "f32(x[n, h])" + repeat(")", 100);
  std::string chain = "f32(x[n, h])";
  for (int i = 0; i < 150; ++i)
    chain += " + 1.0";
  EXPECT_NO_THROW(loadOpText("ok.moe", test::wrapBody("y[n, h] = T(" + expr + " + " + chain + ")")));
}

TEST(Limits, TooManyTokensIsAnError) {
  std::string lets;
  for (int i = 0; i < 60000; ++i)
    lets += "let a" + std::to_string(i) + " = 1\n";
  expectError(test::wrapBody(lets + "y[n, h] = x[n, h]"), "too long");
}

TEST(Limits, DivisionByALiteralZeroIsRejected) {
  std::string text = "op t<T: f32>\ndim N: runtime, H: static\nin x: T[N, H]\nout y: T[N, H]\n"
                     "require H / 0 > 0 : \"never\"\n{ y[n, h] = x[n, h] }\n";
  DslError e = expectError(text, "'/' by zero");
  EXPECT_EQ(e.loc().line, 5);
  EXPECT_EQ(e.loc().col, 13);
}

} // namespace
} // namespace moec::dsl
