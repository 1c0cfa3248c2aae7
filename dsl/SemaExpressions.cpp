//===- SemaExpressions.cpp - Types of the DSL's expressions ---------------===//
//
// The Checker's expressions: each is resolved (names to dims, attrs, tensors and locals) and typed
// (Expr::type), and rejected where its operands do not fit, where it uses what its context does not allow
// (a signature expression, a `require`), or where a bound must be static.
//===----------------------------------------------------------------------===//
#include "SemaInternal.h"

#include <fmt/format.h>

namespace moec::dsl::detail {

namespace {

bool isArithmetic(BinOp op) {
  return op == BinOp::Add || op == BinOp::Sub || op == BinOp::Mul || op == BinOp::Div || op == BinOp::Mod;
}

const char *ctxName(Ctx c) {
  switch (c) {
  case Ctx::Shape: return "a shape";
  case Ctx::Range: return "a value range";
  case Ctx::Require: return "a require";
  case Ctx::When: return "a `when` condition";
  case Ctx::Body: return "the body";
  }
  return "";
}

} // namespace

void Checker::check(Expr &e) {
  switch (e.kind) {
  case ExprKind::IntLit: e.type = ExprType::intTy(); break;
  case ExprKind::FloatLit: e.type = ExprType::f32(); break;
  case ExprKind::BoolLit: e.type = ExprType::boolTy(); break;
  case ExprKind::Name: checkName(e); break;
  case ExprKind::Element: checkElement(e); break;
  case ExprKind::Unary: checkUnary(e); break;
  case ExprKind::Binary: checkBinary(e); break;
  case ExprKind::Select: checkSelect(e); break;
  case ExprKind::Cast: checkCast(e); break;
  case ExprKind::Sum: checkSum(e); break;
  case ExprKind::Rank: checkRank(e); break;
  case ExprKind::Block: checkBlock(e); break;
  case ExprKind::Fold: checkFold(e); break;
  case ExprKind::Call: checkCall(e); break;
  case ExprKind::Present: checkPresent(e); break;
  }
}

void Checker::bodyOnly(const Expr &e, const char *what) const {
  if (ctx_ != Ctx::Body)
    fail(e.loc, fmt::format("{} is not allowed in {}", what, ctxName(ctx_)));
}

void Checker::checkName(Expr &e) {
  if (const Local *l = findLocal(e.name)) {
    e.nameKind = l->kind;
    e.type = l->type;
    return;
  }
  for (size_t i = 0; i < op_.dims.size(); ++i) {
    if (op_.dims[i].name == e.name) {
      resolveName(e, NameKind::Dim, i, ExprType::intTy());
      return;
    }
  }
  for (size_t i = 0; i < op_.attrs.size(); ++i) {
    const AttrDecl &a = op_.attrs[i];
    if (a.name == e.name || a.alias == e.name) {
      resolveName(e, NameKind::Attr, i, a.isBool ? ExprType::boolTy() : ExprType::intTy());
      return;
    }
  }
  if (op_.findTensor(e.name))
    fail(e.loc, fmt::format("'{}' is a tensor; read an element with {}[...]", e.name, e.name));
  fail(e.loc, fmt::format("unknown name '{}'", e.name));
}

void Checker::resolveName(Expr &e, NameKind kind, size_t index, const ExprType &type) {
  e.nameKind = kind;
  e.refIndex = static_cast<int>(index);
  e.type = type;
}

int Checker::requireTensor(const Expr &e) const {
  int i = op_.tensorIndex(e.name);
  if (i >= 0)
    return i;
  if (globalKind(e.name) || findLocal(e.name))
    fail(e.loc, fmt::format("'{}' is not a tensor", e.name));
  fail(e.loc, fmt::format("unknown tensor '{}'", e.name));
}

void Checker::checkElement(Expr &e) {
  bodyOnly(e, "element access");
  e.refIndex = requireTensor(e);
  const TensorDecl &t = op_.tensors[e.refIndex];
  if (t.isOutput)
    fail(e.loc, fmt::format("cannot read output '{}'; outputs are write-only", e.name));
  if (e.operands.size() != t.shape.size())
    fail(e.loc, fmt::format("'{}' has rank {} but is indexed with {} indices", e.name, t.shape.size(),
                            e.operands.size()));
  for (ExprPtr &idx : e.operands) {
    check(*idx);
    if (idx->type.cls != ExprType::Int)
      fail(idx->loc, fmt::format("a tensor index must be int, found {}", typeName(idx->type)));
  }
  e.type = elementType(t.elem);
}

void Checker::checkUnary(Expr &e) {
  Expr &x = *e.operands[0];
  check(x);
  bool ok = e.unOp == UnOp::Neg ? isNumeric(x.type) : x.type.cls == ExprType::Bool;
  if (!ok)
    fail(e.loc, fmt::format("'{}' needs {} operand, found {}", e.unOp == UnOp::Neg ? "-" : "!",
                            e.unOp == UnOp::Neg ? "an int or float" : "a bool", typeName(x.type)));
  e.type = x.type;
}

void Checker::checkBinary(Expr &e) {
  check(*e.operands[0]);
  check(*e.operands[1]);
  const ExprType &l = e.operands[0]->type, &r = e.operands[1]->type;
  const char *op = binOpSpelling(e.binOp);
  if (e.binOp == BinOp::And || e.binOp == BinOp::Or) {
    if (l.cls != ExprType::Bool || r.cls != ExprType::Bool)
      fail(e.loc, fmt::format("'{}' needs bool operands, found {} and {}", op, typeName(l), typeName(r)));
    e.type = ExprType::boolTy();
    return;
  }
  bool boolEquality =
      (e.binOp == BinOp::Eq || e.binOp == BinOp::Ne) && l.cls == ExprType::Bool && r.cls == ExprType::Bool;
  if (!boolEquality && (!isNumeric(l) || !isNumeric(r)))
    fail(e.loc,
         fmt::format("'{}' needs int or float operands, found {} and {}", op, typeName(l), typeName(r)));
  if (!sameType(l, r))
    mismatch(e.loc, l, r);
  if (e.binOp == BinOp::Mod && l.cls == ExprType::Float)
    fail(e.loc, fmt::format("'%' needs int operands, found {}", typeName(l)));
  const Expr &divisor = *e.operands[1];
  if ((e.binOp == BinOp::Div || e.binOp == BinOp::Mod) && divisor.kind == ExprKind::IntLit && divisor.intValue == 0)
    fail(divisor.loc, fmt::format("'{}' by zero", op));
  e.type = isArithmetic(e.binOp) ? l : ExprType::boolTy();
}

void Checker::checkSelect(Expr &e) {
  for (ExprPtr &x : e.operands)
    check(*x);
  const Expr &c = *e.operands[0];
  if (c.type.cls != ExprType::Bool)
    fail(c.loc, fmt::format("the condition of '?:' must be bool, found {}", typeName(c.type)));
  const ExprType &a = e.operands[1]->type, &b = e.operands[2]->type;
  if (!sameType(a, b))
    mismatch(e.loc, a, b);
  e.type = a;
}

void Checker::checkCast(Expr &e) {
  check(*e.operands[0]);
  const TypeRef &to = e.castTo;
  if (to.generic && op_.typeParam.empty())
    fail(e.loc, "cast to the type parameter, but the op has none");
  e.type = elementType(to);
}

void Checker::checkSum(Expr &e) {
  bodyOnly(e, "'sum'");
  checkBound(*e.operands[0], "sum");
  scopes_.emplace_back();
  bindLocal(e.name, e.loc, NameKind::IndexVar, ExprType::intTy());
  Expr &body = *e.operands[1];
  check(body);
  scopes_.pop_back();
  if (!body.type.isF32())
    fail(body.loc, fmt::format("sum accumulates in f32; cast the body with f32(...) (found {})",
                               typeName(body.type)));
  e.type = ExprType::f32();
}

void Checker::checkFold(Expr &e) {
  bodyOnly(e, "'fold'");
  checkBound(*e.operands[0], "fold");
  Expr &init = *e.operands[1], &body = *e.operands[2];
  check(init);
  scopes_.emplace_back();
  bindLocal(e.name, e.loc, NameKind::IndexVar, ExprType::intTy());
  bindLocal(e.accName, e.loc, NameKind::Accumulator, init.type);
  check(body);
  scopes_.pop_back();
  if (!sameType(body.type, init.type))
    fail(body.loc, fmt::format("the fold body must have the accumulator's type {}, found {}",
                               typeName(init.type), typeName(body.type)));
  e.type = init.type;
}

void Checker::checkBound(Expr &bound, const char *what) {
  check(bound);
  if (bound.type.cls != ExprType::Int)
    fail(bound.loc, fmt::format("a {} bound must be int, found {}", what, typeName(bound.type)));
  requireStaticNames(bound, what);
}

void Checker::requireStaticNames(const Expr &e, const char *what) const {
  if (e.kind == ExprKind::Name)
    requireStaticName(e, what);
  for (const Let &l : e.lets)
    requireStaticNames(*l.value, what);
  for (const ExprPtr &x : e.operands)
    requireStaticNames(*x, what);
}

void Checker::requireStaticName(const Expr &e, const char *what) const {
  const char *why = nullptr;
  if (e.nameKind == NameKind::Dim && !op_.dims[e.refIndex].isStatic)
    why = "a runtime dim";
  else if (e.nameKind == NameKind::Attr && !op_.attrs[e.refIndex].isStatic)
    why = "a runtime attr";
  else if (e.nameKind == NameKind::Accumulator)
    why = "an accumulator";
  if (why)
    fail(e.loc, fmt::format("{} bound must be static; '{}' is {}", what, e.name, why));
}

void Checker::checkCall(Expr &e) {
  if (e.name == "fma")
    checkFma(e);
  else if (e.name == "min" || e.name == "max")
    checkMinMax(e);
  else
    fail(e.loc, fmt::format("unknown function '{}'", e.name));
}

void Checker::checkArgs(Expr &e, size_t count) {
  if (e.operands.size() != count)
    fail(e.loc, fmt::format("{}() takes {} arguments, found {}", e.name, count, e.operands.size()));
  for (ExprPtr &x : e.operands)
    check(*x);
}

void Checker::checkFma(Expr &e) {
  checkArgs(e, 3);
  for (const ExprPtr &x : e.operands)
    if (!x->type.isF32())
      fail(x->loc,
           fmt::format("fma() needs f32 arguments, found {}; cast with f32(...)", typeName(x->type)));
  e.type = ExprType::f32();
}

void Checker::checkMinMax(Expr &e) {
  checkArgs(e, 2);
  const ExprType &a = e.operands[0]->type, &b = e.operands[1]->type;
  if (!isNumeric(a) || !isNumeric(b))
    fail(e.loc, fmt::format("{}() needs int or float arguments, found {} and {}", e.name, typeName(a),
                            typeName(b)));
  if (!sameType(a, b))
    mismatch(e.loc, a, b);
  e.type = a;
}

void Checker::checkPresent(Expr &e) {
  if (ctx_ == Ctx::Shape || ctx_ == Ctx::Range)
    fail(e.loc, fmt::format("present() is not allowed in {}", ctxName(ctx_)));
  e.refIndex = requireTensor(e);
  if (!op_.tensors[e.refIndex].optional)
    fail(e.loc, fmt::format("present() needs an optional tensor; '{}' is always present", e.name));
  e.type = ExprType::boolTy();
}

void Checker::checkRank(Expr &e) {
  if (ctx_ != Ctx::Require)
    fail(e.loc, "rank() is only allowed in a require");
  e.refIndex = requireTensor(e);
  e.type = ExprType::intTy();
}

void Checker::checkBlock(Expr &e) {
  bodyOnly(e, "a block");
  scopes_.emplace_back();
  for (Let &l : e.lets)
    checkLet(l);
  check(*e.operands[0]);
  scopes_.pop_back();
  e.type = e.operands[0]->type;
}

} // namespace moec::dsl::detail
