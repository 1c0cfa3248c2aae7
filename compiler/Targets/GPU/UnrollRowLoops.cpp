//===- UnrollRowLoops.cpp - GPU: a thread's few steps along a row, unrolled -===//
//
// A thread that runs a loop along a row a few times (C2 at Mixtral's H = 4096: 2 steps of 2048 elements for
// each of a block's 256 threads) waits for each step's gathers before it stores the step's result and
// branches back, so only one step's loads are ever in flight. moe-lower-to-gpu marks such a loop where every
// lane runs the same constant number of steps (kLaneLoopAttr: from the lane's offset, below the step, to a
// whole number of steps). This pass, after the passes that version the loop and guard its loads, unrolls it by
// the largest power of two that divides its steps and keeps at most kRowLoopLoadsInFlight (8) vector loads per
// lane in one step, running it from 0 with the offset added in its body. The steps' loads then issue back to
// back (a GPU thread issues in order, and a load does not wait for an earlier store it does not depend on). A
// loop it does not unroll stays as it is: from the lane's offset it has no constant count that LLVM unrolls unasked.
// The steps compute and store what they did before, in the same order: results do not change.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Dialect/MoeDialect.h"
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"
#include "Transforms/UnrollBudgets.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEUNROLLROWLOOPS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// The unroll factor of a marked loop (from a lane's offset below its step to a constant end): 1 where its end
/// is no whole number of steps, or it loads nothing.
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
  // A loop without loads has none to put in flight (a version of C2's that only reports failed checks:
  // unrolled, its registers cost the kernel 16 of its 64 warps per SM).
  while (loads > 0 && steps % (2 * factor) == 0 && 2 * factor * loads <= kRowLoopLoadsInFlight &&
         2 * factor * ops <= kMaxUnrolledOps)
    factor *= 2;
  return factor;
}

struct UnrollRowLoopsPass : impl::MoeUnrollRowLoopsBase<UnrollRowLoopsPass> {
  void runOnOperation() override {
    SmallVector<scf::ForOp> marked;
    getOperation()->walk([&](scf::ForOp loop) {
      if (loop->hasAttr(kLaneLoopAttr))
        marked.push_back(loop);
    });
    for (scf::ForOp loop : marked) {
      loop->removeAttr(kLaneLoopAttr);
      int64_t factor = unrollFactor(loop);
      if (factor == 1)
        continue; // from the lane's offset: no constant count for LLVM to unroll it by either
      OpBuilder b(loop);
      startLaneLoopAtZero(b, loop);
      (void)loopUnrollByFactor(loop, factor); // a whole number of steps: no remainder loop; a single step inlines
    }
  }
};
} // namespace
} // namespace moec::moe
