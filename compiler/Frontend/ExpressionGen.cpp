//===- ExpressionGen.cpp - DSL expressions to arith/math/memref/scf ops ---===//
//
// KernelEmitter's expressions: names from the scopes, the kernel's dims and attributes; literals; element
// reads (checked where not proven in bounds); unary and binary operators, `&&`/`||` that short-circuit over
// memory reads, `c ? a : b` (an scf.if where a branch reads memory), casts, calls, sums and folds; and the
// fusion of a row assignment into a point kernel's sum (dsl::FusedRows), stored from inside the sum.
//===----------------------------------------------------------------------===//
#include "KernelEmitter.h"

#include "moec/compiler/Dialect/MoeDialect.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"

#include <optional>

using namespace mlir;
using namespace moec::dsl;

namespace moec::detail {

Value KernelEmitter::lookup(const Expr &e) {
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it)
    if (auto found = it->find(e.name); found != it->end())
      return found->second;
  if (e.nameKind == NameKind::Dim)
    return dimValue(*op.findDim(e.name));
  if (e.nameKind == NameKind::Attr)
    return attrValue(*op.findAttr(e.name));
  throw GenError(where(e.loc) + "'" + e.name + "' is not available here (a `for` bound may not use values " +
                 "computed inside a `for`)");
}

Value KernelEmitter::emitExpr(const Expr &e) {
  Location l = loc(e.loc);
  switch (e.kind) {
  case ExprKind::IntLit: return constIndex(e.intValue);
  case ExprKind::FloatLit:
    return arith::ConstantOp::create(b, l, b.getF32FloatAttr(static_cast<float>(e.floatValue)));
  case ExprKind::BoolLit: return arith::ConstantOp::create(b, l, b.getBoolAttr(e.boolValue));
  case ExprKind::Name: return lookup(e);
  case ExprKind::Element: return emitElement(e);
  case ExprKind::Unary: return emitUnary(e);
  case ExprKind::Binary: return emitBinary(e);
  case ExprKind::Select: return emitSelect(e);
  case ExprKind::Cast: return emitCast(*e.operands[0], e.castTo.resolve(typeArg), l);
  case ExprKind::Sum: return emitSum(e);
  case ExprKind::Fold: return emitFold(e);
  case ExprKind::Call: return emitCall(e);
  case ExprKind::Present: return arith::ConstantOp::create(b, l, b.getBoolAttr(present.count(e.name) > 0));
  case ExprKind::Block: {
    scopes.emplace_back();
    for (const Let &let : e.lets)
      scopes.back()[let.name] = emitExpr(*let.value);
    Value v = emitExpr(*e.operands[0]);
    scopes.pop_back();
    return v;
  }
  case ExprKind::Rank: break; // Sema allows rank() only in host-side requires
  }
  throw GenError(where(e.loc) + "this expression cannot be compiled into a kernel");
}

