//===- Parser.cpp - Tokens to AST -----------------------------------------===//
//
// A recursive-descent parser over the whole token stream. Newlines mean nothing: a statement or
// expression ends where the next token cannot continue it.
//===----------------------------------------------------------------------===//
#include "moec/dsl/Parser.h"

#include "Lexer.h"
#include "moec/dsl/Sema.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace moec::dsl {

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

// Limits that keep every later pass (Sema, printing, MLIR generation, the AST's own destructor), which
// recurse over the tree, well inside the stack, and the work of compiling an op bounded.
constexpr int kMaxNesting = 256;         // levels: parentheses, operators in a chain, blocks, if/for
constexpr size_t kMaxTokens = 200000;    // about 1 MB of dense source
constexpr size_t kMaxExprNodes = 100000; // expression nodes in one op

const BinOpInfo *findBinOp(const Token &t) {
  if (t.kind != TokKind::Punct)
    return nullptr;
  for (const BinOpInfo &b : kBinOps)
    if (t.text == b.spelling)
      return &b;
  return nullptr;
}

class Parser {
public:
  explicit Parser(std::shared_ptr<const SourceFile> file) : file_(file), toks_(tokenize(file)) {
    if (toks_.size() > kMaxTokens)
      throw DslError(toks_[kMaxTokens].loc, fmt::format("the op is too long: more than {} tokens", kMaxTokens));
  }

