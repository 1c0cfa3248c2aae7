//===- Eval.cpp - Host-side evaluation of Int/Bool expressions ------------===//
#include "moec/dsl/Eval.h"

#include "moec/dsl/Printer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace moec::dsl {

namespace {

[[noreturn]] void cannotEvaluate(const Expr &e) {
  throw EvalError(fmt::format("cannot evaluate '{}' on the host", printExpr(e)));
}

template <typename V>
V lookup(const std::map<std::string, V> &m, const std::string &key, const std::string &what) {
  auto it = m.find(key);
  if (it == m.end())
    throw EvalError(fmt::format("no value for '{}'", what));
  return it->second;
}

void checkOverflow(bool overflow, const Expr &e) {
  if (overflow)
    throw EvalError(fmt::format("integer overflow in '{}'", printExpr(e)), /*arithmetic=*/true);
}

int64_t evalArith(const Expr &e, int64_t l, int64_t r) {
  int64_t v = 0;
  switch (e.binOp) {
  case BinOp::Add: checkOverflow(__builtin_add_overflow(l, r, &v), e); return v;
  case BinOp::Sub: checkOverflow(__builtin_sub_overflow(l, r, &v), e); return v;
  case BinOp::Mul: checkOverflow(__builtin_mul_overflow(l, r, &v), e); return v;
  default: break;
  }
  if (r == 0)
    throw EvalError(fmt::format("division by zero in '{}'", printExpr(e)), /*arithmetic=*/true);
  checkOverflow(l == INT64_MIN && r == -1, e);
  return e.binOp == BinOp::Div ? l / r : l % r; // C++ truncates toward zero
}

int64_t evalBinary(const Expr &e, const Bindings &b) {
  const Expr &lhs = *e.operands[0], &rhs = *e.operands[1];
  switch (e.binOp) { // the logical operators short-circuit
  case BinOp::And: return evalBool(lhs, b) && evalBool(rhs, b);
  case BinOp::Or: return evalBool(lhs, b) || evalBool(rhs, b);
  default: break;
  }
  int64_t l = evalInt(lhs, b), r = evalInt(rhs, b);
  switch (e.binOp) {
  case BinOp::Lt: return l < r;
  case BinOp::Le: return l <= r;
  case BinOp::Gt: return l > r;
  case BinOp::Ge: return l >= r;
  case BinOp::Eq: return l == r;
  case BinOp::Ne: return l != r;
  default: return evalArith(e, l, r);
  }
}

int64_t evalUnary(const Expr &e, const Bindings &b) {
  if (e.unOp == UnOp::Not)
    return !evalBool(*e.operands[0], b);
  int64_t v = evalInt(*e.operands[0], b);
  checkOverflow(v == INT64_MIN, e);
  return -v;
}

int64_t evalCast(const Expr &e, const Bindings &b) {
  if (e.castTo.generic || isFloat(e.castTo.fixed))
    cannotEvaluate(e);
  int64_t v = evalInt(*e.operands[0], b);
  switch (e.castTo.fixed) {
  case DType::I32: return static_cast<int32_t>(v);
  case DType::I8: return static_cast<int8_t>(v);
  default: return v != 0; // bool
  }
}

/// min and max; fma works on floats, which the host does not evaluate.
int64_t evalCall(const Expr &e, const Bindings &b) {
  if ((e.name != "min" && e.name != "max") || e.operands.size() != 2)
    cannotEvaluate(e);
  int64_t l = evalInt(*e.operands[0], b), r = evalInt(*e.operands[1], b);
  return e.name == "min" ? std::min(l, r) : std::max(l, r);
}

} // namespace

int64_t evalInt(const Expr &e, const Bindings &b) {
  switch (e.kind) {
  case ExprKind::IntLit: return e.intValue;
  case ExprKind::BoolLit: return e.boolValue;
  case ExprKind::Name: return lookup(b.values, e.name, e.name);
  case ExprKind::Rank: return lookup(b.ranks, e.name, printExpr(e));
  case ExprKind::Unary: return evalUnary(e, b);
  case ExprKind::Binary: return evalBinary(e, b);
  case ExprKind::Select:
    return evalBool(*e.operands[0], b) ? evalInt(*e.operands[1], b) : evalInt(*e.operands[2], b);
  case ExprKind::Cast: return evalCast(e, b);
  case ExprKind::Call: return evalCall(e, b);
  case ExprKind::Present: return lookup(b.present, e.name, printExpr(e));
  default: cannotEvaluate(e);
  }
}

bool evalBool(const Expr &e, const Bindings &b) { return evalInt(e, b) != 0; }

} // namespace moec::dsl
