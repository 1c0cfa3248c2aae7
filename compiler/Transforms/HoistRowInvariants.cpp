//===- HoistRowInvariants.cpp - Mark what a row computes once -------------===//
//
// A domain's body runs for every element, but index loads, folds over E or K that read no element of the
// row, divisions and predicates usually depend only on the row. This pass marks those top-level ops
// `moe.row_invariant`, and a scatter's moe.write whose guard is among them `moe.row_guard`; the row
// lowering (emitRow) then computes them once per row, before the loop along the row, and skips a row
// whose guard is false without entering that loop. Checks inside hoisted ops still run, once per row.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#define DEBUG_TYPE "moe-hoist-row-invariants"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEHOISTROWINVARIANTS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {
struct HoistRowInvariantsPass : impl::MoeHoistRowInvariantsBase<HoistRowInvariantsPass> {
  void runOnOperation() override {
    UnitAttr unit = UnitAttr::get(&getContext());
    for (DomainOp domain : collectDomainOps(getOperation())) {
      SmallVector<Operation *> invariant = rowInvariantOps(domain);
      for (Operation *op : invariant)
        op->setAttr(kRowInvariantAttr, unit);
      if (hasRowInvariantGuard(domain, invariant))
        domain.body().getTerminator()->setAttr(kRowGuardAttr, unit);
    }
  }
};
} // namespace
} // namespace moec::moe