  std::unique_ptr<OpDef> parseOp() {
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
  void parseTypeParam() {
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

  void parseSection() {
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

  template <typename F> void parseList(F entry) {
    do
      entry();
    while (acceptPunct(","));
  }

  // `static` or `runtime`
  bool parseStaticness() {
    if (acceptKeyword("static"))
      return true;
    if (acceptKeyword("runtime"))
      return false;
    expected("'static' or 'runtime'");
  }

  // `N: runtime [tokens]` (`tokens` is a word only here, so it stays usable as a name elsewhere)
  void parseDim() {
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

  // `top_k as K: static [int|bool] [= default]`
  void parseAttr() {
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

  int64_t parseAttrDefault(bool isBool) {
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

  // `x[?]: T[*R, H] [in [lo, hi)] [unique] [when COND]`
  void parseTensor(bool isOutput) {
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

  std::string typeRefName(const TypeRef &t) const { return t.generic ? op_->typeParam : dtypeName(t.fixed); }

  void parseUnique(TensorDecl &t) {
    if (t.isOutput)
      fail(fmt::format("`unique` is only allowed on inputs; '{}' is an output", t.name));
    if (t.elem.generic || (t.elem.fixed != DType::I32 && t.elem.fixed != DType::I8))
      fail(fmt::format("`unique` needs an integer tensor; '{}' holds {}", t.name, typeRefName(t.elem)));
    take();
    t.unique = true;
  }

  void parseWhen(TensorDecl &t) {
    if (!t.isOutput)
      fail(fmt::format("`when` is only allowed on an optional output; '{}' is an input", t.name));
    if (!t.optional)
      fail(fmt::format("`when` is only allowed on an optional output; '{}' is not optional (write '{}?')",
                       t.name, t.name));
    take();
    t.when = parseExpr();
  }

  TypeRef parseElemType() {
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

  ShapeDim parseShapeDim(const TensorDecl &t, bool isOutput) {
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

  // `require cond : "message"`
  void parseRequire() {
    Require r;
    r.loc = cur().loc;
    r.cond = parseExpr();
    expectPunct(":");
    if (cur().kind != TokKind::String)
      expected("a message string");
    r.message = take().text;
    op_->requires_.push_back(std::move(r));
  }

  //===--- Body ------------------------------------------------------------===//

  void parseBody() { op_->body = parseStmts(); }

  // `{ STMT* }`
  std::vector<Stmt> parseStmts() {
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

  Stmt parseStmt() {
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

  // `for t < Tk, k < K { ... }`
  std::unique_ptr<ForStmt> parseFor() {
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

  // `if cond { ... } [else { ... } | else if ...]`
  std::unique_ptr<IfStmt> parseIf() {
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

  // `let name = value`
  Let parseLet() {
    Let l;
    l.loc = take().loc;
    l.name = expectName("a let name");
    expectPunct("=");
    l.value = parseExpr();
    return l;
  }

  // `target[i, j] = value`; a bare name index is recorded as a name (Sema decides whether it is fresh).
  Assign parseAssign() {
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

  void parseAssignIndex(Assign &a) {
    a.indexLocs.push_back(cur().loc);
    ExprPtr x = parseExpr();
    bool bareName = x->kind == ExprKind::Name;
    a.indices.push_back(bareName ? x->name : "");
    a.indexExprs.push_back(bareName ? nullptr : std::move(x));
  }

  //===--- Expressions -----------------------------------------------------===//

  ExprPtr make(ExprKind k, const SourceLoc &loc) {
    if (++exprNodes_ > kMaxExprNodes)
      throw DslError(loc, fmt::format("the op is too large: more than {} expression nodes", kMaxExprNodes));
    return std::make_unique<Expr>(k, loc);
  }

  ExprPtr parseExpr() { return parseTernary(); }

  // Right-associative: `a ? b : c ? d : e` is `a ? b : (c ? d : e)`.
  ExprPtr parseTernary() {
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

  ExprPtr parseBinary(int level) {
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

  ExprPtr parseUnary() {
    if (!cur().isPunct("-") && !cur().isPunct("!"))
      return parsePrimary();
    Nested nested(*this);
    ExprPtr e = make(ExprKind::Unary, cur().loc);
    e->unOp = take().text == "-" ? UnOp::Neg : UnOp::Not;
    e->operands.push_back(parseUnary());
    return e;
  }

  ExprPtr parsePrimary() {
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

  // An expression that starts with an identifier: literal, sum, fold, rank, present, cast, call, element
  // access or name.
  ExprPtr parseWord() {
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

  bool isTypeParam(const std::string &word) const {
    return !op_->typeParam.empty() && word == op_->typeParam;
  }
  bool isTypeName(const std::string &word) const { return isTypeParam(word) || parseDType(word).has_value(); }

  // `f32(x)`, `i32(x)`, `bool(x)`, `T(x)`; `name` keeps the spelling for printing.
  ExprPtr parseCast() {
    const Token &t = cur();
    ExprPtr e = make(ExprKind::Cast, t.loc);
    e->castTo = isTypeParam(t.text) ? TypeRef{true, DType::F32} : TypeRef{false, *parseDType(t.text)};
    e->name = take().text;
    take(); // '('
    e->operands.push_back(parseExpr());
    expectPunct(")");
    return e;
  }

  // `fma(a, b, c)`: Sema checks the callee and its arguments.
  ExprPtr parseCall() {
    ExprPtr e = make(ExprKind::Call, cur().loc);
    e->name = take().text;
    take(); // '('
    if (!cur().isPunct(")"))
      parseList([&] { e->operands.push_back(parseExpr()); });
    expectPunct(")");
    return e;
  }

  // `tensor[i, j]`
  ExprPtr parseElement() {
    ExprPtr e = make(ExprKind::Element, cur().loc);
    e->name = take().text;
    take(); // '['
    if (!cur().isPunct("]"))
      parseList([&] { e->operands.push_back(parseExpr()); });
    expectPunct("]");
    return e;
  }

  // `sum(k < BOUND) BODY`; the body binds like a unary operand, so a block is the usual form.
  ExprPtr parseSum() {
    ExprPtr e = make(ExprKind::Sum, take().loc);
    expectPunct("(");
    e->name = expectName("an index variable");
    expectPunct("<");
    e->operands.push_back(parseExpr());
    expectPunct(")");
    e->operands.push_back(parseUnary());
    return e;
  }

  // `fold(k < BOUND, acc = INIT) BODY`; the body binds like a unary operand, as for `sum`.
  ExprPtr parseFold() {
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

  // `rank(tensor)`, `present(tensor)`
  ExprPtr parseTensorQuery(ExprKind kind) {
    ExprPtr e = make(kind, take().loc);
    expectPunct("(");
    e->name = expectName("a tensor name");
    expectPunct(")");
    return e;
  }

  // `{ let a = e; let b = e  result }`
  ExprPtr parseBlock() {
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

  std::shared_ptr<const SourceFile> file_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  size_t exprNodes_ = 0;
  OpDef *op_ = nullptr;
};

} // namespace

std::unique_ptr<OpDef> parseOp(std::shared_ptr<const SourceFile> file) {
  return Parser(std::move(file)).parseOp();
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
