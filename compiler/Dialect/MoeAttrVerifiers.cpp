//===- MoeAttrVerifiers.cpp - The moe dialect's discardable attributes, checked ---===//
//
// A fact one pass hands to a later one is an attribute declared in MoeDialect.td (discardableAttrs, the
// kernel arguments' #moe.arg): here each is checked for its type and for the ops (or arguments) it may sit
// on, so that a pass that drops, misplaces or misspells one fails verification instead of silently turning
// an optimization off.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Dialect/MoeDialect.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace moec::moe;

namespace {

bool isDomain(Operation *op) { return isa<ComputeOp, ScatterOp>(op); }

/// `attr` (a unit attribute) is on an op `placed` allows; `where` says which, for the error.
LogicalResult unitOn(Operation *op, NamedAttribute attr, bool placed, StringRef where) {
  if (!isa<UnitAttr>(attr.getValue()))
    return op->emitOpError() << "'" << attr.getName().getValue() << "' must be a unit attribute";
  if (!placed)
    return op->emitOpError() << "'" << attr.getName().getValue() << "' belongs on " << where;
  return success();
}

} // namespace

LogicalResult MoeDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto error = [&]() { return op->emitOpError() << "'" << name << "' "; };
  // Markers on any op of a domain body (the lowering's clones keep them).
  if (name == RowInvariantAttrHelper::getNameStr() || name == GroupKeyAttrHelper::getNameStr())
    return unitOn(op, attr, true, "");
  if (name == RowGuardAttrHelper::getNameStr()) {
    auto write = dyn_cast<WriteOp>(op);
    return unitOn(op, attr, write && write.getGuard(), "a moe.write with a guard");
  }
  if (name == LiveListAttrHelper::getNameStr())
    return unitOn(op, attr, isa<CompactOp>(op), "a moe.compact");
  if (name == AccumulatedRowAttrHelper::getNameStr())
    return unitOn(op, attr, isa<FoldOp, SumOp>(op), "a moe.fold or moe.sum");
  if (name == LiveRankAttrHelper::getNameStr() || name == LaneScanAttrHelper::getNameStr())
    return unitOn(op, attr, isa<FoldOp>(op), "a moe.fold");
  if (name == StepTableAttrHelper::getNameStr())
    return unitOn(op, attr, isa<FoldOp>(op) && isDomain(op->getParentOp()), "a moe.fold of a domain's body");
  if (name == RowGroupAttrHelper::getNameStr())
    return unitOn(op, attr, isDomain(op), "a moe.compute or moe.scatter");
  if (name == PointRowsAttrHelper::getNameStr()) {
    auto batch = dyn_cast<IntegerAttr>(value);
    if (!isDomain(op))
      return error() << "belongs on a moe.compute or moe.scatter";
    if (!batch || batch.getInt() < 2 || batch.getInt() > 32 || !llvm::isPowerOf2_64(batch.getInt()))
      return error() << "must be the points run together, a power of two from 2 to 32";
    return success();
  }
  if (name == CompressLanesAttrHelper::getNameStr()) {
    auto lanes = dyn_cast<IntegerAttr>(value);
    if (!isa<CompactOp>(op))
      return error() << "belongs on a moe.compact";
    if (!lanes || !isCompressLanes(lanes.getInt()))
      return error() << "must be the entries tested at a time, a power of two from 2 to 64";
    return success();
  }
  if (name == InterleavedPointsAttrHelper::getNameStr()) {
    auto points = dyn_cast<IntegerAttr>(value);
    if (!isDomain(op))
      return error() << "belongs on a moe.compute or moe.scatter";
    if (!points || !isInterleavedPoints(points.getInt()))
      return error() << "must be the points whose dot products run together, 2 to 8";
    return success();
  }
  if (name == LaneLoopAttrHelper::getNameStr())
    return unitOn(op, attr, isa<scf::ForOp>(op), "an scf.for");
  if (name == LaneSumAttrHelper::getNameStr())
    return unitOn(op, attr, isa<scf::ForOp>(op) && op->getNumResults() > 0, "an scf.for that yields partial sums");
  if (name == NanUncheckedAttrHelper::getNameStr() || name == ExactRoundingAttrHelper::getNameStr())
    return unitOn(op, attr, isa<arith::TruncFOp>(op), "an arith.truncf");
  if (name == ExactCheckVoteAttrHelper::getNameStr())
    return unitOn(op, attr, isa<NVVM::VoteSyncOp>(op), "an nvvm.vote.sync");
  if (name == StreamableAttrHelper::getNameStr()) {
    auto alignment = dyn_cast<IntegerAttr>(value);
    if (!isa<vector::StoreOp>(op))
      return error() << "belongs on a vector.store";
    if (!alignment || alignment.getValue().getSExtValue() < 16 || !llvm::isPowerOf2_64(alignment.getInt()))
      return error() << "must be a power of two of at least 16 (bytes)";
    return success();
  }
  if (name == DeadValueAttrHelper::getNameStr()) {
    if (!isDomain(op))
      return error() << "belongs on a moe.compute or moe.scatter";
    auto typed = dyn_cast<TypedAttr>(value);
    Type element = getElementTypeOrSelf(op->getOperand(0).getType());
    if (!typed || typed.getType() != element)
      return error() << "must be a constant of the output's element type " << element;
    return success();
  }
  if (name == RowsPerBlockAttrHelper::getNameStr()) {
    auto rows = dyn_cast<IntegerAttr>(value);
    if (!isa<FunctionOpInterface>(op))
      return error() << "belongs on a kernel";
    if (!rows || rows.getValue().getSExtValue() < 1)
      return error() << "must be a positive integer";
    return success();
  }
  if (name == OpAttrHelper::getNameStr() || name == DtypeAttrHelper::getNameStr()) {
    auto text = dyn_cast<StringAttr>(value);
    if (!isa<ModuleOp>(op))
      return error() << "belongs on the module";
    if (!text || text.getValue().empty())
      return error() << "must be a non-empty string";
    return success();
  }
  if (name == WorkspaceAttrHelper::getNameStr()) {
    auto outputs = dyn_cast<ArrayAttr>(value);
    if (!isa<ModuleOp>(op))
      return error() << "belongs on the module";
    if (!outputs || outputs.empty() || llvm::any_of(outputs, [](Attribute a) {
          auto output = dyn_cast<StringAttr>(a);
          return !output || output.getValue().empty();
        }))
      return error() << "must be a non-empty list of output names";
    return success();
  }
  return error() << "is not an attribute of the moe dialect";
}

