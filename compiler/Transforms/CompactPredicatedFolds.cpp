//===- CompactPredicatedFolds.cpp - A long fold over its live steps only ---===//
//
// C2 combines each token's rows as `fold(e < E, acc) { r = rowmap[t, e]; r < 0 ? acc : acc + x[r, h] }`:
// with E = 256 experts and K = 8 of them live, 248 of every 256 steps only test a predicate, and the
// lowering repeats them for every vector along h. This pass splits such a fold, when it is longer than
// the schedule's unroll factor, into a moe.compact of the live steps and a fold over that list
// (PredicatedFolds.cpp; moe-short-lists does the shorter ones). See MoePasses.td.
//===----------------------------------------------------------------------===//
#include "PredicatedFolds.h"

#include "moec/compiler/Transforms/Passes.h"

#define DEBUG_TYPE "moe-compact-predicated-folds"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOECOMPACTPREDICATEDFOLDS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {
struct CompactPredicatedFoldsPass : impl::MoeCompactPredicatedFoldsBase<CompactPredicatedFoldsPass> {
  using MoeCompactPredicatedFoldsBase::MoeCompactPredicatedFoldsBase;

  void runOnOperation() override {
    if (failed(compactPredicatedFolds(getOperation(), target, FoldLength::Long)))
      signalPassFailure();
  }
};
} // namespace
} // namespace moec::moe