Value KernelEmitter::emitElement(const Expr &e) {
  Value memref = view(e.refIndex, e.loc);
  SmallVector<Value> indices;
  SmallVector<const Expr *> indexExprs;
  for (const ExprPtr &i : e.operands) {
    indices.push_back(emitExpr(*i));
    indexExprs.push_back(i.get());
  }
  Location l = loc(e.loc);
  Value v;
  // In a fused sum's body, the row assignment's reads of an element the term already read (A3: the
  // token's grad row) reuse that read, checks and all: the pass reads each element once.
  FusedRead *read = nullptr;
  if (fused && fused->sumBody == b.getInsertionBlock())
    for (FusedRead &r : fused->reads)
      if (r.tensor == e.refIndex && r.indices == indices)
        read = &r;
  SmallVector<size_t> checkedDims;
  if (read) {
    v = read->value;
  } else if (Value ok = boundsCheck(e.refIndex, indexExprs, indices, memref, checkedDims)) {
    // Read only in bounds; outside, record the access and read zero.
    Type elem = cast<MemRefType>(memref.getType()).getElementType();
    auto ifOp = scf::IfOp::create(b, l, TypeRange{elem}, ok, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    scf::YieldOp::create(b, l, ValueRange{memref::LoadOp::create(b, l, memref, indices)});
    b.setInsertionPointToStart(ifOp.elseBlock());
    recordFailure(e.refIndex, indices, checkedDims, memref, e.loc);
    scf::YieldOp::create(b, l, ValueRange{arith::ConstantOp::create(b, l, b.getZeroAttr(elem))});
    v = ifOp.getResult(0);
    b.setInsertionPointAfter(ifOp);
  } else {
    v = memref::LoadOp::create(b, l, memref, indices);
  }
  if (!read && fused && fused->sumBody == b.getInsertionBlock())
    fused->reads.push_back({e.refIndex, indices, v});
  switch (op.tensors[e.refIndex].elem.resolve(typeArg)) {
  case DType::I32:
  case DType::I8: return arith::IndexCastOp::create(b, l, b.getIndexType(), v);
  case DType::Bool:
    return arith::CmpIOp::create(b, l, arith::CmpIPredicate::ne, v,
                                 arith::ConstantOp::create(b, l, b.getI8IntegerAttr(0)));
  default: return v;
  }
}

Value KernelEmitter::emitUnary(const Expr &e) {
  Location l = loc(e.loc);
  Value x = emitExpr(*e.operands[0]);
  if (e.unOp == UnOp::Not)
    return arith::XOrIOp::create(b, l, x, arith::ConstantOp::create(b, l, b.getBoolAttr(true)));
  if (isa<FloatType>(x.getType()))
    return arith::NegFOp::create(b, l, x);
  return arith::SubIOp::create(b, l, constIndex(0), x);
}

Value KernelEmitter::emitBinary(const Expr &e) {
  Location l = loc(e.loc);
  // `a && b` / `a || b` whose right side reads memory only evaluates it when needed.
  if ((e.binOp == BinOp::And || e.binOp == BinOp::Or) && readsMemory(*e.operands[1]))
    return emitShortCircuit(e);
  Value x = emitExpr(*e.operands[0]);
  Value y = emitExpr(*e.operands[1]);
  bool isF = isa<FloatType>(x.getType());
  using IP = arith::CmpIPredicate;
  using FP = arith::CmpFPredicate;
  auto cmp = [&](IP ip, FP fp) -> Value {
    if (isF)
      return arith::CmpFOp::create(b, l, fp, x, y);
    return arith::CmpIOp::create(b, l, ip, x, y);
  };
  switch (e.binOp) {
  case BinOp::Add: return isF ? Value(arith::AddFOp::create(b, l, x, y)) : arith::AddIOp::create(b, l, x, y);
  case BinOp::Sub: return isF ? Value(arith::SubFOp::create(b, l, x, y)) : arith::SubIOp::create(b, l, x, y);
  case BinOp::Mul: return isF ? Value(arith::MulFOp::create(b, l, x, y)) : arith::MulIOp::create(b, l, x, y);
  case BinOp::Div:
    return isF ? Value(arith::DivFOp::create(b, l, x, y)) : arith::DivSIOp::create(b, l, x, safeDivisor(x, y, e.loc));
  case BinOp::Mod: return arith::RemSIOp::create(b, l, x, safeDivisor(x, y, e.loc));
  case BinOp::Lt: return cmp(IP::slt, FP::OLT);
  case BinOp::Le: return cmp(IP::sle, FP::OLE);
  case BinOp::Gt: return cmp(IP::sgt, FP::OGT);
  case BinOp::Ge: return cmp(IP::sge, FP::OGE);
  case BinOp::Eq: return cmp(IP::eq, FP::OEQ);
  case BinOp::Ne: return cmp(IP::ne, FP::UNE);
  case BinOp::And: return arith::AndIOp::create(b, l, x, y);
  case BinOp::Or: return arith::OrIOp::create(b, l, x, y);
  }
  llvm_unreachable("binary operator");
}

Value KernelEmitter::emitShortCircuit(const Expr &e) {
  Location l = loc(e.loc);
  Value x = emitExpr(*e.operands[0]);
  bool isAnd = e.binOp == BinOp::And;
  auto ifOp = scf::IfOp::create(b, l, TypeRange{b.getI1Type()}, x, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(isAnd ? ifOp.thenBlock() : ifOp.elseBlock());
  scf::YieldOp::create(b, l, emitExpr(*e.operands[1]));
  b.setInsertionPointToStart(isAnd ? ifOp.elseBlock() : ifOp.thenBlock());
  scf::YieldOp::create(b, l, ValueRange{arith::ConstantOp::create(b, l, b.getBoolAttr(!isAnd))});
  return ifOp.getResult(0);
}

Value KernelEmitter::emitSelect(const Expr &e) {
  Location l = loc(e.loc);
  if (std::optional<bool> known = staticCondition(*e.operands[0]))
    return emitExpr(*e.operands[*known ? 1 : 2]);
  Value cond = emitExpr(*e.operands[0]);
  if (!readsMemory(*e.operands[1]) && !readsMemory(*e.operands[2])) {
    Value x = emitExpr(*e.operands[1]);
    Value y = emitExpr(*e.operands[2]);
    return arith::SelectOp::create(b, l, cond, x, y);
  }
  auto ifOp = scf::IfOp::create(b, l, TypeRange{typeOf(e.type)}, cond, /*withElseRegion=*/true);
  for (int branch = 0; branch < 2; ++branch) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(branch == 0 ? ifOp.thenBlock() : ifOp.elseBlock());
    scf::YieldOp::create(b, l, emitExpr(*e.operands[1 + branch]));
  }
  return ifOp.getResult(0);
}

Type KernelEmitter::typeOf(const ExprType &t) {
  switch (t.cls) {
  case ExprType::Int: return b.getIndexType();
  case ExprType::Bool: return b.getI1Type();
  default: return floatType(b.getContext(), t.floatType.resolve(typeArg));
  }
}

Value KernelEmitter::emitCast(const Expr &x, DType to, Location l) {
  Value v = emitExpr(x);
  Type from = v.getType();
  if (isFloat(to)) {
    Type target = floatType(b.getContext(), to);
    if (from == target)
      return v;
    if (auto f = dyn_cast<FloatType>(from))
      return f.getWidth() < cast<FloatType>(target).getWidth()
                 ? Value(arith::ExtFOp::create(b, l, target, v))
                 : Value(arith::TruncFOp::create(b, l, target, v));
    if (from.isInteger(1))
      return arith::UIToFPOp::create(b, l, target, v);
    return arith::SIToFPOp::create(b, l, target, arith::IndexCastOp::create(b, l, b.getI64Type(), v));
  }
  if (to == DType::Bool) {
    if (from.isInteger(1))
      return v;
    if (isa<FloatType>(from))
      return arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNE, v,
                                   arith::ConstantOp::create(b, l, b.getFloatAttr(from, 0.0)));
    return arith::CmpIOp::create(b, l, arith::CmpIPredicate::ne, v, constIndex(0));
  }
  // i32(x) / i8(x): convert, wrap to the width, and widen back to an Int (index).
  Type narrow = b.getIntegerType(to == DType::I32 ? 32 : 8);
  Value n;
  if (isa<FloatType>(from))
    n = arith::FPToSIOp::create(b, l, narrow, v);
  else if (from.isInteger(1))
    n = arith::ExtUIOp::create(b, l, narrow, v);
  else
    n = arith::IndexCastOp::create(b, l, narrow, v);
  return arith::IndexCastOp::create(b, l, b.getIndexType(), n);
}

