//===- LanePointAccess.cpp - GPU: a row of points loads and writes 32 points at once ---===//
//
// A row of points (moe.point_rows, moe-group-points) runs on one warp that walks its points in order,
// every lane running each point's scalar code alike. A load whose address moves with the point by one
// element (A3: routing_map[t, e], and the carried prefix fold's step routing_map[t, e - 1]; drop-and-pad:
// permute_token_id[i]) is then one request per point that moves a 32-byte sector for one or four bytes,
// and a dependent load in every step of the walk; so is the write of each point that is not live (A3:
// probs_grad[t, e] = 0 for each of a token's E - K unrouted experts), one lane storing 2 bytes.
//
// This pass marks such loads `moe.lane_load`: before the carrier of the point's dot product (the ops
// the walk runs for each point), from a read-only tensor, the point's last index plus a constant in the
// tensor's last dim, every other index the same for the whole row (defined outside the body, a constant,
// or one of the row's outer indices), and not inside a fold or sum. emitWarpPointRow then loads the values
// of 32 consecutive points at once, a lane each (one coalesced request, bounds-checked per lane), at the
// start of every 32 points, and the walk takes each point's value from its lane with a shuffle. It marks
// the domain `moe.lane_writes` when its write is a scalar at the point's own indices: the walk then hands
// a point's value, when the point is not live, to the point's lane, and after every 32 points each lane
// whose point was not live writes it, one coalesced store (a live point writes once its dot product
// runs). The same values reach the same ops and the same elements: results are bit-identical.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/IR/Matchers.h"

#define DEBUG_TYPE "moe-lane-point-access"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOELANEPOINTACCESS
#include "moec/compiler/Transforms/Passes.h.inc"

std::optional<int64_t> lanePointLoadOffset(DomainOp domain, memref::LoadOp load) {
  Block &body = domain.body();
  Value point = body.getArguments().back();
  auto view = load.getMemRef().getDefiningOp<ViewOp>();
  auto arg = view ? dyn_cast<BlockArgument>(view.getPtr()) : BlockArgument();
  auto func = arg ? dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp()) : FunctionOpInterface();
  if (!func || !func.getArgAttr(arg.getArgNumber(), "llvm.readonly") || load.getIndices().empty())
    return std::nullopt;
  Type element = load.getType();
  if (!element.isIntOrFloat() || element.getIntOrFloatBitWidth() > 64)
    return std::nullopt;
  // The row's values: the same for each of its points.
  auto sameForRow = [&](Value v) {
    if (matchPattern(v, m_Constant()))
      return true;
    if (auto index = dyn_cast<BlockArgument>(v); index && index.getOwner() == &body)
      return index != point;
    return !domain.op()->isAncestor(v.getParentBlock()->getParentOp());
  };
  if (!llvm::all_of(load.getIndices().drop_back(), sameForRow))
    return std::nullopt;
  Value last = load.getIndices().back();
  if (last == point)
    return 0;
  APInt c;
  if (auto add = last.getDefiningOp<arith::AddIOp>()) {
    if (add.getLhs() == point && matchPattern(add.getRhs(), m_ConstantInt(&c)))
      return c.getSExtValue();
    if (add.getRhs() == point && matchPattern(add.getLhs(), m_ConstantInt(&c)))
      return c.getSExtValue();
  }
  if (auto sub = last.getDefiningOp<arith::SubIOp>(); sub && sub.getLhs() == point &&
                                                      matchPattern(sub.getRhs(), m_ConstantInt(&c)))
    return -c.getSExtValue();
  return std::nullopt;
}

namespace {
struct LanePointAccessPass : impl::MoeLanePointAccessBase<LanePointAccessPass> {
  void runOnOperation() override {
    for (DomainOp domain : collectDomainOps(getOperation())) {
      if (!domain.op()->hasAttr(kPointRowsAttr))
        continue;
      Block &body = domain.body();
      Operation *carrier = body.findAncestorOpInBlock(*contiguousReductionOf(domain));
      for (Operation *top = &body.front(); top != carrier; top = top->getNextNode())
        top->walk([&](memref::LoadOp load) {
          for (Operation *parent = load->getParentOp(); parent != domain.op(); parent = parent->getParentOp())
            if (isa<FoldOp, SumOp>(parent))
              return;
          if (lanePointLoadOffset(domain, load))
            load->setAttr(kLaneLoadAttr, UnitAttr::get(&getContext()));
        });
      // A deferred write must not be read back by a later point (outputs are not read; checked anyway).
      bool readsOutput = false;
      body.walk([&](memref::LoadOp load) { readsOutput |= load.getMemRef() == domain.output(); });
      auto write = dyn_cast<WriteOp>(body.getTerminator());
      if (write && !readsOutput && write.getValue().getType().isIntOrFloat() &&
          llvm::equal(write.getIndices(), body.getArguments()))
        domain.op()->setAttr(kLaneWritesAttr, UnitAttr::get(&getContext()));
    }
  }
};
} // namespace
} // namespace moec::moe
