//===- Schedule.cpp - Attach a #moe.schedule to every moe.compute ---------===//
//
// For each moe.compute / moe.scatter without a schedule: take the requested fields from the pass options
// and let moec::chooseSchedule fill the rest from the domain's last dim (when static), the output's
// element size, and whether the body vectorizes along that dim.
//===----------------------------------------------------------------------===//
#include "moec/compiler/DefaultSchedule.h"
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/IR/Matchers.h"

#define DEBUG_TYPE "moe-schedule"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOESCHEDULE
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {
struct SchedulePass : impl::MoeScheduleBase<SchedulePass> {
  using MoeScheduleBase::MoeScheduleBase;

  void runOnOperation() override {
    if (target != "cpu" && target != "gpu" && target != "ascend") {
      getOperation().emitError() << "moe-schedule: target must be cpu, gpu or ascend, got '" << target << "'";
      return signalPassFailure();
    }
    TargetKind kind = target == "cpu" ? TargetKind::CPU : target == "gpu" ? TargetKind::GPU : TargetKind::Ascend;
    for (DomainOp domain : collectDomainOps(getOperation())) {
      if (domain.op()->hasAttr("schedule"))
        continue;
      auto type = cast<MemRefType>(domain.output().getType());
      APInt innerSize;
      int64_t inner = matchPattern(domain.bounds().back(), m_ConstantInt(&innerSize)) ? innerSize.getSExtValue() : 0;
      int64_t elemBytes = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
      Schedule s;
      if (kind == TargetKind::GPU && gpuMapping(domain) == GpuMapping::WarpPerPoint) {
        // A warp per point: 32 lanes split the reduction; the vector width fits the reduced rows. The
        // vector width and unroll decide which partial sums each element joins, so they fix the order of
        // the additions, hence the bits: they stay the compiler's whatever is requested (a tuned config
        // may only change how points are grouped into blocks).
        ReductionShape r = reductionShape(domain);
        s = chooseSchedule({rowsPerBlock ? rowsPerBlock : 8, kWarpSize, 0, 0}, kind, r.length, r.elemBytes, true);
        s.threads = kWarpSize;
      } else if (kind == TargetKind::GPU && !threads && hasRowInvariantGuard(domain, rowInvariantOps(domain))) {
        // A scatter that skips whole rows (A3's (token, expert) rows, most of them not routed): a warp per
        // row, so that a skipped row costs one warp's prologue, not a whole block's.
        s = chooseSchedule({rowsPerBlock ? rowsPerBlock : 8, kWarpSize, vector, unroll}, kind, inner, elemBytes,
                           isVectorizable(domain));
      } else {
        int64_t rows = rowsPerBlock;
        // CPU: a worker takes at least 3 MiB of a row's streamed bytes at once. Waking a worker costs tens
        // of microseconds (50-100 in this project's VM, after the worker idled): sweeps at 64 tokens found
        // two workers up to 2.4x slower than one on 1.5-4.6 MB batches (1 MiB tasks), and faster on 8 MB
        // (bench/tune/RESULTS.md).
        // Point kernels (a dot product per point, runsPerPoint) keep the default: their units are points,
        // most of which may not be live (A3: 3 % of (token, expert) pairs), so bytes per unit say little.
        if (kind != TargetKind::GPU && !rows && inner > 0 && !runsPerPoint(domain)) {
          int64_t rowBytes = streamedBytesPerRow(domain, inner);
          rows = std::clamp<int64_t>(((int64_t(3) << 20) + rowBytes - 1) / rowBytes, 1, 1024);
        }
        s = chooseSchedule({rows, threads, vector, unroll}, kind, inner, elemBytes, isVectorizable(domain),
                           cpuLanes ? cpuLanes : hostVectorLanes());
      }
      if (std::string why = scheduleProblem(s, kind); !why.empty()) {
        domain.op()->emitError() << "moe-schedule: " << why;
        return signalPassFailure();
      }
      domain.setSchedule(ScheduleAttr::get(&getContext(), s.rowsPerBlock, s.threads, s.vector, s.unroll));
    }
  }
};
} // namespace
} // namespace moec::moe
