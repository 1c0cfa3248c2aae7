//===- AscendTarget.cpp - #moe.ascend_plan attributes to KernelTilings ----===//
#include "moec/compiler/Dialect/MoeDialect.h"
#include "Targets/CodeGen.h"
#include "moec/compiler/Transforms/BodyLowering.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <stdexcept>

using namespace mlir;

namespace moec {
namespace {

/// The dialect's role as the contract's: two enums because the contracts depend on no MLIR.
ascend::UbRole contractRole(moe::UbRole role) {
  switch (role) {
  case moe::UbRole::Input:
    return ascend::UbRole::Input;
  case moe::UbRole::Output:
    return ascend::UbRole::Output;
  case moe::UbRole::RowStore:
    return ascend::UbRole::RowStore;
  case moe::UbRole::Accumulator:
    return ascend::UbRole::Accumulator;
  case moe::UbRole::Index:
    return ascend::UbRole::Index;
  case moe::UbRole::Cast:
    return ascend::UbRole::Cast;
  }
  throw std::logic_error("unknown #moe.ub_buffer role");
}

} // namespace

std::vector<ascend::KernelTiling> ascendTilings(Operation *module, const std::vector<std::string> &kernels) {
  std::vector<ascend::KernelTiling> tilings;
  for (const std::string &name : kernels) {
    auto func = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(module, StringAttr::get(module->getContext(), name));
    SmallVector<moe::DomainOp> domains = func ? moe::collectDomainOps(func) : SmallVector<moe::DomainOp>{};
    auto plan = domains.empty() ? moe::AscendPlanAttr()
                                : domains.front().op()->getAttrOfType<moe::AscendPlanAttr>("ascend_plan");
    if (!plan)
      throw std::logic_error("kernel " + name + " has no #moe.ascend_plan; run moe-plan-ascend");
    ascend::KernelTiling t;
    t.kernel = name;
    t.rowLength = plan.getRowLength();
    t.chunk = plan.getChunk();
    t.chunks = plan.getChunks();
    t.bufferCount = plan.getBufferCount();
    t.maxRowsPerPass = plan.getMaxRowsPerPass();
    t.pointRows = plan.getPointRows();
    t.guardedRows = plan.getGuardedRows();
    t.rowCopiesPerChunk = plan.getRowCopiesPerChunk();
    t.passCopiesPerChunk = plan.getPassCopiesPerChunk();
    t.passCopies = plan.getPassCopies();
    t.rowScalars = plan.getRowScalars();
    t.rowBytes = plan.getRowBytes();
    for (auto buffer : plan.getBuffers().getAsRange<moe::UbBufferAttr>())
      t.buffers.push_back({contractRole(buffer.getRole()), buffer.getTensor().str(), buffer.getElementBytes(),
                           buffer.getCopies(), buffer.getPerRowOfPass(), buffer.getFixedBytesPerRow(),
                           buffer.getReuseDims(), buffer.getCopiesPerChunk(), buffer.getWholeRow()});
    tilings.push_back(std::move(t));
  }
  return tilings;
}

} // namespace moec
