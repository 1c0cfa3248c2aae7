//===- StatementTest.cpp - for/if statements, scatters, optional tensors, folds and calls ----------===//
#include "TestUtil.h"

#include "moec/dsl/Printer.h"

namespace moec::dsl {
namespace {

// A gradient-like op using every statement form. The fold body is parenthesised: like `sum`, `fold`
// binds its body as a unary operand.
const char *const kGradLike = R"(op grad_like<T: f16 | bf16 | f32>
  dim Tk: runtime, R: runtime, E: static, H: static
  attr drop_and_pad: static bool = false
  in g: T[Tk, H]
  in out_index: i32[R] in [-1, R) unique
  in routing_map?: bool[Tk, E]
  in probs?: T[Tk, E]
  out dy: T[R, H]
  out dp?: T[Tk, E] when present(probs)
  require !present(probs) || present(routing_map) || drop_and_pad : "probs need routing_map"
{
  dy[r, h] = T(0.0)
  if !drop_and_pad {
    let K = R / Tk
    if present(probs) {
      for t < Tk, e < E {
        let k = fold(j < e, n = 0) (routing_map[t, j] ? n + 1 : n)
        let row = routing_map[t, e] && k < K ? out_index[t * K + k] : -1
        if row >= 0 {
          dy[row, h] = f32(g[t, h]) * f32(probs[t, e])
        }
      }
      dp[t, e] = T(0.0)
    } else {
      for t < Tk, k < K {
        let row = out_index[t * K + k]
        if row >= 0 { dy[row, h] = g[t, h] }
      }
    }
  }
}
)";

class GradLikeTest : public ::testing::Test {
protected:
  void SetUp() override { op = loadOpText("grad_like.moe", kGradLike); }
  std::unique_ptr<OpDef> op;
};

TEST_F(GradLikeTest, TensorFlags) {
  ASSERT_EQ(op->tensors.size(), 6u);
  const TensorDecl &outIndex = op->tensors[1];
  EXPECT_TRUE(outIndex.unique);
  EXPECT_FALSE(outIndex.optional);
  EXPECT_EQ(printExpr(*outIndex.rangeLo), "-1");
  EXPECT_TRUE(op->tensors[2].optional);
  EXPECT_FALSE(op->tensors[2].unique);
  EXPECT_EQ(op->tensors[2].when, nullptr);
  EXPECT_TRUE(op->tensors[3].optional);
  EXPECT_FALSE(op->tensors[4].optional);
  EXPECT_EQ(op->tensors[4].when, nullptr);

  const TensorDecl &dp = op->tensors[5];
  EXPECT_TRUE(dp.optional);
  EXPECT_TRUE(dp.isOutput);
  ASSERT_NE(dp.when, nullptr);
  EXPECT_EQ(dp.when->kind, ExprKind::Present);
  EXPECT_EQ(dp.when->refIndex, 3);
  EXPECT_EQ(dp.when->type.cls, ExprType::Bool);
}

TEST_F(GradLikeTest, RequireUsesPresent) {
  const Expr &cond = *op->requires_[0].cond;
  EXPECT_EQ(printExpr(cond), "!present(probs) || present(routing_map) || drop_and_pad");
  EXPECT_EQ(cond.type.cls, ExprType::Bool);
  const Expr &notProbs = *cond.operands[0]->operands[0];
  EXPECT_EQ(notProbs.operands[0]->kind, ExprKind::Present);
  EXPECT_EQ(notProbs.operands[0]->refIndex, 3);
  EXPECT_EQ(cond.operands[0]->operands[1]->refIndex, 2);
}

TEST_F(GradLikeTest, TopLevelStructure) {
  ASSERT_EQ(op->body.size(), 2u);
  const Assign &fill = *op->body[0].assign;
  EXPECT_EQ(fill.tensorIndex, 4);
  EXPECT_EQ(fill.indices, (std::vector<std::string>{"r", "h"}));
  EXPECT_EQ(fill.indexExprs[0], nullptr);
  EXPECT_EQ(fill.indexExprs[1], nullptr);

  ASSERT_NE(op->body[1].ifStmt, nullptr);
  const IfStmt &notDropPad = *op->body[1].ifStmt;
  EXPECT_EQ(printExpr(*notDropPad.cond), "!drop_and_pad");
  EXPECT_TRUE(notDropPad.elseBody.empty());
  ASSERT_EQ(notDropPad.thenBody.size(), 2u);
  EXPECT_EQ(notDropPad.thenBody[0].let->name, "K");
  EXPECT_EQ(notDropPad.thenBody[0].let->value->type.cls, ExprType::Int);

  const IfStmt &hasProbs = *notDropPad.thenBody[1].ifStmt;
  EXPECT_EQ(hasProbs.cond->kind, ExprKind::Present);
  ASSERT_EQ(hasProbs.thenBody.size(), 2u);
  ASSERT_NE(hasProbs.thenBody[0].forStmt, nullptr);
  const Assign &dpFill = *hasProbs.thenBody[1].assign;
  EXPECT_EQ(dpFill.target, "dp");
  EXPECT_EQ(dpFill.tensorIndex, 5);
  EXPECT_EQ(dpFill.indices, (std::vector<std::string>{"t", "e"})); // fresh: the for's t and e are gone
  ASSERT_EQ(hasProbs.elseBody.size(), 1u);
  EXPECT_NE(hasProbs.elseBody[0].forStmt, nullptr);
}

TEST_F(GradLikeTest, ScatterWithFold) {
  const IfStmt &hasProbs = *op->body[1].ifStmt->thenBody[1].ifStmt;
  const ForStmt &loop = *hasProbs.thenBody[0].forStmt;
  EXPECT_EQ(loop.vars, (std::vector<std::string>{"t", "e"}));
  EXPECT_EQ(printExpr(*loop.bounds[0]), "Tk");
  EXPECT_EQ(loop.bounds[1]->nameKind, NameKind::Dim);
  EXPECT_EQ(loop.varLocs[1].line, 16);
  EXPECT_EQ(loop.varLocs[1].col, 19);
  ASSERT_EQ(loop.body.size(), 3u);

  const Expr &fold = *loop.body[0].let->value;
  ASSERT_EQ(fold.kind, ExprKind::Fold);
  EXPECT_EQ(fold.name, "j");
  EXPECT_EQ(fold.accName, "n");
  EXPECT_EQ(fold.type.cls, ExprType::Int);
  EXPECT_EQ(fold.operands[0]->nameKind, NameKind::IndexVar); // the bound is the for variable e
  EXPECT_EQ(fold.operands[1]->kind, ExprKind::IntLit);
  const Expr &select = *fold.operands[2];
  ASSERT_EQ(select.kind, ExprKind::Select);
  EXPECT_EQ(select.operands[0]->operands[1]->nameKind, NameKind::IndexVar); // j
  EXPECT_EQ(select.operands[1]->operands[0]->nameKind, NameKind::Accumulator);
  EXPECT_EQ(select.operands[2]->nameKind, NameKind::Accumulator);

  const Expr &row = *loop.body[1].let->value;
  EXPECT_EQ(row.type.cls, ExprType::Int);
  EXPECT_EQ(printExpr(row), "routing_map[t, e] && k < K ? out_index[t * K + k] : -1");

  const IfStmt &live = *loop.body[2].ifStmt;
  EXPECT_EQ(printExpr(*live.cond), "row >= 0");
  const Assign &scatter = *live.thenBody[0].assign;
  EXPECT_EQ(scatter.tensorIndex, 4);
  EXPECT_EQ(scatter.indices, (std::vector<std::string>{"", "h"}));
  ASSERT_NE(scatter.indexExprs[0], nullptr);
  EXPECT_EQ(scatter.indexExprs[0]->kind, ExprKind::Name);
  EXPECT_EQ(scatter.indexExprs[0]->nameKind, NameKind::Let);
  EXPECT_EQ(scatter.indexExprs[0]->type.cls, ExprType::Int);
  EXPECT_EQ(scatter.indexExprs[1], nullptr);
  EXPECT_TRUE(scatter.value->type.isF32());
}

TEST_F(GradLikeTest, ElseBranchLoop) {
  const IfStmt &hasProbs = *op->body[1].ifStmt->thenBody[1].ifStmt;
  const ForStmt &loop = *hasProbs.elseBody[0].forStmt;
  EXPECT_EQ(loop.vars, (std::vector<std::string>{"t", "k"}));
  EXPECT_EQ(loop.bounds[1]->nameKind, NameKind::Let);
  const Expr &index = *loop.body[0].let->value->operands[0]; // t * K + k
  EXPECT_EQ(index.operands[1]->nameKind, NameKind::IndexVar);
  const Assign &scatter = *loop.body[1].ifStmt->thenBody[0].assign;
  EXPECT_EQ(scatter.indexExprs[0]->nameKind, NameKind::Let);
  EXPECT_TRUE(scatter.value->type.floatType.generic);
}

TEST_F(GradLikeTest, AstDump) {
  std::string ast = printAst(*op);
  for (const char *expected : {
           "  in out_index: i32[R] in [-1, R) unique\n",
           "  in routing_map?: bool[Tk, E]\n",
           "  out dp?: T[Tk, E] when present(probs)\n",
           "  assign dy[r, h] : T\n    Cast T : T\n",
           "  if !drop_and_pad\n    let K = Binary / : int\n",
           "    if present(probs)\n      for t < Tk, e < E\n"
           "        let k = Fold j < e, n = 0 : int\n          Select : int\n",
           "              Name n (acc) : int\n",
           "        if row >= 0\n          assign dy[row, h] : f32\n",
           "      assign dp[t, e] : T\n        Cast T : T\n",
           "    else\n      for t < Tk, k < K\n        let row = Element out_index : int\n",
       })
    EXPECT_NE(ast.find(expected), std::string::npos) << expected << "\nin:\n" << ast;
}

TEST(StatementTest, RepeatedAssignmentsRunInOrder) {
  auto op = loadOpText("t.moe", test::wrapBody("y[n, h] = T(0.0)\ny[n, h] = x[n, h]"));
  ASSERT_EQ(op->body.size(), 2u);
  EXPECT_EQ(op->body[0].assign->tensorIndex, op->body[1].assign->tensorIndex);
}

TEST(StatementTest, OptionalOutputAssignedInOneBranch) {
  auto op = loadOpText("t.moe", "op t dim N: runtime attr f: static bool = false\n"
                                "out y?: f32[N] when f && N > 0\n"
                                "{ if f { y[i] = 1.0 } }");
  EXPECT_EQ(printExpr(*op->tensors[0].when), "f && N > 0");
}

TEST(StatementTest, ElseIfIsANestedIf) {
  auto op = loadOpText("t.moe", test::wrapBody("if flag { y[n, h] = T(0.0) }\n"
                                               "else if K > 1 { y[n, h] = T(1.0) }\n"
                                               "else { y[n, h] = x[n, h] }"));
  const IfStmt &outer = *op->body[0].ifStmt;
  ASSERT_EQ(outer.elseBody.size(), 1u);
  const IfStmt &inner = *outer.elseBody[0].ifStmt;
  EXPECT_EQ(printExpr(*inner.cond), "K > 1");
  EXPECT_EQ(inner.thenBody.size(), 1u);
  EXPECT_EQ(inner.elseBody.size(), 1u);
}

TEST(StatementTest, HostLetsInTopLevelConditions) {
  auto op = loadOpText(
      "t.moe", test::wrapBody("let big = N * K > 64 && mode == 0\n"
                              "if big || max(N, H) < 8 { y[n, h] = T(0.0) } else { y[n, h] = x[n, h] }"));
  EXPECT_EQ(op->body[1].ifStmt->cond->operands[1]->operands[0]->kind, ExprKind::Call);
}

TEST(StatementTest, DataDependentConditionsInsideFor) {
  auto op = loadOpText("t.moe", test::wrapBody("y[n, h] = T(0.0)\n"
                                               "for i < N * K {\n"
                                               "  let r = idx[i]\n"
                                               "  if m[r] && r >= 0 { y[r, h] = x[r, h] }\n"
                                               "}"));
  const ForStmt &loop = *op->body[1].forStmt;
  EXPECT_EQ(loop.bounds[0]->type.cls, ExprType::Int);
  EXPECT_EQ(loop.body[1].ifStmt->cond->type.cls, ExprType::Bool);
}

TEST(StatementTest, ExpressionIndicesAndLaterBoundsSeeEarlierVars) {
  auto op = loadOpText("t.moe", test::wrapBody("for i < N, j < i + 1 { y[i * 0 + j, h] = x[i, h] }"));
  const ForStmt &loop = *op->body[0].forStmt;
  EXPECT_EQ(loop.bounds[1]->operands[0]->nameKind, NameKind::IndexVar);
  const Assign &a = *loop.body[0].assign;
  EXPECT_EQ(printExpr(*a.indexExprs[0]), "i * 0 + j");
  EXPECT_EQ(a.indices, (std::vector<std::string>{"", "h"}));
}

TEST(StatementTest, SumAndFoldBoundsMayUseIndexVariablesAndLets) {
  auto op = loadOpText(
      "t.moe",
      test::wrapBody("let two = 2\n"
                     "y[n, h] = T(sum(k < n) f32(x[k, h]) + f32(fold(j < two + H, a = 0) (a + j)))"));
  EXPECT_EQ(op->body[1].assign->value->type.cls, ExprType::Float);
}

TEST(StatementTest, CallsAndFoldTypes) {
  auto op = loadOpText(
      "t.moe", test::wrapBody("y[n, h] = T(fma(f32(x[n, h]), 2.0, max(f32(b[h]), -1.0)))\n"
                              "y[n, h] = min(x[n, h], T(fold(j < K, acc = 0.0) (acc + f32(x[n, h]))))\n"
                              "let allSet = fold(j < K, ok = true) (ok && m[j])"));
  const Expr &fma = *op->body[0].assign->value->operands[0];
  EXPECT_EQ(fma.kind, ExprKind::Call);
  EXPECT_EQ(fma.name, "fma");
  EXPECT_TRUE(fma.type.isF32());
  EXPECT_TRUE(fma.operands[2]->type.isF32());
  const Expr &min = *op->body[1].assign->value;
  EXPECT_TRUE(min.type.floatType.generic);
  EXPECT_TRUE(min.operands[1]->operands[0]->type.isF32()); // the f32 fold
  EXPECT_EQ(op->body[2].let->value->type.cls, ExprType::Bool);
}

} // namespace
} // namespace moec::dsl
