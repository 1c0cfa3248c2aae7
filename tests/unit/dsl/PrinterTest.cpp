//===- PrinterTest.cpp - printExpr round trips ----------------------------===//
#include "TestUtil.h"

#include "moec/dsl/Printer.h"

namespace moec::dsl {
namespace {

std::string printed(const std::string &expr) {
  auto op = test::parseCondition(expr);
  return printExpr(*op->requires_[0].cond);
}

struct RoundTrip {
  const char *input;
  const char *expected; // the canonical, minimally parenthesised text
};

class PrintExprTest : public ::testing::TestWithParam<RoundTrip> {};

TEST_P(PrintExprTest, PrintsCanonicallyAndRoundTrips) {
  const RoundTrip &c = GetParam();
  std::string once = printed(c.input);
  EXPECT_EQ(once, c.expected);
  EXPECT_EQ(printed(once), once); // parsing the printed text gives the same tree
}

const RoundTrip kRoundTrips[] = {
    {"N * K", "N * K"},
    {"(a + b) * c", "(a + b) * c"},
    {"a + (b * c)", "a + b * c"},
    {"(a - b) - c", "a - b - c"},
    {"a - (b - c)", "a - (b - c)"},
    {"a / (b % c)", "a / (b % c)"},
    {"drop_pad_mode == 1 ? -1 : 0", "drop_pad_mode == 1 ? -1 : 0"},
    {"a ? b : (c ? d : e)", "a ? b : c ? d : e"},
    {"(a ? b : c) ? d : e", "(a ? b : c) ? d : e"},
    {"a ? (b ? c : d) : e", "a ? b ? c : d : e"},
    {"x + (a ? b : c)", "x + (a ? b : c)"},
    {"-(a + b)", "-(a + b)"},
    {"- -a", "--a"},
    {"!(a && b) || c", "!(a && b) || c"},
    {"a || (b && c)", "a || b && c"},
    {"(a || b) && c", "(a || b) && c"},
    {"(a < b) == (c > d)", "a < b == c > d"},
    {"true != false", "true != false"},
    {"f32(x[r, h])", "f32(x[r, h])"},
    {"T(1.5e-3) + bf16(0.0)", "T(0.0015) + bf16(0.0)"},
    {"i32(2.5) * 1e20", "i32(2.5) * 1e+20"},
    {"rank(x) == (m == 1 ? 3 : 2)", "rank(x) == (m == 1 ? 3 : 2)"},
    {"sum(k < K) {\n let r = idx[n * K + k]\n r >= 0 ? f32(x[r, h]) : 0.0 }",
     "sum(k < K) { let r = idx[n * K + k]; r >= 0 ? f32(x[r, h]) : 0.0 }"},
    {"sum(k < K + 1) (f32(x[k]) * 2.0)", "sum(k < K + 1) (f32(x[k]) * 2.0)"},
    {"(sum(k < K) f32(x[k])) * 2.0", "sum(k < K) f32(x[k]) * 2.0"},
    {"-sum(k < 4) -y[k]", "-sum(k < 4) -y[k]"},
    {"{ let a = 1; let b = a * 2; (a + b) * 3 }", "{ let a = 1; let b = a * 2; (a + b) * 3 }"},
    {"fold(k < K, acc = 0) (acc + 1)", "fold(k < K, acc = 0) (acc + 1)"},
    {"fold(k < K + 1, acc = f32(0)) fma(acc, 2.0, f32(x[k]))",
     "fold(k < K + 1, acc = f32(0)) fma(acc, 2.0, f32(x[k]))"},
    {"(fold(j < e, n = 0) (m[j] ? n + 1 : n)) < K", "fold(j < e, n = 0) (m[j] ? n + 1 : n) < K"},
    {"fma(a, b * c, -c)", "fma(a, b * c, -c)"},
    {"present(probs)", "present(probs)"},
    {"!present(probs) || (present(map) && drop)", "!present(probs) || present(map) && drop"},
    {"min(a, b) + max(N, (K - 1))", "min(a, b) + max(N, K - 1)"},
    {"max(min(a, 1), 0) * 2", "max(min(a, 1), 0) * 2"},
};

INSTANTIATE_TEST_SUITE_P(Dsl, PrintExprTest, ::testing::ValuesIn(kRoundTrips));

TEST(PrintExprTest, ReferenceOpExpressionsRoundTrip) {
  auto op = loadOpFile(test::refOpPath());
  const Expr &value = *op->body[0].assign->value;
  std::string text = printExpr(value);
  EXPECT_EQ(text, "sum(k < K) { let r = expanded_row_idx[n * K + k]; "
                  "let live = drop_pad_mode == 1 ? r >= 0 : active_num == 0 || r < active_num; "
                  "live ? f32(grad_expanded_x[r, h]) : 0.0 }");
  EXPECT_EQ(printed(text), text);
  for (const Require &r : op->requires_)
    EXPECT_EQ(printed(printExpr(*r.cond)), printExpr(*r.cond));
}

} // namespace
} // namespace moec::dsl