Value KernelEmitter::emitCall(const Expr &e) {
  Location l = loc(e.loc);
  SmallVector<Value> args;
  for (const ExprPtr &a : e.operands)
    args.push_back(emitExpr(*a));
  bool isF = isa<FloatType>(args[0].getType());
  if (e.name == "fma")
    return math::FmaOp::create(b, l, args[0], args[1], args[2]);
  if (e.name == "min")
    return isF ? Value(arith::MinimumFOp::create(b, l, args[0], args[1])) : arith::MinSIOp::create(b, l, args[0], args[1]);
  if (e.name == "max")
    return isF ? Value(arith::MaximumFOp::create(b, l, args[0], args[1])) : arith::MaxSIOp::create(b, l, args[0], args[1]);
  throw GenError(where(e.loc) + "unknown function '" + e.name + "'");
}

Value KernelEmitter::emitSum(const Expr &e) {
  Location l = loc(e.loc);
  Value bound = emitExpr(*e.operands[0]);
  auto sum = moe::SumOp::create(b, l, b.getF32Type(), bound);
  OpBuilder::InsertionGuard guard(b);
  Block *body = b.createBlock(&sum.getBody());
  scopes.emplace_back();
  Value j = body->addArgument(b.getIndexType(), l);
  varBounds[scopes.back()[e.name] = j] = e.operands[0].get();
  bool fusedHere = fused && fused->rows->sum == &e;
  if (fusedHere)
    fused->sumBody = body;
  Value term = emitExpr(*e.operands[1]);
  if (fusedHere) {
    emitRowStore(j);
    fused->sumBody = nullptr;
  }
  moe::YieldOp::create(b, l, term);
  scopes.pop_back();
  return sum.getResult();
}

