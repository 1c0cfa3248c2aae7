//===- MoeDialect.cpp - moe dialect: registration, verifiers, folds -------===//
#include "moec/compiler/Dialect/MoeDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace moec::moe;

#include "moec/compiler/Dialect/MoeDialect.cpp.inc"
#include "moec/compiler/Dialect/MoeEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "moec/compiler/Dialect/MoeAttrs.cpp.inc"

#define GET_OP_CLASSES
#include "moec/compiler/Dialect/MoeOps.cpp.inc"

void MoeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "moec/compiler/Dialect/MoeOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "moec/compiler/Dialect/MoeAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// ViewOp
//===----------------------------------------------------------------------===//

LogicalResult ViewOp::verify() {
  if (!isa<LLVM::LLVMPointerType>(getPtr().getType()))
    return emitOpError("expects a bare !llvm.ptr, got ") << getPtr().getType();
  auto type = getType();
  if (type.getRank() != static_cast<int64_t>(getSizes().size()))
    return emitOpError("has ") << getSizes().size() << " sizes for a rank-" << type.getRank() << " view";
  if (!type.getLayout().isIdentity())
    return emitOpError("views are row-major: the result must have the identity layout");
  for (auto [pos, size] : llvm::enumerate(getSizes())) {
    APInt value;
    if (!type.isDynamicDim(pos) && matchPattern(size, m_ConstantInt(&value)) &&
        value.getSExtValue() != type.getDimSize(pos))
      return emitOpError("dim ") << pos << " is " << type.getDimSize(pos) << " in the type but the size is "
                                 << value.getSExtValue();
  }
  return success();
}

namespace {
/// A constant size operand becomes a static dim of the view's type, so indexing it needs no runtime
/// stride. Users that accept any memref of the element type (loads, stores, computes) take the refined
/// view directly; any other user gets a memref.cast back to the old type.
struct RefineViewShape : OpRewritePattern<ViewOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ViewOp op, PatternRewriter &rewriter) const override {
    MemRefType type = op.getType();
    SmallVector<int64_t> shape(type.getShape());
    bool changed = false;
    for (auto [pos, size] : llvm::enumerate(op.getSizes())) {
      APInt value;
      if (type.isDynamicDim(pos) && matchPattern(size, m_ConstantInt(&value))) {
        shape[pos] = value.getSExtValue();
        changed = true;
      }
    }
    if (!changed)
      return failure();
    auto refinedType = MemRefType::get(shape, type.getElementType());
    auto refined = ViewOp::create(rewriter, op.getLoc(), refinedType, op.getPtr(), op.getSizes());
    Value cast;
    for (OpOperand &use : llvm::make_early_inc_range(op.getResult().getUses())) {
      Operation *user = use.getOwner();
      if (isa<memref::LoadOp, memref::StoreOp, ComputeOp, ScatterOp>(user)) {
        rewriter.modifyOpInPlace(user, [&] { use.set(refined); });
        continue;
      }
      if (!cast)
        cast = memref::CastOp::create(rewriter, op.getLoc(), type, refined);
      rewriter.modifyOpInPlace(user, [&] { use.set(cast); });
    }
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void ViewOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<RefineViewShape>(context);
}

//===----------------------------------------------------------------------===//
// ComputeOp, SumOp
//===----------------------------------------------------------------------===//

/// The body must take `numIndices` index arguments and yield a `yieldType` value.
static LogicalResult verifyBody(Operation *op, Region &body, size_t numIndices, Type yieldType) {
  Block &block = body.front();
  if (block.getNumArguments() != numIndices)
    return op->emitOpError("body takes ") << block.getNumArguments() << " indices, expected " << numIndices;
  for (BlockArgument arg : block.getArguments())
    if (!arg.getType().isIndex())
      return op->emitOpError("body arguments must be index, got ") << arg.getType();
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return op->emitOpError("body must end with moe.yield");
  if (yield.getValue().getType() != yieldType)
    return op->emitOpError("body yields ") << yield.getValue().getType() << ", expected " << yieldType;
  return success();
}

LogicalResult ComputeOp::verify() {
  auto type = cast<MemRefType>(getOutput().getType());
  if (type.getRank() != static_cast<int64_t>(getBounds().size()))
    return emitOpError("has ") << getBounds().size() << " bounds for a rank-" << type.getRank() << " output";
  return verifyBody(*this, getBody(), getBounds().size(), type.getElementType());
}

LogicalResult SumOp::verify() { return verifyBody(*this, getBody(), 1, Float32Type::get(getContext())); }

LogicalResult FoldOp::verify() {
  Type type = getResult().getType();
  if (getInit().getType() != type)
    return emitOpError("init is ") << getInit().getType() << " but the result is " << type;
  Block &block = getBody().front();
  if (block.getNumArguments() != 2 || !block.getArgument(0).getType().isIndex() ||
      block.getArgument(1).getType() != type)
    return emitOpError("body takes (index, ") << type << ")";
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield || yield.getValue().getType() != type)
    return emitOpError("body must yield a ") << type;
  return success();
}

