//===- InterleaveReductions.cpp - CPU: a point kernel's dot products a few at a time ---===//
//
// Marks each CPU point domain (a dot product per point, not vectorized along its last dim) whose body
// splits around its dot product (pointsCanInterleave) and whose rows hold at least a page with
// moe.interleaved_points = N: moe-lower-to-loops then runs the dot products of N live points together, so
// that their gathered rows stream at once (emitPointRange). See MoePasses.td.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#define DEBUG_TYPE "moe-interleave-reductions"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEINTERLEAVEREDUCTIONS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {
struct InterleaveReductionsPass : impl::MoeInterleaveReductionsBase<InterleaveReductionsPass> {
  using MoeInterleaveReductionsBase::MoeInterleaveReductionsBase;

  void runOnOperation() override {
    if (!isInterleavedPoints(points)) {
      getOperation().emitError("moe-interleave-reductions: points must be 2 to 8, not ") << int64_t(points);
      return signalPassFailure();
    }
    for (DomainOp domain : collectDomainOps(getOperation()))
      if (domain.schedule() && runsPerPoint(domain) && pointsCanInterleave(domain, kInterleavedRowBytes))
        domain.op()->setAttr(kInterleavedPointsAttr, IntegerAttr::get(IntegerType::get(&getContext(), 64), points));
  }
};
} // namespace
} // namespace moec::moe
