//===- AccumulateRows.cpp - CPU: a row's reduction step by step over the whole row ---===//
//
// Marks the reduction of each CPU row-at-a-time domain that can run as an accumulated row
// (accumulatedReduction: a fold or sum over gathered rows, too long to unroll fully, adding f32 terms,
// everything else in the body row-invariant) moe.accumulated_row: moe-lower-to-loops then runs its steps
// over the whole row into f32 accumulators, several steps a pass, instead of every step for each vector
// (emitRow, emitAccumulatedSteps). See MoePasses.td.
//===----------------------------------------------------------------------===//
#include "Transforms/AccumulatedRows.h"

#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#define DEBUG_TYPE "moe-accumulate-rows"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEACCUMULATEROWS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {
struct AccumulateRowsPass : impl::MoeAccumulateRowsBase<AccumulateRowsPass> {
  void runOnOperation() override {
    for (DomainOp domain : collectDomainOps(getOperation())) {
      ScheduleAttr schedule = domain.schedule();
      if (!schedule || runsPerPoint(domain))
        continue;
      // The width moe-lower-to-loops gives the row's loop (emitRow): a row of scalars has no vectors to spare.
      VaryingAnalysis analysis(domain);
      if (analysis.blocker() || schedule.getVector() <= 1)
        continue;
      if (Operation *reduction = accumulatedReduction(domain, analysis, /*staged=*/false))
        reduction->setAttr(kAccumulatedRowAttr, UnitAttr::get(&getContext()));
    }
  }
};
} // namespace
} // namespace moec::moe
