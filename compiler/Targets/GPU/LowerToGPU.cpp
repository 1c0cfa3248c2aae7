//===- LowerToGPU.cpp - GPU: kernels to gpu.func, rows to the grid --------===//
//
// 1. Create `gpu.module @moe_kernels` and mark the module a gpu.container_module.
// 2. Move each kernel func.func into it as a `gpu.func ... kernel` with the same lean arguments.
// 3. Each moe.compute / moe.scatter becomes, with schedule (rowsPerBlock Y, threads X, vector V):
//      row = block_id.x * Y + thread_id.y;  if (row < rows) { row body, lanes thread_id.x step X }
//    or, for a domain that reduces along a contiguous dim instead (GpuMapping::WarpPerPoint), a point
//    per warp: the 32 lanes split the reduction in V-element vectors, combine it with shuffles, and lane
//    0 stores; grid.x then covers points instead of rows.
//    A point kernel marked moe.point_rows (moe-group-points) runs a row of points per warp instead
//    (emitWarpPointRow): grid.x covers rows (a one-dim domain's runs of 32 points).
//    A scatter marked moe.row_group (moe-group-rows) runs a group of rows per block instead, its Y warps
//    splitting the row (emitGroupRow), and grid.x is the number of groups: the domain's extents but the
//    last two times ceil(members / 32).
//    The block size is recorded as `known_block_size` (NVVM turns it into .reqntid) and the rows per
//    block as `moe.rows_per_block`, from which the runtime derives grid.x = ceil_div(rows, Y).
// Tensor base pointers are 16-byte aligned (the runtime checks it); a vector access promises what that
// implies for its row, so the default schedule (V divides the row) gets 16-byte accesses and a forced
// V that does not divide the row falls back to element-aligned ones.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

#define DEBUG_TYPE "moe-lower-to-gpu"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOELOWERTOGPU
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {
struct LowerToGPUPass : impl::MoeLowerToGPUBase<LowerToGPUPass> {
  using MoeLowerToGPUBase::MoeLowerToGPUBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> kernels;
    for (auto func : module.getOps<func::FuncOp>())
      if (!collectDomainOps(func).empty())
        kernels.push_back(func);
    if (kernels.empty())
      return;

    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
    auto gpuModule = gpu::GPUModuleOp::create(b, module.getLoc(), "moe_kernels");

    for (func::FuncOp func : kernels) {
      SmallVector<DomainOp> domains = collectDomainOps(func);
      if (failed(requireSchedules(domains)))
        return signalPassFailure();
      if (domains.size() != 1) {
        func.emitError("a GPU kernel holds exactly one moe.compute or moe.scatter, found ") << domains.size();
        return signalPassFailure();
      }
      ScheduleAttr schedule = domains.front().schedule();
      b.setInsertionPointToEnd(gpuModule.getBody());
      auto kernel = gpu::GPUFuncOp::create(b, func.getLoc(), func.getName(), func.getFunctionType());
      kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
      kernel.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr(
          {static_cast<int32_t>(schedule.getThreads()), static_cast<int32_t>(schedule.getRowsPerBlock()), 1}));
      kernel->setAttr(MoeDialect::RowsPerBlockAttrHelper::getNameStr(),
                      b.getI64IntegerAttr(schedule.getRowsPerBlock()));
      if (ArrayAttr argAttrs = func.getAllArgAttrs())
        kernel.setAllArgAttrs(argAttrs);

      // Move the body; gpu.func comes with an entry block holding the arguments.
      Block &entry = kernel.getBody().front();
      IRMapping mapping;
      for (auto [from, to] : llvm::zip(func.getArguments(), entry.getArguments()))
        mapping.map(from, to);
      b.setInsertionPointToStart(&entry);
      for (Operation &op : func.getBody().front().without_terminator())
        b.clone(op, mapping);
      gpu::ReturnOp::create(b, func.getLoc());
      func.erase();

      for (DomainOp domain : collectDomainOps(kernel))
        lowerDomain(domain);
    }
    module.walk([](Operation *op) {
      op->removeAttr(kPointRowsAttr);
      op->removeAttr(kRowInvariantAttr);
      op->removeAttr(kRowGroupAttr);
      op->removeAttr(kGroupKeyAttr);
      op->removeAttr(kLaneScanAttr);
    });
  }

  void lowerDomain(DomainOp domain) {
    Location loc = domain.op()->getLoc();
    ScheduleAttr schedule = domain.schedule();
    OpBuilder b(domain.op());
    bool warpPerPoint = gpuMapping(domain) == GpuMapping::WarpPerPoint;
    bool grouped = domain.op()->hasAttr(kRowGroupAttr);
    auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
    Value blockRow = arith::MulIOp::create(b, loc, gpu::BlockIdOp::create(b, loc, gpu::Dimension::x),
                                           cst(schedule.getRowsPerBlock()));
    Value warp = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::y);
    // A group of rows takes a whole block (its warps split the row), so that few tokens still fill the GPU.
    Value row = grouped ? Value(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x))
                        : Value(arith::AddIOp::create(b, loc, blockRow, warp));
    bool pointRows = gpuMapping(domain) == GpuMapping::WarpPerPointRow;
    Value count = warpPerPoint ? emitPointCount(b, domain)
                  : pointRows  ? emitPointRowCount(b, domain)
                  : grouped    ? emitGroupCount(b, domain)
                               : emitRowCount(b, domain);
    Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, row, count);
    auto guard = scf::IfOp::create(b, loc, inRange, /*withElseRegion=*/false);
    b.setInsertionPointToStart(guard.thenBlock());
    Value lane = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    if (warpPerPoint)
      emitWarpPoint(b, domain, row, lane, schedule.getThreads(), 16);
    else if (pointRows)
      emitWarpPointRow(b, domain, row, lane, 16);
    else if (grouped)
      emitGroupRow(b, domain, row, lane, warp, schedule.getRowsPerBlock(), 16);
    else {
      emitRow(b, domain, row, lane, schedule.getThreads(), 16, /*reductionWidth=*/schedule.getVector(),
              RowTarget{/*onGpu=*/true});
    }
    domain.op()->erase();
  }
};
} // namespace
} // namespace moec::moe
