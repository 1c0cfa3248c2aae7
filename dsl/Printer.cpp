//===- Printer.cpp - AST to DSL text and to a tree dump -------------------===//
#include "moec/dsl/Printer.h"

#include <fmt/format.h>

namespace moec::dsl {

namespace {

//===--- printExpr ---------------------------------------------------------===//

// Precedence levels, matching the parser: higher binds tighter.
enum Prec { kTernary = 0, kOr, kAnd, kEq, kRel, kAdd, kMul, kUnary, kPrimary };

int binPrec(BinOp op) {
  switch (op) {
  case BinOp::Or: return kOr;
  case BinOp::And: return kAnd;
  case BinOp::Eq:
  case BinOp::Ne: return kEq;
  case BinOp::Lt:
  case BinOp::Le:
  case BinOp::Gt:
  case BinOp::Ge: return kRel;
  case BinOp::Add:
  case BinOp::Sub: return kAdd;
  default: return kMul;
  }
}

int precOf(const Expr &e) {
  switch (e.kind) {
  case ExprKind::Select: return kTernary;
  case ExprKind::Binary: return binPrec(e.binOp);
  case ExprKind::Unary: return kUnary;
  case ExprKind::IntLit: return e.intValue < 0 ? kUnary : kPrimary;
  default: return kPrimary;
  }
}

std::string print(const Expr &e);

/// `e`, parenthesised when it binds looser than `minPrec`.
std::string printAt(const Expr &e, int minPrec) {
  std::string s = print(e);
  return precOf(e) < minPrec ? "(" + s + ")" : s;
}

std::string printFloat(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eEn") == std::string::npos) // keep it a float literal: 0 -> 0.0
    s += ".0";
  return s;
}

std::string joinExprs(const std::vector<ExprPtr> &xs) {
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i)
    s += (i ? ", " : "") + print(*xs[i]);
  return s;
}

std::string printBlock(const Expr &e) {
  std::string s = "{ ";
  for (const Let &l : e.lets)
    s += fmt::format("let {} = {}; ", l.name, print(*l.value));
  return s + print(*e.operands[0]) + " }";
}

std::string print(const Expr &e) {
  switch (e.kind) {
  case ExprKind::IntLit: return std::to_string(e.intValue);
  case ExprKind::FloatLit: return printFloat(e.floatValue);
  case ExprKind::BoolLit: return e.boolValue ? "true" : "false";
  case ExprKind::Name: return e.name;
  case ExprKind::Element: return fmt::format("{}[{}]", e.name, joinExprs(e.operands));
  case ExprKind::Unary: return (e.unOp == UnOp::Neg ? "-" : "!") + printAt(*e.operands[0], kUnary);
  case ExprKind::Binary: {
    int p = binPrec(e.binOp); // left-associative: only the right operand needs parens at equal level
    return fmt::format("{} {} {}", printAt(*e.operands[0], p), binOpSpelling(e.binOp),
                       printAt(*e.operands[1], p + 1));
  }
  case ExprKind::Select: // the condition is parsed one level above the ternary
    return fmt::format("{} ? {} : {}", printAt(*e.operands[0], kOr), print(*e.operands[1]),
                       print(*e.operands[2]));
  case ExprKind::Cast:
    return fmt::format("{}({})", e.name.empty() ? dtypeName(e.castTo.fixed) : e.name, print(*e.operands[0]));
  case ExprKind::Sum:
    return fmt::format("sum({} < {}) {}", e.name, print(*e.operands[0]), printAt(*e.operands[1], kUnary));
  case ExprKind::Rank: return fmt::format("rank({})", e.name);
  case ExprKind::Block: return printBlock(e);
  case ExprKind::Fold:
    return fmt::format("fold({} < {}, {} = {}) {}", e.name, print(*e.operands[0]), e.accName,
                       print(*e.operands[1]), printAt(*e.operands[2], kUnary));
  case ExprKind::Call: return fmt::format("{}({})", e.name, joinExprs(e.operands));
  case ExprKind::Present: return fmt::format("present({})", e.name);
  }
  return "?";
}

//===--- printAst ----------------------------------------------------------===//

class TreePrinter {
public:
  explicit TreePrinter(const OpDef &op) : op_(op) {}

  std::string run() {
    printHeader();
    for (const DimDecl &d : op_.dims)
      line(1, fmt::format("dim {}: {}{}", d.name, staticness(d.isStatic), d.isTokens ? " tokens" : ""));
    for (const AttrDecl &a : op_.attrs)
      printAttr(a);
    for (const TensorDecl &t : op_.tensors)
      printTensor(t);
    for (const Require &r : op_.requires_)
      line(1, fmt::format("require {} : {}", print(*r.cond), quote(r.message)));
    printStmts(op_.body, 1);
    return out_;
  }

private:
  static const char *staticness(bool isStatic) { return isStatic ? "static" : "runtime"; }

  void line(int indent, const std::string &text) { out_ += std::string(2 * indent, ' ') + text + "\n"; }

  std::string typeRefName(const TypeRef &t) const { return t.generic ? op_.typeParam : dtypeName(t.fixed); }

  std::string typeName(const ExprType &t) const {
    switch (t.cls) {
    case ExprType::Int: return "int";
    case ExprType::Bool: return "bool";
    case ExprType::Float: return typeRefName(t.floatType);
    default: return "?";
    }
  }