LogicalResult CompactOp::verify() {
  APInt bound;
  auto type = cast<MemRefType>(getList().getType());
  if (!matchPattern(getBound(), m_ConstantInt(&bound)))
    return emitOpError("needs a constant bound");
  if (!type.hasStaticShape() || type.getDimSize(0) != bound.getSExtValue())
    return emitOpError("list must be memref<") << bound.getSExtValue() << "xi32>, got " << type;
  Block &block = getPredicate().front();
  if (block.getNumArguments() != 1 || !block.getArgument(0).getType().isIndex())
    return emitOpError("predicate takes (index)");
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield || !yield.getValue().getType().isInteger(1))
    return emitOpError("predicate must yield an i1");
  return success();
}

LogicalResult ScatterOp::verify() {
  auto type = cast<MemRefType>(getOutput().getType());
  Block &block = getBody().front();
  if (block.getNumArguments() != getBounds().size())
    return emitOpError("body takes ") << block.getNumArguments() << " indices for " << getBounds().size()
                                      << " bounds";
  auto write = dyn_cast<WriteOp>(block.getTerminator());
  if (!write)
    return emitOpError("body must end with moe.write");
  if (static_cast<int64_t>(write.getIndices().size()) != type.getRank())
    return emitOpError("writes ") << write.getIndices().size() << " indices into a rank-" << type.getRank()
                                  << " output";
  if (write.getValue().getType() != type.getElementType())
    return emitOpError("writes ") << write.getValue().getType() << " into " << type;
  return success();
}

LogicalResult RowStoreOp::verify() {
  auto type = cast<MemRefType>(getOutput().getType());
  if (type.getRank() != int64_t(getIndices().size()))
    return emitOpError("needs ") << type.getRank() << " indices for " << type << ", got " << getIndices().size();
  if (getValue().getType() != type.getElementType())
    return emitOpError("stores ") << getValue().getType() << " into " << type;
  if (getIndices().empty() || getIndices().back() != getParentOp().getBody().front().getArgument(0))
    return emitOpError("must store along its moe.sum's index (its last index)");
  return success();
}

LogicalResult RowStoreOp::fold(FoldAdaptor, SmallVectorImpl<OpFoldResult> &) {
  return memref::foldMemRefCast(*this, getValue());
}

/// What is wrong with a guarded access of `value` (its type) to `memref` at `indices`, doing `verb`: the
/// index count, the element type, or the size (a 1-D vector of 4, 8 or 16 bytes, or a scalar of 2 or 4).
static LogicalResult verifyGuardedAccess(Operation *op, Type value, Value memref, ValueRange indices, StringRef verb) {
  auto type = cast<MemRefType>(memref.getType());
  if (type.getRank() != int64_t(indices.size()))
    return op->emitOpError("needs ") << type.getRank() << " indices for " << type << ", got " << indices.size();
  Type element = value;
  int64_t count = 1;
  auto vector = dyn_cast<VectorType>(element);
  if (vector) {
    if (vector.getRank() != 1)
      return op->emitOpError(verb) << " a scalar or a 1-D vector, got " << vector;
    element = vector.getElementType();
    count = vector.getNumElements();
  }
  if (element != type.getElementType())
    return op->emitOpError(verb) << " " << value << (verb == "loads" ? " from " : " to ") << type;
  if (!guardedAccessBytes(value))
    return op->emitOpError(verb) << " 4, 8 or 16 bytes (a scalar: 2 or 4), got "
                                 << count * int64_t(element.getIntOrFloatBitWidth()) / 8;
  return success();
}

int64_t moec::moe::guardedAccessBytes(Type accessed) {
  auto vector = dyn_cast<VectorType>(accessed);
  Type element = vector ? vector.getElementType() : accessed;
  if ((vector && vector.getRank() != 1) || !element.isIntOrFloat())
    return 0;
  int64_t bytes = (vector ? vector.getNumElements() : 1) * int64_t(element.getIntOrFloatBitWidth()) / 8;
  return bytes == 4 || bytes == 8 || bytes == 16 || (bytes == 2 && !vector) ? bytes : 0;
}

LogicalResult GuardedLoadOp::verify() {
  return verifyGuardedAccess(*this, getType(), getMemref(), getIndices(), "loads");
}

LogicalResult GuardedStoreOp::verify() {
  return verifyGuardedAccess(*this, getValue().getType(), getMemref(), getIndices(), "stores");
}

//===----------------------------------------------------------------------===//
// Ascend ops
//===----------------------------------------------------------------------===//

static bool inUb(Type type) { return isa_and_nonnull<UbSpaceAttr>(cast<MemRefType>(type).getMemorySpace()); }

LogicalResult UbAllocOp::verify() {
  if (!inUb(getType()))
    return emitOpError("places a buffer in the UB: the result must be in #moe.ub, got ") << getType();
  if (getOffset() < 0)
    return emitOpError("offset must be >= 0, got ") << getOffset();
  return success();
}

LogicalResult DataCopyOp::verify() {
  auto source = cast<MemRefType>(getSource().getType()), dest = cast<MemRefType>(getDest().getType());
  if (inUb(source) == inUb(dest))
    return emitOpError("copies between global memory and the UB: exactly one side must be in #moe.ub");
  if (source.getElementType() != dest.getElementType())
    return emitOpError("element types differ: ") << source.getElementType() << " and " << dest.getElementType();
  if (source.getRank() != int64_t(getSourceIndices().size()) || dest.getRank() != int64_t(getDestIndices().size()))
    return emitOpError("needs one index per dim of each side");
  return success();
}
