//===- LanePointAccess.cpp - GPU: a row of points runs 32 points at once, a lane each ---===//
//
// A row of points (moe.point_rows, moe-group-points) runs on one warp. emitWarpPointRow takes its points
// 32 at a time, a lane each: each lane runs its point's ops before the dot product (A3: its routing-map
// byte, its slot, the slot's row; a point that is not live writes its zero at once), a ballot says which
// points are live, and only those enter the dot products, in order. A3 at E = 256 has K = 8 live points
// in 256: the warp no longer steps through the 248 others one at a time.
//
// A prefix count over the points before this one (A3's slot number k = fold(j < e) (routing_map[t, j] ?
// n + 1 : n)) would cost each lane e steps. This pass marks it `moe.lane_scan` when each step adds a
// constant c or nothing (countingFoldIncrement), its bound is the point's last index in a domain of rank
// > 1 (so the row's points start at index 0), its init is the same for the whole row, and its steps read
// nothing else of the body but the row's outer indices. Each lane then runs its own point's step (from 0),
// and a ballot of the lanes whose step adds c gives each lane c times the count of those below it,
// continued from the 32 points before: integer addition is associative, so the value is the fold's exactly.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/IR/Matchers.h"

#define DEBUG_TYPE "moe-lane-point-access"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOELANEPOINTACCESS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// Whether `fold` (a top-level op of a row of points' body) is a prefix count over the row's points.
bool isLaneScan(DomainOp domain, FoldOp fold) {
  Block &body = domain.body();
  Value point = body.getArguments().back();
  if (body.getNumArguments() < 2 || fold.getBound() != point || !countingFoldIncrement(fold))
    return false;
  // The row's values: the same for each of its points.
  auto sameForRow = [&](Value v) {
    if (matchPattern(v, m_Constant()))
      return true;
    if (auto index = dyn_cast<BlockArgument>(v); index && index.getOwner() == &body)
      return index != point;
    return !domain.op()->isAncestor(v.getParentBlock()->getParentOp());
  };
  if (!sameForRow(fold.getInit()))
    return false;
  bool stepsReadRowOnly = true;
  fold.getBody().walk([&](Operation *op) {
    for (Value v : op->getOperands())
      if (!fold->isAncestor(v.getParentBlock()->getParentOp()) && !sameForRow(v))
        stepsReadRowOnly = false;
  });
  return stepsReadRowOnly;
}

struct LanePointAccessPass : impl::MoeLanePointAccessBase<LanePointAccessPass> {
  void runOnOperation() override {
    for (DomainOp domain : collectDomainOps(getOperation())) {
      if (!domain.op()->hasAttr(kPointRowsAttr))
        continue;
      Block &body = domain.body();
      Operation *carrier = body.findAncestorOpInBlock(*contiguousReductionOf(domain));
      for (Operation *top = &body.front(); top != carrier; top = top->getNextNode())
        if (auto fold = dyn_cast<FoldOp>(top); fold && isLaneScan(domain, fold))
          fold->setAttr(kLaneScanAttr, UnitAttr::get(&getContext()));
    }
  }
};
} // namespace
} // namespace moec::moe
