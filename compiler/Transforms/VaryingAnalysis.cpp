//===- VaryingAnalysis.cpp - Which values of a body vary along its contiguous index ---===//
//
// VaryingAnalysis: the values of a domain body (or of a reduction's body) that depend on its contiguous index,
// and the first op that keeps the body from running vectors along it; contiguousReduction, the moe.sum bodies
// that read along their own index.
//===----------------------------------------------------------------------===//
#include "BodyEmitter.h"

using namespace mlir;

namespace moec::moe {

VaryingAnalysis::VaryingAnalysis(Value seed, Block &block) : inner(seed) {
  varying.insert(inner);
  visit(block);
}

void VaryingAnalysis::visit(Block &block) {
  for (Operation &op : block) {
    if (auto fold = dyn_cast<FoldOp>(op))
      visitFold(fold);
    else
      for (Region &region : op.getRegions())
        for (Block &nested : region)
          visit(nested);
    bool anyVarying = llvm::any_of(op.getOperands(), [&](Value v) { return isVarying(v); });
    checkAllowed(op, anyVarying);
    bool resultsVary = anyVarying;
    if (auto ifOp = dyn_cast<scf::IfOp>(op))
      resultsVary = yieldsVarying(ifOp.thenYield()) || (ifOp.elseBlock() && yieldsVarying(ifOp.elseYield()));
    if (auto sum = dyn_cast<SumOp>(op))
      resultsVary = isVarying(cast<YieldOp>(sum.getBody().front().getTerminator()).getValue());
    if (auto fold = dyn_cast<FoldOp>(op))
      resultsVary = isVarying(fold.getInit()) || isVarying(fold.getBody().getArgument(1));
    if (resultsVary)
      for (Value r : op.getResults())
        varying.insert(r);
  }
}

void VaryingAnalysis::visitFold(FoldOp fold) {
  Block &body = fold.getBody().front();
  Value acc = body.getArgument(1);
  if (isVarying(fold.getInit()))
    varying.insert(acc);
  visit(body);
  if (!isVarying(acc) && isVarying(cast<YieldOp>(body.getTerminator()).getValue())) {
    varying.insert(acc);
    visit(body);
  }
}

bool VaryingAnalysis::yieldsVarying(scf::YieldOp yield) {
  return llvm::any_of(yield.getOperands(), [&](Value v) { return isVarying(v); });
}

void VaryingAnalysis::checkAllowed(Operation &op, bool anyVarying) {
  if (!anyVarying || firstBlocker)
    return;
  bool ok = false;
  if (auto load = dyn_cast<memref::LoadOp>(op)) {
    auto indices = load.getIndices();
    ok = !isVarying(load.getMemRef()) && !indices.empty() && indices.back() == inner &&
         llvm::none_of(indices.drop_back(), [&](Value v) { return isVarying(v); });
  } else if (auto ifOp = dyn_cast<scf::IfOp>(op)) {
    ok = !isVarying(ifOp.getCondition());
  } else if (auto sum = dyn_cast<SumOp>(op)) {
    ok = !isVarying(sum.getBound());
  } else if (auto fold = dyn_cast<FoldOp>(op)) {
    ok = !isVarying(fold.getBound());
  } else if (auto write = dyn_cast<WriteOp>(op)) {
    auto indices = write.getIndices();
    ok = !indices.empty() && indices.back() == inner && (!write.getGuard() || !isVarying(write.getGuard())) &&
         llvm::none_of(indices.drop_back(), [&](Value v) { return isVarying(v); });
  } else if (auto store = dyn_cast<RowStoreOp>(op)) { // a fused row's element j, as a write's
    auto indices = store.getIndices();
    ok = !isVarying(store.getOutput()) && !indices.empty() && indices.back() == inner &&
         (!store.getGuard() || !isVarying(store.getGuard())) &&
         llvm::none_of(indices.drop_back(), [&](Value v) { return isVarying(v); });
  } else if (isa<scf::YieldOp, YieldOp>(op)) {
    ok = true;
  } else {
    StringRef dialect = op.getDialect()->getNamespace();
    ok = (dialect == "arith" || dialect == "math") && op.hasTrait<OpTrait::Elementwise>();
  }
  if (!ok)
    firstBlocker = &op;
}

std::optional<VaryingAnalysis> contiguousReduction(SumOp sum) {
  Block &body = sum.getBody().front();
  VaryingAnalysis analysis(body.getArgument(0), body);
  if (analysis.blocker())
    return std::nullopt;
  bool readsAlong = false;
  body.walk([&](memref::LoadOp load) {
    readsAlong |= !load.getIndices().empty() && load.getIndices().back() == body.getArgument(0);
  });
  if (!readsAlong)
    return std::nullopt;
  return analysis;
}

} // namespace moec::moe
