//===- CompressLists.cpp - CPU with AVX-512: a list's entries tested a vector at a time ---===//
//
// Marks each moe.compact whose predicate vectorizes along its index (compactVectorizes) with
// moe.compress_lanes = N: the loop lowering then tests N entries a step and stores their live indices
// with one compress (BodyEmitter::emitVectorCompact). See MoePasses.td.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#define DEBUG_TYPE "moe-compress-lists"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOECOMPRESSLISTS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {
struct CompressListsPass : impl::MoeCompressListsBase<CompressListsPass> {
  using MoeCompressListsBase::MoeCompressListsBase;

  void runOnOperation() override {
    if (!isCompressLanes(lanes)) {
      getOperation().emitError("moe-compress-lists: lanes must be a power of two from 2 to 64, not ") << int64_t(lanes);
      return signalPassFailure();
    }
    getOperation().walk([&](CompactOp compact) {
      if (compactVectorizes(compact))
        compact->setAttr(kCompressLanesAttr, IntegerAttr::get(IntegerType::get(&getContext(), 64), lanes));
    });
  }
};
} // namespace
} // namespace moec::moe
