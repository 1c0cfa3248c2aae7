//===- UnrollLaneSums.cpp - GPU: a warp's dot product along a row, unrolled ---===//
//
// A dot product that a warp computes along a whole row (a warp per point, or per batch of points) waits for
// its loads once per step of its loop along the row, and one warp covers the whole row: with few warps per
// SM (a small batch of tokens, or a kernel whose registers allow few) that chain of waits, not the
// bandwidth, bounds it. moe-lower-to-gpu marks such a loop kLaneSumAttr where every lane runs the same
// constant number of steps (it starts within its first step and its constant end is a whole number of
// steps); its results are the lanes' partial sums. This pass unrolls it by the largest power of two that
// keeps at most kDotProductLoadsInFlight vector loads per lane in one step (of at most
// kMaxUnrolledStepLoads), divides its steps and leaves at least two, running it from 0 with each lane's
// offset added in its body: the count is then a constant, and no lane runs a remainder loop that the others
// skip. It runs before the row loops are versioned and their loads guarded, so that moe-guard-loads puts
// the unrolled steps' predicated gathers together. The adds still run in order: each partial sum is the same.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Dialect/MoeDialect.h"
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"
#include "Transforms/UnrollBudgets.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEUNROLLLANESUMS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// The unroll factor of a marked loop: 1 where its end is no whole number of steps, a step loads nothing or
/// more than kMaxUnrolledStepLoads (a batch of points whose registers already set the kernel's count: unrolled
/// by 2, ptxas spilled), or the unrolled body would pass kMaxUnrolledOps.
int64_t unrollFactor(scf::ForOp loop) {
  APInt end, step;
  if (!matchPattern(loop.getUpperBound(), m_ConstantInt(&end)) || !matchPattern(loop.getStep(), m_ConstantInt(&step)) ||
      step.getSExtValue() <= 0 || end.getSExtValue() % step.getSExtValue() != 0)
    return 1;
  int64_t steps = end.getSExtValue() / step.getSExtValue();
  int64_t loads = 0, ops = 0;
  loop.getBody()->walk([&](Operation *o) {
    loads += isa<vector::LoadOp, GuardedLoadOp>(o);
    ++ops;
  });
  int64_t factor = 1;
  // At least two unrolled steps stay: the loop is kept (its results are the sums), never promoted away.
  while (loads > 0 && loads <= kMaxUnrolledStepLoads && 2 * factor * loads <= kDotProductLoadsInFlight &&
         steps % (2 * factor) == 0 && steps / (2 * factor) >= 2)
    factor *= 2;
  return ops * factor > kMaxUnrolledOps ? 1 : factor;
}

struct UnrollLaneSumsPass : impl::MoeUnrollLaneSumsBase<UnrollLaneSumsPass> {
  void runOnOperation() override {
    SmallVector<scf::ForOp> marked;
    getOperation()->walk([&](scf::ForOp loop) {
      if (loop->hasAttr(kLaneSumAttr))
        marked.push_back(loop);
    });
    for (scf::ForOp loop : marked) {
      loop->removeAttr(kLaneSumAttr);
      int64_t factor = unrollFactor(loop);
      if (factor == 1)
        continue;
      OpBuilder b(loop);
      startLaneLoopAtZero(b, loop);
      (void)loopUnrollByFactor(loop, factor); // a whole number of unrolled steps: no remainder loop
    }
  }
};
} // namespace
} // namespace moec::moe
