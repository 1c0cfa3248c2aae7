//===- ParseExpressions.cpp - Expressions of the DSL to AST ---------------===//
//
// The Parser's expressions: `c ? a : b` (right-associative), binary operators by precedence (all
// left-associative), unary operators, and the primaries: literals, names, element accesses, casts, calls,
// sum, fold, rank, present and blocks. Each node counts against the op's limit of expression nodes.
//===----------------------------------------------------------------------===//
#include "ParserInternal.h"

#include <fmt/format.h>

namespace moec::dsl::detail {

namespace {

/// Binary operators by precedence level, lowest first; all left-associative.
struct BinOpInfo {
  const char *spelling;
  BinOp op;
  int level;
};
constexpr BinOpInfo kBinOps[] = {
    {"||", BinOp::Or, 1}, {"&&", BinOp::And, 2}, {"==", BinOp::Eq, 3}, {"!=", BinOp::Ne, 3},
    {"<", BinOp::Lt, 4},  {"<=", BinOp::Le, 4},  {">", BinOp::Gt, 4},  {">=", BinOp::Ge, 4},
    {"+", BinOp::Add, 5}, {"-", BinOp::Sub, 5},  {"*", BinOp::Mul, 6}, {"/", BinOp::Div, 6},
    {"%", BinOp::Mod, 6},
};
constexpr int kMaxBinLevel = 6;

const BinOpInfo *findBinOp(const Token &t) {
  if (t.kind != TokKind::Punct)
    return nullptr;
  for (const BinOpInfo &b : kBinOps)
    if (t.text == b.spelling)
      return &b;
  return nullptr;
}

} // namespace

ExprPtr Parser::make(ExprKind k, const SourceLoc &loc) {
  if (++exprNodes_ > kMaxExprNodes)
    throw DslError(loc, fmt::format("the op is too large: more than {} expression nodes", kMaxExprNodes));
  return std::make_unique<Expr>(k, loc);
}

ExprPtr Parser::parseExpr() { return parseTernary(); }

ExprPtr Parser::parseTernary() {
  Nested nested(*this);
  ExprPtr cond = parseBinary(1);
  if (!cur().isPunct("?"))
    return cond;
  ExprPtr e = make(ExprKind::Select, take().loc);
  e->operands.push_back(std::move(cond));
  e->operands.push_back(parseTernary());
  expectPunct(":");
  e->operands.push_back(parseTernary());
  return e;
}

ExprPtr Parser::parseBinary(int level) {
  if (level > kMaxBinLevel)
    return parseUnary();
  ExprPtr lhs = parseBinary(level + 1);
  // Each operator of a left-associative chain makes the tree one level deeper.
  Nested chain(*this, 0);
  for (const BinOpInfo *b = findBinOp(cur()); b && b->level == level; b = findBinOp(cur())) {
    chain.add();
    ExprPtr e = make(ExprKind::Binary, take().loc);
    e->binOp = b->op;
    e->operands.push_back(std::move(lhs));
    e->operands.push_back(parseBinary(level + 1));
    lhs = std::move(e);
  }
  return lhs;
}

ExprPtr Parser::parseUnary() {
  if (!cur().isPunct("-") && !cur().isPunct("!"))
    return parsePrimary();
  Nested nested(*this);
  ExprPtr e = make(ExprKind::Unary, cur().loc);
  e->unOp = take().text == "-" ? UnOp::Neg : UnOp::Not;
  e->operands.push_back(parseUnary());
  return e;
}

ExprPtr Parser::parsePrimary() {
  Nested nested(*this); // sum and fold bodies, casts, calls and blocks nest through here
  const Token &t = cur();
  switch (t.kind) {
  case TokKind::Int: {
    ExprPtr e = make(ExprKind::IntLit, t.loc);
    e->intValue = take().intValue;
    return e;
  }
  case TokKind::Float: {
    ExprPtr e = make(ExprKind::FloatLit, t.loc);
    e->floatValue = take().floatValue;
    return e;
  }
  case TokKind::Ident: return parseWord();
  default: break;
  }
  if (t.isPunct("{"))
    return parseBlock();
  if (acceptPunct("(")) {
    ExprPtr e = parseExpr();
    expectPunct(")");
    return e;
  }
  expected("an expression");
}

ExprPtr Parser::parseWord() {
  const Token &t = cur();
  if (t.text == "true" || t.text == "false") {
    ExprPtr e = make(ExprKind::BoolLit, t.loc);
    e->boolValue = take().text == "true";
    return e;
  }
  if (t.text == "sum")
    return parseSum();
  if (t.text == "fold")
    return parseFold();
  if (t.text == "rank")
    return parseTensorQuery(ExprKind::Rank);
  if (t.text == "present")
    return parseTensorQuery(ExprKind::Present);
  if (peek(1).isPunct("(") && isTypeName(t.text))
    return parseCast();
  if (isKeyword(t.text))
    expected("an expression");
  if (peek(1).isPunct("("))
    return parseCall();
  if (peek(1).isPunct("["))
    return parseElement();
  ExprPtr e = make(ExprKind::Name, t.loc);
  e->name = take().text;
  return e;
}

bool Parser::isTypeParam(const std::string &word) const {
  return !op_->typeParam.empty() && word == op_->typeParam;
}

bool Parser::isTypeName(const std::string &word) const { return isTypeParam(word) || parseDType(word).has_value(); }

ExprPtr Parser::parseCast() {
  const Token &t = cur();
  ExprPtr e = make(ExprKind::Cast, t.loc);
  e->castTo = isTypeParam(t.text) ? TypeRef{true, DType::F32} : TypeRef{false, *parseDType(t.text)};
  e->name = take().text;
  take(); // '('
  e->operands.push_back(parseExpr());
  expectPunct(")");
  return e;
}

ExprPtr Parser::parseCall() {
  ExprPtr e = make(ExprKind::Call, cur().loc);
  e->name = take().text;
  take(); // '('
  if (!cur().isPunct(")"))
    parseList([&] { e->operands.push_back(parseExpr()); });
  expectPunct(")");
  return e;
}

ExprPtr Parser::parseElement() {
  ExprPtr e = make(ExprKind::Element, cur().loc);
  e->name = take().text;
  take(); // '['
  if (!cur().isPunct("]"))
    parseList([&] { e->operands.push_back(parseExpr()); });
  expectPunct("]");
  return e;
}

ExprPtr Parser::parseSum() {
  ExprPtr e = make(ExprKind::Sum, take().loc);
  expectPunct("(");
  e->name = expectName("an index variable");
  expectPunct("<");
  e->operands.push_back(parseExpr());
  expectPunct(")");
  e->operands.push_back(parseUnary());
  return e;
}

ExprPtr Parser::parseFold() {
  ExprPtr e = make(ExprKind::Fold, take().loc);
  expectPunct("(");
  e->name = expectName("an index variable");
  expectPunct("<");
  e->operands.push_back(parseExpr());
  expectPunct(",");
  e->accName = expectName("an accumulator name");
  expectPunct("=");
  e->operands.push_back(parseExpr());
  expectPunct(")");
  e->operands.push_back(parseUnary());
  return e;
}

ExprPtr Parser::parseTensorQuery(ExprKind kind) {
  ExprPtr e = make(kind, take().loc);
  expectPunct("(");
  e->name = expectName("a tensor name");
  expectPunct(")");
  return e;
}

ExprPtr Parser::parseBlock() {
  ExprPtr e = make(ExprKind::Block, take().loc);
  while (isKw("let")) {
    e->lets.push_back(parseLet());
    acceptPunct(";");
  }
  e->operands.push_back(parseExpr());
  acceptPunct(";");
  expectPunct("}");
  return e;
}

} // namespace moec::dsl::detail