LogicalResult MoeDialect::verifyRegionArgAttribute(Operation *op, unsigned region, unsigned argIndex,
                                                   NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function || region != 0)
    return op->emitOpError() << "'" << name << "' belongs on a kernel's argument";
  Type type = function.getArgumentTypes()[argIndex];
  auto error = [&]() { return op->emitOpError() << "argument " << argIndex << ": '" << name << "' "; };
  if (name == kArgRoleAttrName) {
    auto arg = dyn_cast<ArgAttr>(attr.getValue());
    if (!arg)
      return error() << "must be a #moe.arg";
    bool named = arg.getRole() == ArgRole::Tensor || arg.getRole() == ArgRole::Dim || arg.getRole() == ArgRole::Attr;
    if (named == arg.getName().empty())
      return error() << (named ? "needs the name of its " : "takes no name for its ")
                     << stringifyArgRole(arg.getRole());
    // A pointer may also be a memref already: loop-level IR written by hand takes its views as arguments.
    bool pointer = isa<LLVM::LLVMPointerType, MemRefType>(type);
    if (arg.isPointer() != pointer || (!arg.isPointer() && !type.isIntOrIndex()))
      return error() << "a " << stringifyArgRole(arg.getRole()) << " is "
                     << (arg.isPointer() ? "an !llvm.ptr (or a memref)" : "an index") << ", not " << type;
    return success();
  }
  if (name == kUniqueArgAttrName) {
    ArgAttr role = argRole(function, argIndex);
    if (!isa<UnitAttr>(attr.getValue()) || !role || role.getRole() != ArgRole::Tensor)
      return error() << "is a unit attribute on a tensor argument";
    return success();
  }
  return error() << "is not an argument attribute of the moe dialect";
}

DictionaryAttr moec::moe::argRoleDictionary(MLIRContext *ctx, ArgRole role, StringRef name) {
  auto attr = NamedAttribute(StringAttr::get(ctx, kArgRoleAttrName), ArgAttr::get(ctx, role, name));
  return DictionaryAttr::get(ctx, {attr});
}
