//===- LowerToLoops.cpp - CPU: moe.compute to a row-range loop nest -------===//
//
// 1. Each kernel function gains two trailing index arguments, row_begin and row_end: one call computes
//    those rows, so the runtime can split a kernel's rows across threads.
// 2. Each moe.compute / moe.scatter becomes `scf.for %row = row_begin to min(row_end, rows)` around the
//    row body of
//    BodyLowering (a vector loop along the contiguous dim, then the scalar remainder).
// 3. A moe.sum that reads along its own index (a dot product over H) keeps 32 f32 partial sums. A domain
//    whose points each run one and that does not vectorize along its last dim runs by point (the range
//    is of points), its points' dot products interleaved where moe-interleave-reductions marked it.
// 4. The vector stores of the output are marked kStreamableAttr with the alignment they have where the
//    output's base pointer is aligned: moe-streaming-stores makes them non-temporal where it is.
// Vector accesses promise only element alignment: CPU vector loads need no more, and host tensors
// may come from anywhere.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#define DEBUG_TYPE "moe-lower-to-loops"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOELOWERTOLOOPS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {
struct LowerToLoopsPass : impl::MoeLowerToLoopsBase<LowerToLoopsPass> {
  using MoeLowerToLoopsBase::MoeLowerToLoopsBase;

  void runOnOperation() override {
    for (auto func : llvm::make_early_inc_range(getOperation().getOps<func::FuncOp>())) {
      SmallVector<DomainOp> domains = collectDomainOps(func);
      if (domains.empty())
        continue;
      if (failed(requireSchedules(domains)))
        return signalPassFailure();
      if (failed(lowerKernel(func, domains)))
        return signalPassFailure();
    }
    getOperation().walk([](Operation *op) { op->removeAttr(kRowInvariantAttr); });
  }

  RowTarget rowTarget() const { return RowTarget{/*onGpu=*/false, /*streamableStores=*/true}; }

  LogicalResult lowerKernel(func::FuncOp func, ArrayRef<DomainOp> domains) {
    OpBuilder b(func);
    unsigned n = func.getNumArguments();
    auto attrs = [&](ArgRole role) { return argRoleDictionary(b.getContext(), role); };
    if (failed(func.insertArguments({n, n}, {b.getIndexType(), b.getIndexType()},
                                    {attrs(ArgRole::RowBegin), attrs(ArgRole::RowEnd)}, {func.getLoc(), func.getLoc()})))
      return func.emitError("cannot add the row-range arguments");
    Value rowBegin = func.getArgument(n), rowEnd = func.getArgument(n + 1);

    for (DomainOp domain : domains) {
      Location loc = domain.op()->getLoc();
      b.setInsertionPoint(domain.op());
      if (runsPerPoint(domain)) {
        Value end = arith::MinSIOp::create(b, loc, rowEnd, emitPointCount(b, domain));
        emitPointRange(b, domain, rowBegin, end, kCpuReductionWidth);
        domain.op()->erase();
        continue;
      }
      Value end = arith::MinSIOp::create(b, loc, rowEnd, emitRowCount(b, domain));
      auto rowLoop = scf::ForOp::create(b, loc, rowBegin, end, arith::ConstantIndexOp::create(b, loc, 1));
      b.setInsertionPointToStart(rowLoop.getBody());
      emitRow(b, domain, rowLoop.getInductionVar(), arith::ConstantIndexOp::create(b, loc, 0), 1,
              /*vectorAlignment=*/1, /*reductionWidth=*/kCpuReductionWidth, rowTarget());
      domain.op()->erase();
    }
    return success();
  }
};
} // namespace
} // namespace moec::moe
