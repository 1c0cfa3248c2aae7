//===- Parser.cpp - Tokens to AST -----------------------------------------===//
//
// A recursive-descent parser over the whole token stream. Newlines mean nothing: a statement or
// expression ends where the next token cannot continue it.
//
// This file: the op's signature and body statements, and the entry points. The token helpers are in
// ParserInternal.h, expressions in ParseExpressions.cpp.
//===----------------------------------------------------------------------===//
#include "moec/dsl/Parser.h"

#include "Lexer.h"
#include "ParserInternal.h"
#include "moec/dsl/Sema.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace moec::dsl {

namespace detail {

std::unique_ptr<OpDef> Parser::parseOp() {
  auto op = std::make_unique<OpDef>();
  op->source = file_;
  expectKeyword("op");
  op->loc = cur().loc;
  op->name = expectName("an op name");
  op_ = op.get();
  if (acceptPunct("<"))
    parseTypeParam();
  while (!cur().isPunct("{")) {
    parseSection();
    acceptPunct(";");
  }
  parseBody();
  if (cur().kind != TokKind::End)
    fail(fmt::format("expected end of file after the op body but found {}", cur().describe()));
  return op;
}

void Parser::parseTypeParam() {
  op_->typeParam = expectName("a type parameter name");
  expectPunct(":");
  do {
    if (cur().kind != TokKind::Ident)
      expected("a dtype");
    const Token &t = cur();
    std::optional<DType> dt = parseDType(t.text);
    if (!dt)
      fail(fmt::format("unknown dtype '{}'", t.text));
    if (!isFloat(*dt))
      fail(fmt::format("type parameter '{}' may only be f16, bf16 or f32, not '{}'", op_->typeParam,
                       t.text));
    op_->allowedTypes.push_back(*dt);
    take();
  } while (acceptPunct("|"));
  expectPunct(">");
}

void Parser::parseSection() {
  if (acceptKeyword("dim"))
    parseList([&] { parseDim(); });
  else if (acceptKeyword("attr"))
    parseList([&] { parseAttr(); });
  else if (acceptKeyword("in"))
    parseList([&] { parseTensor(false); });
  else if (acceptKeyword("out"))
    parseList([&] { parseTensor(true); });
  else if (acceptKeyword("require"))
    parseRequire();
  else
    expected("a section keyword (dim, attr, in, out, require) or '{'");
}

bool Parser::parseStaticness() {
  if (acceptKeyword("static"))
    return true;
  if (acceptKeyword("runtime"))
    return false;
  expected("'static' or 'runtime'");
}

void Parser::parseDim() {
  DimDecl d;
  d.loc = cur().loc;
  d.name = expectName("a dim name");
  expectPunct(":");
  d.isStatic = parseStaticness();
  if (cur().is(TokKind::Ident, "tokens")) {
    if (d.isStatic)
      fail("only a runtime dim can be the token count ('tokens')");
    take();
    d.isTokens = true;
  }
  op_->dims.push_back(std::move(d));
}

void Parser::parseAttr() {
  AttrDecl a;
  a.loc = cur().loc;
  a.name = expectName("an attr name");
  if (acceptKeyword("as"))
    a.alias = expectName("an attr alias");
  expectPunct(":");
  a.isStatic = parseStaticness();
  if (!acceptKeyword("int"))
    a.isBool = acceptKeyword("bool");
  if (acceptPunct("="))
    a.defaultValue = parseAttrDefault(a.isBool);
  op_->attrs.push_back(std::move(a));
}

int64_t Parser::parseAttrDefault(bool isBool) {
  if (isBool) {
    if (acceptKeyword("true"))
      return 1;
    if (acceptKeyword("false"))
      return 0;
    expected("'true' or 'false' (the attr is bool)");
  }
  bool negative = acceptPunct("-");
  if (cur().kind != TokKind::Int)
    expected("an integer default");
  int64_t v = take().intValue;
  return negative ? -v : v;
}

void Parser::parseTensor(bool isOutput) {
  TensorDecl t;
  t.loc = cur().loc;
  t.isOutput = isOutput;
  t.name = expectName("a tensor name");
  t.optional = acceptPunct("?");
  expectPunct(":");
  t.elem = parseElemType();
  expectPunct("[");
  if (!cur().isPunct("]"))
    parseList([&] { t.shape.push_back(parseShapeDim(t, isOutput)); });
  expectPunct("]");
  if (isKw("in") && peek(1).isPunct("[")) {
    t.rangeLoc = take().loc;
    take(); // '['
    t.rangeLo = parseExpr();
    expectPunct(",");
    t.rangeHi = parseExpr();
    expectPunct(")");
  }
  if (isKw("unique"))
    parseUnique(t);
  if (isKw("when"))
    parseWhen(t);
  else if (t.optional && t.isOutput)
    throw DslError(t.loc,
                   fmt::format("optional output '{}' needs `when COND` (when it is produced)", t.name));
  op_->tensors.push_back(std::move(t));
}

std::string Parser::typeRefName(const TypeRef &t) const { return t.generic ? op_->typeParam : dtypeName(t.fixed); }

void Parser::parseUnique(TensorDecl &t) {
  if (t.isOutput)
    fail(fmt::format("`unique` is only allowed on inputs; '{}' is an output", t.name));
  if (t.elem.generic || (t.elem.fixed != DType::I32 && t.elem.fixed != DType::I8))
    fail(fmt::format("`unique` needs an integer tensor; '{}' holds {}", t.name, typeRefName(t.elem)));
  take();
  t.unique = true;
}

void Parser::parseWhen(TensorDecl &t) {
  if (!t.isOutput)
    fail(fmt::format("`when` is only allowed on an optional output; '{}' is an input", t.name));
  if (!t.optional)
    fail(fmt::format("`when` is only allowed on an optional output; '{}' is not optional (write '{}?')",
                     t.name, t.name));
  take();
  t.when = parseExpr();
}

TypeRef Parser::parseElemType() {
  const Token &t = cur();
  if (t.kind != TokKind::Ident)
    expected("an element type");
  if (isTypeParam(t.text)) {
    take();
    return TypeRef{true, DType::F32};
  }
  std::optional<DType> dt = parseDType(t.text);
  if (!dt)
    fail(fmt::format("unknown element type '{}'", t.text));
  take();
  return TypeRef{false, *dt};
}

ShapeDim Parser::parseShapeDim(const TensorDecl &t, bool isOutput) {
  ShapeDim d;
  if (cur().isPunct("*")) {
    if (isOutput || !t.shape.empty())
      fail("'*' (flatten leading dims) is only allowed on the first shape entry of an input");
    take();
    d.flattenLeading = true;
  }
  d.size = parseExpr();
  return d;
}

void Parser::parseRequire() {
  Require r;
  r.loc = cur().loc;
  r.cond = parseExpr();
  expectPunct(":");
  if (cur().kind != TokKind::String)
    expected("a message string");
  r.message = take().text;
  op_->requires_.push_back(std::move(r));
}

void Parser::parseBody() { op_->body = parseStmts(); }

std::vector<Stmt> Parser::parseStmts() {
  Nested nested(*this);
  expectPunct("{");
  std::vector<Stmt> stmts;
  while (!acceptPunct("}")) {
    if (cur().kind == TokKind::End)
      expected("'}'");
    stmts.push_back(parseStmt());
    acceptPunct(";");
  }
  return stmts;
}

Stmt Parser::parseStmt() {
  Stmt s;
  if (isKw("let"))
    s.let = parseLet();
  else if (isKw("for"))
    s.forStmt = parseFor();
  else if (isKw("if"))
    s.ifStmt = parseIf();
  else
    s.assign = parseAssign();
  return s;
}

std::unique_ptr<ForStmt> Parser::parseFor() {
  auto f = std::make_unique<ForStmt>();
  f->loc = take().loc;
  parseList([&] {
    f->varLocs.push_back(cur().loc);
    f->vars.push_back(expectName("a loop variable"));
    expectPunct("<");
    f->bounds.push_back(parseExpr());
  });
  f->body = parseStmts();
  return f;
}

std::unique_ptr<IfStmt> Parser::parseIf() {
  auto s = std::make_unique<IfStmt>();
  s->loc = take().loc;
  s->cond = parseExpr();
  s->thenBody = parseStmts();
  if (!acceptKeyword("else"))
    return s;
  if (isKw("if")) {
    Stmt nested;
    nested.ifStmt = parseIf();
    s->elseBody.push_back(std::move(nested));
  } else {
    s->elseBody = parseStmts();
  }
  return s;
}

Let Parser::parseLet() {
  Let l;
  l.loc = take().loc;
  l.name = expectName("a let name");
  expectPunct("=");
  l.value = parseExpr();
  return l;
}

Assign Parser::parseAssign() {
  Assign a;
  a.loc = cur().loc;
  a.target = expectName("a statement (let, for, if or an assignment)");
  expectPunct("[");
  if (!cur().isPunct("]"))
    parseList([&] { parseAssignIndex(a); });
  expectPunct("]");
  expectPunct("=");
  a.value = parseExpr();
  return a;
}

void Parser::parseAssignIndex(Assign &a) {
  a.indexLocs.push_back(cur().loc);
  ExprPtr x = parseExpr();
  bool bareName = x->kind == ExprKind::Name;
  a.indices.push_back(bareName ? x->name : "");
  a.indexExprs.push_back(bareName ? nullptr : std::move(x));
}

} // namespace detail

std::unique_ptr<OpDef> parseOp(std::shared_ptr<const SourceFile> file) {
  return detail::Parser(std::move(file)).parseOp();
}

std::unique_ptr<OpDef> loadOpText(const std::string &path, const std::string &text) {
  auto file = std::make_shared<SourceFile>(SourceFile{path, text});
  std::unique_ptr<OpDef> op = parseOp(file);
  checkOp(*op);
  return op;
}

std::unique_ptr<OpDef> loadOpFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  return loadOpText(path, text.str());
}

} // namespace moec::dsl
