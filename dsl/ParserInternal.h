//===- ParserInternal.h - The DSL's recursive-descent parser (private) -*- C++ -*-===//
//
// The Parser class that parseOp runs over an op's tokens: its token helpers and limits here, its signature
// and statements in Parser.cpp, its expressions in ParseExpressions.cpp.
//===----------------------------------------------------------------------===//
#pragma once

#include "Lexer.h"
#include "moec/dsl/AST.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace moec::dsl::detail {

// Limits that keep every later pass (Sema, printing, MLIR generation, the AST's own destructor), which
// recurse over the tree, well inside the stack, and the work of compiling an op bounded.
constexpr int kMaxNesting = 256;         // levels: parentheses, operators in a chain, blocks, if/for
constexpr size_t kMaxTokens = 200000;    // about 1 MB of dense source
constexpr size_t kMaxExprNodes = 100000; // expression nodes in one op

class Parser {
public:
  explicit Parser(std::shared_ptr<const SourceFile> file) : file_(file), toks_(tokenize(file)) {
    if (toks_.size() > kMaxTokens)
      throw DslError(toks_[kMaxTokens].loc, fmt::format("the op is too long: more than {} tokens", kMaxTokens));
  }

  std::unique_ptr<OpDef> parseOp();

private:
  //===--- Token helpers ---------------------------------------------------===//

  const Token &cur() const { return toks_[pos_]; }
  const Token &peek(size_t ahead) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  const Token &take() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }

  [[noreturn]] void fail(const std::string &message) const { throw DslError(cur().loc, message); }

  /// One more level of nesting for its lifetime; fails past kMaxNesting.
  class Nested {
  public:
    explicit Nested(Parser &p, int levels = 1) : p(p), levels(0) { add(levels); }
    ~Nested() { p.depth_ -= levels; }
    Nested(const Nested &) = delete;
    Nested &operator=(const Nested &) = delete;
    void add(int n = 1) {
      p.depth_ += n;
      levels += n;
      if (p.depth_ > kMaxNesting)
        p.fail(fmt::format("nesting is too deep: more than {} levels of parentheses, chained operators, blocks, "
                           "ifs and fors",
                           kMaxNesting));
    }

  private:
    Parser &p;
    int levels;
  };
  [[noreturn]] void expected(const std::string &what) const {
    fail(fmt::format("expected {} but found {}", what, cur().describe()));
  }

  bool isKw(const char *kw) const { return cur().is(TokKind::Ident, kw); }

  bool acceptPunct(const char *p) {
    if (!cur().isPunct(p))
      return false;
    take();
    return true;
  }

  bool acceptKeyword(const char *kw) {
    if (!isKw(kw))
      return false;
    take();
    return true;
  }

  const Token &expectPunct(const char *p) {
    if (!cur().isPunct(p))
      expected(fmt::format("'{}'", p));
    return take();
  }

  void expectKeyword(const char *kw) {
    if (!acceptKeyword(kw))
      expected(fmt::format("'{}'", kw));
  }

  /// A non-keyword identifier; `what` names it in the error ("a dim name").
  std::string expectName(const char *what) {
    if (cur().kind != TokKind::Ident || isKeyword(cur().text))
      expected(what);
    return take().text;
  }

  //===--- Signature -------------------------------------------------------===//

  // `<T: f16 | bf16 | f32>`
  void parseTypeParam();

  void parseSection();

  template <typename F> void parseList(F entry) {
    do
      entry();
    while (acceptPunct(","));
  }

  // `static` or `runtime`
  bool parseStaticness();

  // `N: runtime [tokens]` (`tokens` is a word only here, so it stays usable as a name elsewhere)
  void parseDim();

  // `top_k as K: static [int|bool] [= default]`
  void parseAttr();

  int64_t parseAttrDefault(bool isBool);

  // `x[?]: T[*R, H] [in [lo, hi)] [unique] [when COND]`
  void parseTensor(bool isOutput);

  std::string typeRefName(const TypeRef &t) const;

  void parseUnique(TensorDecl &t);

  void parseWhen(TensorDecl &t);

  TypeRef parseElemType();

  ShapeDim parseShapeDim(const TensorDecl &t, bool isOutput);

  // `require cond : "message"`
  void parseRequire();

  //===--- Body ------------------------------------------------------------===//

  void parseBody();

  // `{ STMT* }`
  std::vector<Stmt> parseStmts();

  Stmt parseStmt();

  // `for t < Tk, k < K { ... }`
  std::unique_ptr<ForStmt> parseFor();

  // `if cond { ... } [else { ... } | else if ...]`
  std::unique_ptr<IfStmt> parseIf();

  // `let name = value`
  Let parseLet();

  // `target[i, j] = value`; a bare name index is recorded as a name (Sema decides whether it is fresh).
  Assign parseAssign();

  void parseAssignIndex(Assign &a);

  //===--- Expressions -----------------------------------------------------===//

  ExprPtr make(ExprKind k, const SourceLoc &loc);

  ExprPtr parseExpr();

  // Right-associative: `a ? b : c ? d : e` is `a ? b : (c ? d : e)`.
  ExprPtr parseTernary();

  ExprPtr parseBinary(int level);

  ExprPtr parseUnary();

  ExprPtr parsePrimary();

  // An expression that starts with an identifier: literal, sum, fold, rank, present, cast, call, element
  // access or name.
  ExprPtr parseWord();

  bool isTypeParam(const std::string &word) const;
  bool isTypeName(const std::string &word) const;

  // `f32(x)`, `i32(x)`, `bool(x)`, `T(x)`; `name` keeps the spelling for printing.
  ExprPtr parseCast();

  // `fma(a, b, c)`: Sema checks the callee and its arguments.
  ExprPtr parseCall();

  // `tensor[i, j]`
  ExprPtr parseElement();

  // `sum(k < BOUND) BODY`; the body binds like a unary operand, so a block is the usual form.
  ExprPtr parseSum();

  // `fold(k < BOUND, acc = INIT) BODY`; the body binds like a unary operand, as for `sum`.
  ExprPtr parseFold();

  // `rank(tensor)`, `present(tensor)`
  ExprPtr parseTensorQuery(ExprKind kind);

  // `{ let a = e; let b = e  result }`
  ExprPtr parseBlock();

  std::shared_ptr<const SourceFile> file_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  size_t exprNodes_ = 0;
  OpDef *op_ = nullptr;
};

} // namespace moec::dsl::detail
