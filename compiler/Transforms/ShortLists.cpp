//===- ShortLists.cpp - A short fold over its live steps only ---===//
//
// A predicated fold of at most the schedule's unroll factor's steps unrolls fully and keeps its branches.
// Where its live steps add terms (C2 at Mixtral's top-2 of 8), this pass compacts it all the same: the CPU
// loop lowering adds a short list's live steps directly in registers (accumulated rows), and the GPU's runs
// the row in a version per power of two of live steps, each step reading its step table. See MoePasses.td.
//===----------------------------------------------------------------------===//
#include "PredicatedFolds.h"

#include "moec/compiler/Transforms/Passes.h"

#define DEBUG_TYPE "moe-short-lists"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOESHORTLISTS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {
struct ShortListsPass : impl::MoeShortListsBase<ShortListsPass> {
  using MoeShortListsBase::MoeShortListsBase;

  void runOnOperation() override {
    if (failed(compactPredicatedFolds(getOperation(), target, FoldLength::Short)))
      signalPassFailure();
  }
};
} // namespace
} // namespace moec::moe
