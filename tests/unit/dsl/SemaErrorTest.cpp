//===- SemaErrorTest.cpp - Located diagnostics for malformed ops ----------===//
#include "TestUtil.h"

namespace moec::dsl {
namespace {

struct ErrorCase {
  const char *name;
  std::string text;
  int line, col;
  const char *message; // a substring of the plain message
};

std::ostream &operator<<(std::ostream &os, const ErrorCase &c) { return os << c.name; }

/// Standalone op text (not wrapped), for signature-level errors.
ErrorCase raw(const char *name, std::string text, int line, int col, const char *message) {
  return {name, text, line, col, message};
}

/// A body statement on line 7 of test::wrapBody.
ErrorCase body(const char *name, const char *stmt, int line, int col, const char *message) {
  return {name, test::wrapBody(stmt), line, col, message};
}

class ErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ErrorTest, ReportsLocationMessageAndCaret) {
  const ErrorCase &c = GetParam();
  try {
    loadOpText("bad.moe", c.text);
    FAIL() << "no error for:\n" << c.text;
  } catch (const DslError &e) {
    EXPECT_EQ(e.loc().line, c.line) << e.what();
    EXPECT_EQ(e.loc().col, c.col) << e.what();
    EXPECT_NE(e.message().find(c.message), std::string::npos) << e.what();
    std::string header = "bad.moe:" + std::to_string(c.line) + ":" + std::to_string(c.col) + ": error: ";
    EXPECT_EQ(std::string(e.what()).rfind(header, 0), 0u) << e.what();
    std::string caretLine = "\n" + std::string(c.col - 1, ' ') + "^";
    EXPECT_NE(std::string(e.what()).find(caretLine), std::string::npos) << e.what();
  }
}

const ErrorCase kCases[] = {
    // Lexer.
    body("BadCharacter", "y[n, h] = x[n, h] @ 2", 7, 19, "unexpected character '@'"),
    raw("UnterminatedString", "op t dim N: runtime\nrequire N > 0 : \"oops\n{ }", 2, 17,
        "unterminated string literal"),
    raw("UnknownEscape", "op t dim N: runtime\nrequire N > 0 : \"a\\n\" { }", 2, 19, "unknown escape"),
    body("MalformedNumber", "y[n, h] = 1.5x", 7, 11, "malformed number"),
    // Syntax.
    raw("MissingSectionKeyword", "op t dim N: runtime\nfoo", 2, 1,
        "expected a section keyword (dim, attr, in, out, require) or '{' but found 'foo'"),
    raw("ShapeNotClosed", "op t dim N: runtime\nin x: f32[N, N)", 2, 15, "expected ']' but found ')'"),
    body("AssignIndicesNeedComma", "y[n h] = 0.0", 7, 5, "expected ']' but found 'h'"),
    body("MissingExpression", "y[n, h] = x[n,, h]", 7, 15, "expected an expression but found ','"),
    raw("StaticTokensDim", "op t dim N: static tokens { }", 1, 20, "only a runtime dim can be the token count"),
    raw("TwoTokensDims", "op t dim N: runtime tokens, M: runtime tokens { }", 1, 29,
        "'N' and 'M' both claim to be the token count"),
    raw("RequireWithoutMessage", "op t dim N: runtime require N > 0 { }", 1, 35,
        "expected ':' but found '{'"),
    raw("TrailingJunk", test::wrapBody("y[n, h] = 0.0") + "junk", 9, 1,
        "expected end of file after the op body but found 'junk'"),
    raw("MissingBodyEnd", "op t dim N: runtime out y: f32[N] { y[i] = 0.0", 1, 47,
        "expected '}' but found end of file"),
    raw("KeywordAsName", "op t dim let: runtime", 1, 10, "expected a dim name but found 'let'"),
    raw("FlattenOnOutput", "op t dim N: runtime out y: f32[*N]", 1, 32,
        "only allowed on the first shape entry"),
    raw("FlattenNotFirst", "op t dim N: runtime in x: f32[N, *N]", 1, 34,
        "only allowed on the first shape entry"),
    raw("BoolAttrIntDefault", "op t attr f: static bool = 1", 1, 28, "expected 'true' or 'false'"),
    body("UnknownFunction", "y[n, h] = foo(1)", 7, 11, "unknown function 'foo'"),
    body("KeywordCall", "y[n, h] = for(1)", 7, 11, "expected an expression but found 'for'"),
    // Types and dtypes.
    raw("UnknownDType", "op t<T: f64>", 1, 9, "unknown dtype 'f64'"),
    raw("IntTypeParam", "op t<T: f32 | i32>", 1, 15, "may only be f16, bf16 or f32"),
    raw("UnknownElementType", "op t dim N: runtime in x: f64[N]", 1, 27, "unknown element type 'f64'"),
    raw("UndeclaredTypeParam", "op t dim N: runtime in x: T[N]", 1, 27, "unknown element type 'T'"),
    // Names.
    body("UnknownName", "y[n, h] = Q", 7, 11, "unknown name 'Q'"),
    raw("UnknownNameInShape", "op t dim N: runtime\nin x: f32[Q, N] { }", 2, 11, "unknown name 'Q'"),
    raw("DuplicateDim", "op t dim N: runtime, N: static { }", 1, 22,
        "duplicate name 'N' (first declared at 1:10)"),
    raw("AliasClashesWithDim", "op t dim K: static attr top_k as K: static { }", 1, 25, "duplicate name 'K'"),
    raw("DuplicateTensor", "op t dim N: runtime in x: f32[N] out x: f32[N] { }", 1, 38, "duplicate name 'x'"),
    body("DuplicateLet", "let a = 1 let a = 2", 7, 11, "duplicate name 'a'"),
    body("LetShadowsDim", "let N = 1", 7, 1, "'N' shadows a dim"),
    body("IndexShadowsAttr", "y[K, h] = 0.0", 7, 3, "'K' shadows an attr"),
    body("RepeatedIndex", "y[n, n] = 0.0", 7, 6, "duplicate name 'n'"),
    body("TensorAsValue", "y[n, h] = x", 7, 11, "'x' is a tensor"),
    body("IndexOutOfScope", "y[n, h] = sum(k < K) f32(x[n, h])\nlet z = k", 8, 9, "unknown name 'k'"),
    // Element access.
    body("ElementRankMismatch", "y[n, h] = x[n]", 7, 11, "'x' has rank 2 but is indexed with 1 indices"),
    body("ElementIndexNotInt", "y[n, h] = x[n, 1.0]", 7, 16, "a tensor index must be int, found f32"),
    body("ReadOutput", "y[n, h] = y[n, h]", 7, 11, "cannot read output 'y'"),
    raw("ElementInShape", "op t dim N: runtime in i: i32[N], x: f32[i[0]] { }", 1, 42,
        "element access is not allowed in a shape"),
    // Operators.
    body("MixBf16AndF32", "y[n, h] = f32(x[n, h]) + b[h]", 7, 24,
         "cannot mix f32 and bf16; cast with f32(...)"),
    body("MixTAndF32", "y[n, h] = x[n, h] * 2.0", 7, 19, "cannot mix T and f32; cast with f32(...)"),
    body("MixIntAndFloat", "y[n, h] = 1 + 2.0", 7, 13, "cannot mix int and f32"),
    body("FloatModulo", "y[n, h] = x[n, h] % x[n, h]", 7, 19, "'%' needs int operands, found T"),
    body("AndOnInts", "y[n, h] = n && h ? 0.0 : 1.0", 7, 13, "'&&' needs bool operands, found int and int"),
    body("NotOnInt", "y[n, h] = !n ? 0.0 : 1.0", 7, 11, "'!' needs a bool operand, found int"),
    body("SelectBranchesDiffer", "y[n, h] = m[n] ? x[n, h] : 0.0", 7, 16, "cannot mix T and f32"),
    body("SelectConditionNotBool", "y[n, h] = n ? 0.0 : 1.0", 7, 11, "condition of '?:' must be bool"),
    body("BoolComparedWithLess", "y[n, h] = m[n] < flag ? 0.0 : 1.0", 7, 16,
         "'<' needs int or float operands"),
    // Sums.
    body("SumBoundRuntimeDim", "y[n, h] = sum(k < N) f32(x[k, h])", 7, 19,
         "sum bound must be static; 'N' is a runtime dim"),
    body("SumBoundRuntimeAttr", "y[n, h] = sum(k < mode + 1) f32(x[k, h])", 7, 19,
         "'mode' is a runtime attr"),
    body("SumBodyNotF32", "y[n, h] = sum(k < K) x[n, h]", 7, 22,
         "sum accumulates in f32; cast the body with f32(...)"),
    body("SumIndexShadowsDim", "y[n, h] = sum(H < K) 0.0", 7, 11, "'H' shadows a dim"),
    // Rank.
    body("RankOutsideRequire", "y[n, h] = T(rank(x))", 7, 13, "rank() is only allowed in a require"),
    raw("RankOfNonTensor", "op t dim N: runtime require rank(N) > 0 : \"m\" { }", 1, 29,
        "'N' is not a tensor"),
    raw("RequireNotBool", "op t dim N: runtime require N + 1 : \"m\" { }", 1, 31,
        "a require condition must be bool, found int"),
    // Ranges and shapes.
    raw("RangeOnFloatTensor", "op t dim N: runtime\nin x: f32[N] in [0, N) { }", 2, 14,
        "a value range needs an integer tensor; 'x' holds f32"),
    raw("ShapeNotInt", "op t dim N: runtime in x: f32[N > 1] { }", 1, 33,
        "a shape entry must be int, found bool"),
    // Assignments.
    body("AssignToInput", "x[n, h] = 0.0", 7, 1, "cannot assign to input 'x'"),
    body("AssignUnknownTensor", "z[n] = 0.0", 7, 1, "unknown tensor 'z'"),
    body("OutputNeverAssigned", "let a = 1", 5, 5, "output 'y' is never assigned"),
    body("AssignRankMismatch", "y[n] = 0.0", 7, 1, "'y' has rank 2 but is assigned with 1 indices"),
    body("StoreWrongType", "y[n, h] = 1", 7, 11, "cannot store int into 'y' of type T"),
    body("StoreBf16IntoT", "y[n, h] = b[h]", 7, 11, "cannot store bf16 into 'y' of type T"),
    // Optional and unique tensors.
    raw("WhenMissingOnOptionalOutput", "op t dim N: runtime\nout y?: f32[N] { }", 2, 5,
        "optional output 'y' needs `when COND`"),
    raw("WhenOnRequiredOutput", "op t dim N: runtime\nout y: f32[N] when N > 0 { }", 2, 15,
        "`when` is only allowed on an optional output; 'y' is not optional"),
    raw("WhenOnInput", "op t dim N: runtime\nin x?: f32[N] when N > 0 { }", 2, 15,
        "`when` is only allowed on an optional output; 'x' is an input"),
    raw("WhenNotBool", "op t dim N: runtime\nout y?: f32[N] when N + 1 { y[i] = 0.0 }", 2, 23,
        "a `when` condition must be bool, found int"),
    raw("WhenReadsTensor", "op t dim N: runtime in m: bool[N]\nout y?: f32[N] when m[0] { y[i] = 0.0 }", 2,
        21, "element access is not allowed in a `when` condition"),
    raw("UniqueOnFloatTensor", "op t dim N: runtime\nin x: f32[N] unique { }", 2, 14,
        "`unique` needs an integer tensor; 'x' holds f32"),
    raw("UniqueOnOutput", "op t dim N: runtime\nout y: i32[N] unique { y[i] = 0 }", 2, 15,
        "`unique` is only allowed on inputs; 'y' is an output"),
    raw("PresentInShape", "op t dim N: runtime in o?: f32[N], x: f32[present(o) ? 1 : 2] { }", 1, 43,
        "present() is not allowed in a shape"),
    body("PresentOfRequiredTensor", "y[n, h] = present(x) ? x[n, h] : T(0.0)", 7, 11,
         "present() needs an optional tensor; 'x' is always present"),
    body("PresentOfNonTensor", "y[n, h] = present(N) ? x[n, h] : T(0.0)", 7, 11, "'N' is not a tensor"),
    // Folds and calls.
    body("FoldBodyTypeMismatch", "let c = fold(j < K, a = 0) m[j]", 7, 28,
         "the fold body must have the accumulator's type int, found bool"),
    body("FoldBoundRuntimeDim", "let c = fold(j < N, a = 0) a + 1", 7, 18,
         "fold bound must be static; 'N' is a runtime dim"),
    body("FoldBoundAccumulator", "let c = fold(j < 4, a = 0) fold(i < a, b = a) b", 7, 37,
         "fold bound must be static; 'a' is an accumulator"),
    body("FoldAccumulatorOutOfScope", "let c = fold(j < K, a = 0) a\nlet d = a", 8, 9, "unknown name 'a'"),
    body("FmaNonF32Argument", "y[n, h] = fma(f32(x[n, h]), x[n, h], 1.0)", 7, 29,
         "fma() needs f32 arguments, found T"),
    body("FmaArity", "y[n, h] = fma(1.0, 2.0)", 7, 11, "fma() takes 3 arguments, found 2"),
    body("MinMixesIntAndFloat", "y[n, h] = T(min(n, 1.0))", 7, 13, "cannot mix int and f32"),
    body("MaxOfBools", "let c = max(true, false)", 7, 9,
         "max() needs int or float arguments, found bool and bool"),
    // Statements.
    body("IndexedStoreOutsideFor", "let r = 1\ny[r, h] = 0.0", 8, 3,
         "an indexed store needs an enclosing `for`"),
    body("ExpressionIndexOutsideFor", "y[n + 1, h] = 0.0", 7, 3, "an indexed store needs an enclosing `for`"),
    body("StoreIndexNotInt", "for i < N { y[i > 0, h] = 0.0 }", 7, 17,
         "a store index must be int, found bool"),
    body("DataDependentTopLevelIf", "if m[0] { y[n, h] = 0.0 }", 7, 4,
         "a condition outside a `for` must depend only on dims, attributes and present()"),
    body("TopLevelIfOnTensorLet", "let v = idx[0]\nif v > 0 { y[n, h] = 0.0 }", 8, 4,
         "a condition outside a `for` must depend only on dims, attributes and present()"),
    body("IfConditionNotBool", "if N { y[n, h] = 0.0 }", 7, 4, "an if condition must be bool, found int"),
    body("ForBoundNotInt", "for i < m[0] { y[i, h] = 0.0 }", 7, 9, "a for bound must be int, found bool"),
    body("FreshIndexShadowsTensor", "y[x, h] = 0.0", 7, 3, "'x' shadows a tensor"),
    body("SumVarShadowsForVar", "for i < N { y[i, h] = T(sum(i < K) 1.0) }", 7, 25,
         "'i' shadows an index variable"),
    body("NestedForVarShadowsForVar", "for i < N {\n  for i < H { y[i, h] = 0.0 }\n}", 8, 7,
         "'i' shadows an index variable"),
    body("LetShadowsForVar", "for i < N { let i = 1 }", 7, 13, "'i' shadows an index variable"),
    body("LetShadowsOuterLet", "let a = 1\nif true { let a = 2 }", 8, 11, "'a' shadows a let"),
    body("LetScopedToForBody", "for i < N { let a = i }\nlet b = a", 8, 9, "unknown name 'a'"),
    body("ForVarScopedToFor", "for i < N { y[i, h] = 0.0 }\nlet b = i", 8, 9, "unknown name 'i'"),
    body("ElseWithoutBlock", "if true { y[n, h] = 0.0 } else y[n, h] = 1.0", 7, 32,
         "expected '{' but found 'y'"),
};

INSTANTIATE_TEST_SUITE_P(Dsl, ErrorTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<ErrorCase> &i) {
                           return std::string(i.param.name);
                         });

TEST(DiagnosticTest, CaretPaddingKeepsTabs) {
  auto file = std::make_shared<SourceFile>(SourceFile{"f.moe", "a\n\tin x: f32[Q]\n"});
  std::string text = renderDiagnostic(SourceLoc{file, 2, 12}, "unknown name 'Q'");
  EXPECT_EQ(text, "f.moe:2:12: error: unknown name 'Q'\n\tin x: f32[Q]\n\t          ^");
}

TEST(DiagnosticTest, UnknownLocation) {
  auto file = std::make_shared<SourceFile>(SourceFile{"f.moe", ""});
  EXPECT_EQ(renderDiagnostic(SourceLoc{file, 0, 0}, "oops"), "f.moe: error: oops");
  EXPECT_EQ(renderDiagnostic(SourceLoc{}, "oops"), "error: oops");
}

TEST(DiagnosticTest, LineText) {
  SourceFile f{"f", "one\r\ntwo\nthree"};
  EXPECT_EQ(f.lineText(1), "one");
  EXPECT_EQ(f.lineText(2), "two");
  EXPECT_EQ(f.lineText(3), "three");
  EXPECT_EQ(f.lineText(4), "");
}

} // namespace
} // namespace moec::dsl
