//===- StepTables.cpp - GPU: a fold's per-step work once per step, in tables ---===//
//
// Marks moe.step_table each fold of a GPU domain that runs a row per warp (neither grouped nor a point
// domain) where the fold runs along the row (its accumulator varies along it) and its steps are known
// before the row's loop: a step bound that is a constant or a list's count, of at most kMaxStepTableSteps
// steps, computed before the domain or by a row-invariant op (moe-hoist-row-invariants). moe-lower-to-gpu
// then does the steps' work that does not vary along the row once per step in the row's prologue, into
// shared-memory tables that the steps along the row read (BodyEmitter::emitStepTables). See GpuPasses.td.
//===----------------------------------------------------------------------===//
#include "Transforms/BodyEmitter.h"

#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#define DEBUG_TYPE "moe-step-tables"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOESTEPTABLES
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// Whether the row's prologue knows `bound` before the fold's table is filled: it is defined before the
/// domain, or by a top-level op of the body that runs once per row.
bool knownBeforeRow(Value bound, DomainOp domain) {
  Operation *def = bound.getDefiningOp();
  Operation *at = def ? def : cast<BlockArgument>(bound).getOwner()->getParentOp();
  if (!domain.op()->isAncestor(at))
    return true;
  return def && def->getBlock() == &domain.body() && def->hasAttr(kRowInvariantAttr);
}

struct StepTablesPass : impl::MoeStepTablesBase<StepTablesPass> {
  void runOnOperation() override {
    for (DomainOp domain : collectDomainOps(getOperation())) {
      ScheduleAttr schedule = domain.schedule();
      if (!schedule || gpuMapping(domain) != GpuMapping::Rows || domain.op()->hasAttr(kRowGroupAttr) ||
          schedule.getThreads() % kWarpSize != 0)
        continue;
      std::optional<VaryingAnalysis> analysis;
      for (Operation &op : domain.body().without_terminator()) {
        auto fold = dyn_cast<FoldOp>(op);
        if (!fold)
          continue;
        int64_t steps = mostFoldSteps(fold);
        if (steps <= 0 || steps > kMaxStepTableSteps || !knownBeforeRow(fold.getBound(), domain))
          continue;
        if (!analysis)
          analysis.emplace(domain);
        if (analysis->isVarying(fold.getResult()))
          fold->setAttr(kStepTableAttr, UnitAttr::get(&getContext()));
      }
    }
  }
};

} // namespace
} // namespace moec::moe
