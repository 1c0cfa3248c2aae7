//===- BoundsChecks.cpp - Kernel-side index and division checks -----------===//
//
// KernelEmitter's checks: an index the compiler cannot prove inside its dim (a variable bounded by the dim,
// or `i * B + j` over a dim `A * B`) is checked in the kernel, and an access outside records its first
// failing dim and index in the status buffer; an integer division that would trap divides by 1 instead and
// records itself (IndexCheck::kDivision).
//===----------------------------------------------------------------------===//
#include "KernelEmitter.h"

#include "moec/compiler/Dialect/MoeDialect.h"
#include "moec/dsl/Printer.h"

#include "mlir/IR/Builders.h"

#include <cstdint>

using namespace mlir;
using namespace moec::dsl;

namespace moec::detail {

const Expr *KernelEmitter::boundOf(const Expr &index) {
  if (index.kind != ExprKind::Name)
    return nullptr;
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it)
    if (auto found = it->find(index.name); found != it->end()) {
      auto bound = varBounds.find(found->second);
      return bound == varBounds.end() ? nullptr : bound->second;
    }
  return nullptr;
}

bool KernelEmitter::provenInBounds(const Expr *index, const Expr &dim) {
  if (!index)
    return true;
  std::string dimText = printExpr(dim);
  // j < e with e < E proves j < E: follow variables bounded by variables (all start at 0). Locals never
  // shadow, so a bound's name still means the variable it meant where the bounded one was declared.
  if (const Expr *bound = boundOf(*index)) {
    for (int depth = 0; bound && depth < 64; ++depth, bound = boundOf(*bound))
      if (printExpr(*bound) == dimText)
        return true;
    return false;
  }
  if (index->kind != ExprKind::Binary || index->binOp != BinOp::Add)
    return false;
  const Expr &product = *index->operands[0], &inner = *index->operands[1];
  if (product.kind != ExprKind::Binary || product.binOp != BinOp::Mul)
    return false;
  const Expr *outerBound = boundOf(*product.operands[0]), *innerBound = boundOf(inner);
  return outerBound && innerBound && printExpr(*innerBound) == printExpr(*product.operands[1]) &&
         printExpr(*outerBound) + " * " + printExpr(*product.operands[1]) == dimText;
}

Value KernelEmitter::boundsCheck(int tensorIndex, ArrayRef<const Expr *> indexExprs, ArrayRef<Value> indices,
                                 Value memref, SmallVectorImpl<size_t> &checkedDims) {
  const TensorDecl &t = op.tensors[tensorIndex];
  auto view = memref.getDefiningOp<moe::ViewOp>();
  Value ok;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (provenInBounds(indexExprs[d], *t.shape[d].size))
      continue;
    checkedDims.push_back(d);
    Location l = indices[d].getLoc();
    Value size = view.getSizes()[d];
    Value inside = arith::AndIOp::create(
        b, l, arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, indices[d], constIndex(0)),
        arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, indices[d], size));
    ok = ok ? Value(arith::AndIOp::create(b, l, ok, inside)) : inside;
  }
  return ok;
}

void KernelEmitter::recordFailure(int tensorIndex, ArrayRef<Value> indices, ArrayRef<size_t> checkedDims,
                                  Value memref, const SourceLoc &at) {
  Location l = loc(at);
  auto view = memref.getDefiningOp<moe::ViewOp>();
  int64_t site = int64_t(checks.size());
  checks.push_back({tensorIndex, at.line, at.col});
  Value dim = constIndex(0), value = constIndex(0);
  for (size_t d : llvm::reverse(checkedDims)) { // the lowest failing dim wins
    Value outside = arith::OrIOp::create(
        b, l, arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, indices[d], constIndex(0)),
        arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, indices[d], view.getSizes()[d]));
    dim = arith::SelectOp::create(b, l, outside, constIndex(int64_t(d) + 1), dim);
    value = arith::SelectOp::create(b, l, outside, indices[d], value);
  }
  Value status = statusBuffer();
  auto i64 = [&](Value v) { return arith::IndexCastOp::create(b, l, b.getI64Type(), v); };
  memref::StoreOp::create(b, l, i64(dim), status, ValueRange{constIndex(2 * site)});
  memref::StoreOp::create(b, l, i64(value), status, ValueRange{constIndex(2 * site + 1)});
}

Value KernelEmitter::safeDivisor(Value x, Value y, const SourceLoc &at) {
  Location l = loc(at);
  using IP = arith::CmpIPredicate;
  Value zero = arith::CmpIOp::create(b, l, IP::eq, y, constIndex(0));
  Value overflow = arith::AndIOp::create(b, l, arith::CmpIOp::create(b, l, IP::eq, y, constIndex(-1)),
                                         arith::CmpIOp::create(b, l, IP::eq, x, constIndex(INT64_MIN)));
  Value bad = arith::OrIOp::create(b, l, zero, overflow);
  {
    OpBuilder::InsertionGuard guard(b);
    auto ifOp = scf::IfOp::create(b, l, bad, /*withElseRegion=*/false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    int64_t site = int64_t(checks.size());
    checks.push_back({IndexCheck::kDivision, at.line, at.col});
    Value status = statusBuffer();
    memref::StoreOp::create(b, l, arith::ConstantIntOp::create(b, l, 1, 64), status, ValueRange{constIndex(2 * site)});
    memref::StoreOp::create(b, l, arith::IndexCastOp::create(b, l, b.getI64Type(), x), status,
                            ValueRange{constIndex(2 * site + 1)});
  }
  return arith::SelectOp::create(b, l, bad, constIndex(1), y);
}

Value KernelEmitter::statusBuffer() {
  if (!statusView)
    statusView = atEntry([&]() -> Value {
      auto type = MemRefType::get({ShapedType::kDynamic}, b.getI64Type());
      return moe::ViewOp::create(b, func.getLoc(), type, func.getArgument(statusArgIndex()),
                                 ValueRange{constIndex(0)});
    }).getDefiningOp();
  return statusView->getResult(0);
}

} // namespace moec::detail
