//===- GroupPoints.cpp - GPU: a row of points whose dot products share a row ---===//
//
// A point kernel (a dot product over H per domain point, runsPerPoint) runs a warp per point on the GPU.
// A3 with probs computes, for each (token t, expert e), sum(j < H) permuted_tokens[row, j] * grad[t, j]:
// the K live experts of a token each read the token's gradient row again (K reads of it per token, K = 8
// at DeepSeek-V3's shapes, where the op's minimum traffic reads it once).
//
// This pass marks such a kernel `moe.point_rows` when a term of its dot product loads along the sum's
// index through indices that do not depend on the point's last index (grad[t, j]: a row shared by the
// row's points). moe-lower-to-gpu then runs a row of points (outer..., every e) per warp: the warp walks
// the points in order, a live point's dot product waits until kWarpInterleavedPoints have, and those run
// together in one loop along j, the shared row loaded once per vector for all of them
// (emitWarpPointRow). Each point's partial sums add the same terms in the same order: the results are
// bit-identical to a warp per point.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "moe-group-points"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEGROUPPOINTS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// Whether a term of `sum` loads along the sum's index through a row that does not depend on the domain's
/// last index: the points of a row read the same values.
bool readsSharedRow(DomainOp domain, SumOp sum) {
  Block &body = domain.body();
  // The values that depend on the point: an op's results do when it or an op nested in it uses one.
  DenseSet<Value> fromPoint{body.getArguments().back()};
  for (bool changed = true; changed;) {
    changed = false;
    body.walk([&](Operation *op) {
      bool uses = false;
      op->walk([&](Operation *inner) {
        uses |= llvm::any_of(inner->getOperands(), [&](Value v) { return fromPoint.contains(v); });
      });
      if (uses)
        for (Value r : op->getResults())
          changed |= fromPoint.insert(r).second;
    });
  }
  Value j = sum.getBody().front().getArgument(0);
  for (Operation &op : sum.getBody().front().without_terminator()) {
    auto load = dyn_cast<memref::LoadOp>(op);
    if (load && !load.getIndices().empty() && load.getIndices().back() == j &&
        llvm::none_of(load->getOperands(), [&](Value v) { return fromPoint.contains(v); }))
      return true;
  }
  return false;
}

struct GroupPointsPass : impl::MoeGroupPointsBase<GroupPointsPass> {
  void runOnOperation() override {
    for (DomainOp domain : collectDomainOps(getOperation())) {
      ScheduleAttr schedule = domain.schedule();
      if (!schedule || schedule.getThreads() != 32 || domain.bounds().size() < 2 ||
          gpuMapping(domain) != GpuMapping::WarpPerPoint || !pointsCanInterleave(domain, /*minRowBytes=*/0))
        continue;
      if (readsSharedRow(domain, contiguousReductionOf(domain)))
        domain.op()->setAttr(kPointRowsAttr, UnitAttr::get(&getContext()));
    }
  }
};
} // namespace
} // namespace moec::moe
