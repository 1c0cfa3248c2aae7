//===- LexerParserTest.cpp - Parsing and checking the reference op --------===//
#include "TestUtil.h"

#include "moec/dsl/Printer.h"

namespace moec::dsl {
namespace {

class RefOpTest : public ::testing::Test {
protected:
  void SetUp() override { op = loadOpFile(test::refOpPath()); }
  std::unique_ptr<OpDef> op;
};

TEST_F(RefOpTest, HeaderAndTypeParam) {
  EXPECT_EQ(op->name, "moe_init_routing_v2_grad");
  EXPECT_EQ(op->typeParam, "T");
  EXPECT_EQ(op->allowedTypes, (std::vector<DType>{DType::F16, DType::BF16, DType::F32}));
  EXPECT_EQ(op->loc.line, 4);
  EXPECT_EQ(op->loc.col, 4);
}

TEST_F(RefOpTest, Dims) {
  ASSERT_EQ(op->dims.size(), 3u);
  EXPECT_EQ(op->dims[0].name, "N");
  EXPECT_FALSE(op->dims[0].isStatic);
  EXPECT_EQ(op->dims[1].name, "R");
  EXPECT_FALSE(op->dims[1].isStatic);
  EXPECT_EQ(op->dims[2].name, "H");
  EXPECT_TRUE(op->dims[2].isStatic);
  EXPECT_EQ(op->findDim("H"), &op->dims[2]);
  EXPECT_EQ(op->findDim("K"), nullptr);
}

TEST_F(RefOpTest, AttrsWithAliasesAndDefaults) {
  ASSERT_EQ(op->attrs.size(), 3u);
  const AttrDecl &topK = op->attrs[0];
  EXPECT_EQ(topK.name, "top_k");
  EXPECT_EQ(topK.alias, "K");
  EXPECT_EQ(topK.innerName(), "K");
  EXPECT_TRUE(topK.isStatic);
  EXPECT_FALSE(topK.isBool);
  EXPECT_FALSE(topK.defaultValue.has_value());
  EXPECT_EQ(op->attrs[1].innerName(), "drop_pad_mode");
  EXPECT_EQ(op->attrs[1].defaultValue, std::optional<int64_t>(0));
  EXPECT_FALSE(op->attrs[2].isStatic);
  EXPECT_EQ(op->findAttr("top_k"), &topK);
  EXPECT_EQ(op->findAttr("K"), &topK);
  EXPECT_EQ(op->findAttr("N"), nullptr);
}

TEST_F(RefOpTest, Tensors) {
  ASSERT_EQ(op->tensors.size(), 3u);
  const TensorDecl &gx = op->tensors[0];
  EXPECT_EQ(gx.name, "grad_expanded_x");
  EXPECT_FALSE(gx.isOutput);
  EXPECT_TRUE(gx.elem.generic);
  ASSERT_EQ(gx.shape.size(), 2u);
  EXPECT_TRUE(gx.shape[0].flattenLeading);
  EXPECT_FALSE(gx.shape[1].flattenLeading);
  EXPECT_EQ(printExpr(*gx.shape[0].size), "R");
  EXPECT_EQ(gx.rangeLo, nullptr);

  const TensorDecl &idx = op->tensors[1];
  EXPECT_FALSE(idx.elem.generic);
  EXPECT_EQ(idx.elem.fixed, DType::I32);
  EXPECT_EQ(printExpr(*idx.shape[0].size), "N * K");
  ASSERT_NE(idx.rangeLo, nullptr);
  EXPECT_EQ(printExpr(*idx.rangeLo), "drop_pad_mode == 1 ? -1 : 0");
  EXPECT_EQ(printExpr(*idx.rangeHi), "drop_pad_mode == 1 ? R : N * K");
  EXPECT_EQ(idx.rangeLoc.line, 8);

  EXPECT_TRUE(op->tensors[2].isOutput);
  EXPECT_EQ(op->tensorIndex("grad_x"), 2);
  EXPECT_EQ(op->findTensor("nope"), nullptr);
}

TEST_F(RefOpTest, Requires) {
  ASSERT_EQ(op->requires_.size(), 6u);
  EXPECT_EQ(printExpr(*op->requires_[0].cond), "K > 0");
  EXPECT_EQ(op->requires_[0].message, "topK must be > 0");
  EXPECT_EQ(printExpr(*op->requires_[3].cond), "rank(grad_expanded_x) == (drop_pad_mode == 1 ? 3 : 2)");
  EXPECT_EQ(op->requires_[3].cond->operands[0]->refIndex, 0);
  for (const Require &r : op->requires_)
    EXPECT_EQ(r.cond->type.cls, ExprType::Bool) << printExpr(*r.cond);
}

TEST_F(RefOpTest, BodyStructureAndTypes) {
  ASSERT_EQ(op->body.size(), 1u);
  ASSERT_TRUE(op->body[0].assign.has_value());
  const Assign &a = *op->body[0].assign;
  EXPECT_EQ(a.target, "grad_x");
  EXPECT_EQ(a.tensorIndex, 2);
  EXPECT_EQ(a.indices, (std::vector<std::string>{"n", "h"}));
  EXPECT_TRUE(a.value->type.isF32());

  const Expr &sum = *a.value;
  ASSERT_EQ(sum.kind, ExprKind::Sum);
  EXPECT_EQ(sum.name, "k");
  EXPECT_EQ(sum.operands[0]->nameKind, NameKind::Attr);
  EXPECT_EQ(sum.operands[0]->refIndex, 0);

  const Expr &block = *sum.operands[1];
  ASSERT_EQ(block.kind, ExprKind::Block);
  ASSERT_EQ(block.lets.size(), 2u);
  EXPECT_EQ(block.lets[0].name, "r");
  EXPECT_EQ(block.lets[0].value->kind, ExprKind::Element);
  EXPECT_EQ(block.lets[0].value->type.cls, ExprType::Int);
  EXPECT_EQ(block.lets[1].value->type.cls, ExprType::Bool);

  const Expr &select = *block.operands[0];
  ASSERT_EQ(select.kind, ExprKind::Select);
  EXPECT_EQ(select.operands[0]->nameKind, NameKind::Let);
  const Expr &cast = *select.operands[1];
  ASSERT_EQ(cast.kind, ExprKind::Cast);
  EXPECT_TRUE(cast.type.isF32());
  const Expr &load = *cast.operands[0];
  EXPECT_EQ(load.kind, ExprKind::Element);
  EXPECT_EQ(load.refIndex, 0);
  EXPECT_EQ(load.type.cls, ExprType::Float);
  EXPECT_TRUE(load.type.floatType.generic);
  EXPECT_EQ(load.operands.size(), 2u); // *R counts as one index
  EXPECT_EQ(load.operands[1]->nameKind, NameKind::IndexVar);
  EXPECT_EQ(select.operands[2]->kind, ExprKind::FloatLit);
}

TEST_F(RefOpTest, AstDump) {
  std::string ast = printAst(*op);
  EXPECT_NE(ast.find("op moe_init_routing_v2_grad<T: f16 | bf16 | f32>\n"), std::string::npos) << ast;
  EXPECT_NE(ast.find("  attr top_k as K: static int = <none>\n"), std::string::npos) << ast;
  EXPECT_NE(ast.find("  in grad_expanded_x: T[*R, H]\n"), std::string::npos) << ast;
  EXPECT_NE(ast.find("  assign grad_x[n, h] : f32\n    Sum k < K : f32\n      Block : f32\n"
                     "        let r = Element expanded_row_idx : int\n"),
            std::string::npos)
      << ast;
  EXPECT_NE(ast.find("Cast f32 : f32\n"), std::string::npos) << ast;
}

TEST(ParserTest, SectionsInAnyOrderAndRepeated) {
  auto op = loadOpText("t.moe", "op t out y: f32[N]; dim N: runtime; in x: f32[N]; dim H: static\n"
                                "{ let two = 2.0; y[i] = x[i] * two }");
  EXPECT_TRUE(op->typeParam.empty());
  EXPECT_EQ(op->dims.size(), 2u);
  EXPECT_EQ(op->tensors[0].name, "y");
  ASSERT_EQ(op->body.size(), 2u);
  ASSERT_TRUE(op->body[0].let.has_value());
  EXPECT_TRUE(op->body[1].assign->value->type.isF32());
  EXPECT_EQ(op->body[1].assign->value->operands[1]->nameKind, NameKind::Let);
}

TEST(ParserTest, BoolAttrsNegativeDefaultsAndEscapes) {
  auto op = loadOpText("t.moe", "op t dim N: runtime\n"
                                "attr a: static = -3, f: runtime bool = true, g: static int\n"
                                "in x: i8[N] out y: i32[N]\n"
                                "require f || a < 0 : \"say \\\"hi\\\" \\\\ bye\"\n"
                                "{ y[i] = f ? i32(x[i]) : a }");
  EXPECT_EQ(op->attrs[0].defaultValue, std::optional<int64_t>(-3));
  EXPECT_TRUE(op->attrs[1].isBool);
  EXPECT_EQ(op->attrs[1].defaultValue, std::optional<int64_t>(1));
  EXPECT_FALSE(op->attrs[2].isBool);
  EXPECT_EQ(op->requires_[0].message, "say \"hi\" \\ bye");
  EXPECT_EQ(op->body[0].assign->value->type.cls, ExprType::Int);
}

TEST(ParserTest, TheTokensDimIsMarkedAndPrinted) {
  auto op = loadOpText("t.moe", "op t dim N: runtime tokens, tokens: runtime, H: static\n"
                                "in x: f32[N, H] out y: f32[N, H] { y[n, h] = x[n, h] * f32(tokens) }");
  ASSERT_EQ(op->dims.size(), 3u);
  EXPECT_TRUE(op->dims[0].isTokens);
  EXPECT_FALSE(op->dims[1].isTokens) << "'tokens' is a word only after 'runtime'; elsewhere a name";
  EXPECT_FALSE(op->dims[2].isTokens);
  std::string ast = printAst(*op);
  EXPECT_NE(ast.find("  dim N: runtime tokens\n  dim tokens: runtime\n"), std::string::npos) << ast;
}

TEST(ParserTest, FloatLiteralsAndComments) {
  auto op = loadOpText("t.moe", "op t # comment\n dim N: runtime in x: f32[N] out y: f32[N]\n"
                                "{ y[i] = x[i] * 1.5e-3 + 2e2 + 0.25 } # trailing comment\n");
  const Expr &v = *op->body[0].assign->value;
  EXPECT_EQ(printExpr(v), "x[i] * 0.0015 + 200.0 + 0.25");
}

TEST(ParserTest, PrecedenceAndAssociativity) {
  auto op = loadOpText("t.moe", "op t dim N: runtime in x: i32[N] out y: i32[N]\n"
                                "{ y[i] = 1 - 2 - 3 * 4 % 5 + (i < 2 ? 1 : i > 3 ? 2 : 3) }");
  const Expr &v = *op->body[0].assign->value;
  ASSERT_EQ(v.kind, ExprKind::Binary);
  EXPECT_EQ(v.binOp, BinOp::Add);
  const Expr &lhs = *v.operands[0]; // (1 - 2) - ((3 * 4) % 5)
  EXPECT_EQ(lhs.binOp, BinOp::Sub);
  EXPECT_EQ(lhs.operands[0]->binOp, BinOp::Sub);
  EXPECT_EQ(lhs.operands[1]->binOp, BinOp::Mod);
  const Expr &sel = *v.operands[1];
  ASSERT_EQ(sel.kind, ExprKind::Select);
  EXPECT_EQ(sel.operands[2]->kind, ExprKind::Select); // right-associative
}

TEST(ParserTest, LocationsAreOneBased) {
  auto op = loadOpText("t.moe", "op t\n  dim N: runtime\n\tin x: f32[N]\n  out y: f32[N] { y[i] = x[i] }");
  EXPECT_EQ(op->dims[0].loc.line, 2);
  EXPECT_EQ(op->dims[0].loc.col, 7);
  EXPECT_EQ(op->tensors[0].loc.line, 3);
  EXPECT_EQ(op->tensors[0].loc.col, 5);
  EXPECT_EQ(op->body[0].assign->loc.col, 19);
}

TEST(ParserTest, UnreadableFile) {
  try {
    loadOpFile("/nonexistent/dir/op.moe");
    FAIL() << "expected an error";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("cannot read '/nonexistent/dir/op.moe': "), std::string::npos)
        << e.what();
  }
}

} // namespace
} // namespace moec::dsl