void KernelEmitter::prepareFusedRows(const FusedRows &rows) {
  const Assign &assign = *rows.assign;
  Location l = loc(assign.loc);
  FusedStore store{&rows, view(assign.tensorIndex, assign.loc), Value(), {}};
  for (size_t i = rows.guardFrom; i < rows.path.size(); ++i) {
    const PathStep &step = rows.path[i];
    if (staticCondition(*step.ifStmt->cond))
      continue;
    Value cond = emitCondition(*step.ifStmt->cond, step.thenBranch);
    store.live = store.live ? Value(arith::AndIOp::create(b, l, store.live, cond)) : cond;
  }
  SmallVector<const Expr *> indexExprs;
  SmallVector<Value> indices;
  for (const ExprPtr &index : assign.indexExprs) {
    indexExprs.push_back(index.get());
    indices.push_back(index ? emitExpr(*index) : constIndex(0)); // the last: j, proven in bounds
  }
  store.live = checkedStore(assign, indexExprs, indices, store.view, store.live);
  indices.pop_back();
  store.rowIndices = indices;
  fused = store;
}

void KernelEmitter::emitRowStore(Value j) {
  const Assign &assign = *fused->rows->assign;
  scopes.emplace_back();
  varBounds[scopes.back()[assign.indices.back()] = j] = op.tensors[assign.tensorIndex].shape.back().size.get();
  Value value = toStorage(emitExpr(*assign.value), elementType(assign), loc(assign.loc));
  scopes.pop_back();
  SmallVector<Value> indices(fused->rowIndices);
  indices.push_back(j);
  moe::RowStoreOp::create(b, loc(assign.loc), value, fused->view, indices, fused->live);
}

Value KernelEmitter::emitFold(const Expr &e) {
  Location l = loc(e.loc);
  Value bound = emitExpr(*e.operands[0]);
  Value init = emitExpr(*e.operands[1]);
  auto fold = moe::FoldOp::create(b, l, init.getType(), bound, init);
  OpBuilder::InsertionGuard guard(b);
  Block *body = b.createBlock(&fold.getBody());
  scopes.emplace_back();
  varBounds[scopes.back()[e.name] = body->addArgument(b.getIndexType(), l)] = e.operands[0].get();
  scopes.back()[e.accName] = body->addArgument(init.getType(), l);
  moe::YieldOp::create(b, l, emitExpr(*e.operands[2]));
  scopes.pop_back();
  return fold.getResult();
}

} // namespace moec::detail
