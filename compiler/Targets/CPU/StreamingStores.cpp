//===- StreamingStores.cpp - CPU: non-temporal stores of large, aligned outputs ---===//
//
// Each vector.store that moe-lower-to-loops marked moe.streamable (an output's, written once) branches on
// "the output's base pointer is aligned for it and the output is large", computed once per output and
// alignment where the output is defined: non-temporal where it holds, as it was elsewhere. See
// LoopPasses.td for why.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#define DEBUG_TYPE "moe-streaming-stores"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOESTREAMINGSTORES
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// Outputs from this size on are written with streaming stores (a typical last-level cache slice).
constexpr int64_t kStreamingStoreBytes = 4 << 20;

/// An i1, true when `output`'s base pointer is aligned to `alignment` bytes and the output holds at least
/// kStreamingStoreBytes; computed right after `output` is defined, so it dominates every store to it.
Value emitStreamingCondition(Value output, int64_t alignment) {
  OpBuilder b(output.getContext());
  if (Operation *def = output.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(cast<BlockArgument>(output).getOwner());
  Location loc = output.getLoc();
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, output);
  Value misalignment = arith::RemUIOp::create(b, loc, base, cst(alignment));
  Value aligned = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, misalignment, cst(0));
  auto type = cast<MemRefType>(output.getType());
  int64_t staticElements = 1;
  Value elements;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (!type.isDynamicDim(d)) {
      staticElements *= type.getDimSize(d);
      continue;
    }
    Value dim = memref::DimOp::create(b, loc, output, d);
    elements = elements ? Value(arith::MulIOp::create(b, loc, elements, dim)) : dim;
  }
  elements = elements ? Value(arith::MulIOp::create(b, loc, elements, cst(staticElements))) : cst(staticElements);
  int64_t elementBytes = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  Value large = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, elements, cst(kStreamingStoreBytes / elementBytes));
  return arith::AndIOp::create(b, loc, aligned, large);
}

struct StreamingStoresPass : impl::MoeStreamingStoresBase<StreamingStoresPass> {
  void runOnOperation() override {
    SmallVector<vector::StoreOp> marked;
    getOperation().walk([&](vector::StoreOp store) {
      if (store->hasAttr(kStreamableAttr))
        marked.push_back(store);
    });
    llvm::DenseMap<std::pair<Value, int64_t>, Value> conditions; // (output, alignment) -> its i1
    for (vector::StoreOp store : marked) {
      int64_t alignment = store->getAttrOfType<IntegerAttr>(kStreamableAttr).getInt();
      store->removeAttr(kStreamableAttr);
      Value &stream = conditions[{store.getBase(), alignment}];
      if (!stream)
        stream = emitStreamingCondition(store.getBase(), alignment);
      OpBuilder b(store);
      auto branch = scf::IfOp::create(b, store.getLoc(), stream, /*withElseRegion=*/true);
      b.setInsertionPointToStart(branch.thenBlock());
      auto streaming = cast<vector::StoreOp>(b.clone(*store));
      streaming.setAlignmentAttr(b.getI64IntegerAttr(std::max<int64_t>(alignment, store.getAlignment().value_or(1))));
      streaming.setNontemporal(true);
      store->moveBefore(branch.elseBlock()->getTerminator());
    }
  }
};

} // namespace
} // namespace moec::moe