  void printHeader() {
    std::string s = "op " + op_.name;
    if (!op_.typeParam.empty()) {
      s += "<" + op_.typeParam + ":";
      for (size_t i = 0; i < op_.allowedTypes.size(); ++i)
        s += std::string(i ? " | " : " ") + dtypeName(op_.allowedTypes[i]);
      s += ">";
    }
    line(0, s);
  }

  void printAttr(const AttrDecl &a) {
    std::string s = "attr " + a.name;
    if (!a.alias.empty())
      s += " as " + a.alias;
    s += fmt::format(": {} {} = ", staticness(a.isStatic), a.isBool ? "bool" : "int");
    if (!a.defaultValue)
      s += "<none>";
    else if (a.isBool)
      s += *a.defaultValue ? "true" : "false";
    else
      s += std::to_string(*a.defaultValue);
    line(1, s);
  }

  void printTensor(const TensorDecl &t) {
    std::string s = fmt::format("{} {}{}: {}[", t.isOutput ? "out" : "in", t.name, t.optional ? "?" : "",
                                typeRefName(t.elem));
    for (size_t i = 0; i < t.shape.size(); ++i)
      s += (i ? ", " : "") + std::string(t.shape[i].flattenLeading ? "*" : "") + print(*t.shape[i].size);
    s += "]";
    if (t.rangeLo)
      s += fmt::format(" in [{}, {})", print(*t.rangeLo), print(*t.rangeHi));
    if (t.unique)
      s += " unique";
    if (t.when)
      s += " when " + print(*t.when);
    line(1, s);
  }

  void printStmts(const std::vector<Stmt> &stmts, int indent) {
    for (const Stmt &s : stmts)
      printStmt(s, indent);
  }

  void printStmt(const Stmt &s, int indent) {
    if (s.let)
      printNode(*s.let->value, indent, "let " + s.let->name + " = ");
    else if (s.assign)
      printAssign(*s.assign, indent);
    else if (s.forStmt)
      printFor(*s.forStmt, indent);
    else
      printIf(*s.ifStmt, indent);
  }

  void printAssign(const Assign &a, int indent) {
    std::string idx;
    for (size_t i = 0; i < a.indices.size(); ++i)
      idx += (i ? ", " : "") + (a.indexExprs[i] ? print(*a.indexExprs[i]) : a.indices[i]);
    line(indent, fmt::format("assign {}[{}] : {}", a.target, idx, typeName(a.value->type)));
    printNode(*a.value, indent + 1, "");
  }

  void printFor(const ForStmt &f, int indent) {
    std::string s = "for ";
    for (size_t i = 0; i < f.vars.size(); ++i)
      s += fmt::format("{}{} < {}", i ? ", " : "", f.vars[i], print(*f.bounds[i]));
    line(indent, s);
    printStmts(f.body, indent + 1);
  }

  void printIf(const IfStmt &s, int indent) {
    line(indent, "if " + print(*s.cond));
    printStmts(s.thenBody, indent + 1);
    if (s.elseBody.empty())
      return;
    line(indent, "else");
    printStmts(s.elseBody, indent + 1);
  }

  static const char *nameKind(NameKind k) {
    switch (k) {
    case NameKind::Dim: return " (dim)";
    case NameKind::Attr: return " (attr)";
    case NameKind::Let: return " (let)";
    case NameKind::IndexVar: return " (index)";
    case NameKind::Accumulator: return " (acc)";
    default: return "";
    }
  }

  /// One line: kind and what identifies the node, without children.
  std::string describe(const Expr &e) const {
    switch (e.kind) {
    case ExprKind::IntLit: return "IntLit " + print(e);
    case ExprKind::FloatLit: return "FloatLit " + print(e);
    case ExprKind::BoolLit: return "BoolLit " + print(e);
    case ExprKind::Name: return "Name " + e.name + nameKind(e.nameKind);
    case ExprKind::Element: return "Element " + e.name;
    case ExprKind::Unary: return std::string("Unary ") + (e.unOp == UnOp::Neg ? "-" : "!");
    case ExprKind::Binary: return std::string("Binary ") + binOpSpelling(e.binOp);
    case ExprKind::Select: return "Select";
    case ExprKind::Cast: return "Cast " + typeRefName(e.castTo);
    case ExprKind::Sum: return fmt::format("Sum {} < {}", e.name, print(*e.operands[0]));
    case ExprKind::Rank: return "Rank " + e.name;
    case ExprKind::Block: return "Block";
    case ExprKind::Fold:
      return fmt::format("Fold {} < {}, {} = {}", e.name, print(*e.operands[0]), e.accName,
                         print(*e.operands[1]));
    case ExprKind::Call: return "Call " + e.name;
    case ExprKind::Present: return "Present " + e.name;
    }
    return "?";
  }

  void printNode(const Expr &e, int indent, const std::string &prefix) {
    line(indent, fmt::format("{}{} : {}", prefix, describe(e), typeName(e.type)));
    for (const Let &l : e.lets)
      printNode(*l.value, indent + 1, "let " + l.name + " = ");
    // A sum's bound and a fold's bound and init are already on its line; only the body is a child.
    size_t first = e.kind == ExprKind::Sum ? 1 : e.kind == ExprKind::Fold ? 2 : 0;
    for (size_t i = first; i < e.operands.size(); ++i)
      printNode(*e.operands[i], indent + 1, "");
  }

  const OpDef &op_;
  std::string out_;
};

} // namespace

std::string quote(const std::string &s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string printExpr(const Expr &e) { return print(e); }

std::string printAst(const OpDef &op) { return TreePrinter(op).run(); }

} // namespace moec::dsl
