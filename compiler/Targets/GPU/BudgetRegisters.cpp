//===- BudgetRegisters.cpp - GPU: at most N registers a thread per kernel ---===//
//
// The opt-in `register-budget`: every kernel gets `nvvm.maxnreg`, which NVPTX writes as `.maxnreg`. ptxas
// otherwise takes as many registers as the block size allows (255 for 8 warps), and an SM of 64K registers
// then holds one such block: too few loads in flight to cover the memory's latency. The budget bounds what
// ptxas may take; what the lowering keeps live must fit in it (moe-group-points' smaller batches under the
// same bit), else ptxas spills.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEBUDGETREGISTERS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {
struct BudgetRegistersPass : impl::MoeBudgetRegistersBase<BudgetRegistersPass> {
  using MoeBudgetRegistersBase::MoeBudgetRegistersBase;
  void runOnOperation() override {
    if (registers < 16 || registers > 255) {
      getOperation().emitError("moe-budget-registers: registers must be from 16 to 255, got ") << int64_t(registers);
      return signalPassFailure();
    }
    auto budget = IntegerAttr::get(IntegerType::get(&getContext(), 32), registers);
    getOperation().walk([&](gpu::GPUFuncOp kernel) {
      if (kernel.isKernel())
        kernel->setAttr(NVVM::NVVMDialect::getMaxnregAttrName(), budget);
    });
  }
};
} // namespace
} // namespace moec::moe
