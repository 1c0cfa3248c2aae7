//===- GuardLoads.cpp - GPU: a loop's skippable loads without their branches ===//
//
// A loop along a row whose terms may be skipped (B2's rows past active_num, C2's experts a token is not routed
// to) has each term's gather behind a branch: `scf.if %live -> { load; extf } else { zero }`. A GPU thread waits
// for each such load before it branches to the next term, so the row's gathers do not overlap (moe-version-row-
// loops removes the branches for rows whose terms are all live; a row with a skipped term keeps them). This pass
// makes such a branch straight-line code: the load becomes a moe.guarded_load, a predicated load that gives
// zero where the guard is off, and the branch's ops run on it unconditionally; where they turn a zero load into
// the other side's value (extf of zero is zero) that is the result, else a select between the two picks it.
// It applies to a branch inside an innermost loop with one result, one side of which holds one vector load of a
// tensor the kernel only reads (4, 8 or 16 bytes) and otherwise pure ops without regions, and the other side
// yields a value defined outside the branch (the accumulator passed on, or zero). Index and flag loads (scalars)
// stay behind their branches: there a branch costs less than the predicated load's setup. A term that is skipped adds
// the same value as before: results do not change.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Dialect/MoeDialect.h"
#include "moec/compiler/Transforms/ErrorPaths.h"
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define DEBUG_TYPE "moe-guard-loads"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEGUARDLOADS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// A branch to rewrite: the side whose ops compute the term (`loading`), and its load.
struct Guardable {
  scf::IfOp branch;
  Block *loading;
  Operation *load;
  bool onThen; // the term is on the branch's then-side (its guard is the condition, else its negation)

  /// The other side's value (read when needed: it may be an earlier rewritten branch's result, replaced since).
  Value other() { return (onThen ? branch.elseBlock() : branch.thenBlock())->getTerminator()->getOperand(0); }
};

/// The load of block `loading` that the rewrite guards, when the block holds one vector load (4, 8 or 16 bytes:
/// a row's data, not an index or a flag, whose branch costs less than the predicated load's setup) of a tensor
/// the kernel only reads and otherwise pure, speculatable ops without regions (they run for skipped terms too).
Operation *guardableLoad(Block &loading) {
  Operation *found = nullptr;
  for (Operation &op : loading.without_terminator()) {
    if (op.getNumRegions() > 0)
      return nullptr;
    if (auto load = dyn_cast<vector::LoadOp>(op)) {
      VectorType vector = load.getVectorType();
      int64_t bytes = vector.getNumElements() * int64_t(vector.getElementType().getIntOrFloatBitWidth()) / 8;
      if (found || !viewsReadOnlyTensor(load.getBase()) || vector.getRank() != 1 ||
          (bytes != 4 && bytes != 8 && bytes != 16) || load.getMemRefType().getElementType() != vector.getElementType())
        return nullptr;
      found = &op;
      continue;
    }
    if (!isMemoryEffectFree(&op) || !isSpeculatable(&op))
      return nullptr;
  }
  return found;
}

/// `branch` as a rewrite, when one side computes the term with one guardable load and the other only yields a
/// value from outside the branch (a skipped term: zero, or the accumulator passed on).
std::optional<Guardable> guardable(scf::IfOp branch) {
  if (branch.getNumResults() != 1 || branch.getElseRegion().empty())
    return std::nullopt;
  for (bool onThen : {true, false}) {
    Block *loading = onThen ? branch.thenBlock() : branch.elseBlock();
    Block *skipping = onThen ? branch.elseBlock() : branch.thenBlock();
    Value other = skipping->getTerminator()->getOperand(0);
    if (!llvm::hasSingleElement(*skipping) || branch->isAncestor(other.getParentRegion()->getParentOp()))
      continue;
    if (Operation *load = guardableLoad(*loading))
      return Guardable{branch, loading, load, onThen};
  }
  return std::nullopt;
}

/// Whether the term's ops, with the load giving zero, fold to `other` (a constant): then no select.
bool zeroLoadGives(Guardable g) {
  Attribute expected;
  if (!matchPattern(g.other(), m_Constant(&expected)))
    return false;
  DenseMap<Value, Attribute> known;
  auto loaded = cast<VectorType>(g.load->getResult(0).getType());
  known[g.load->getResult(0)] =
      DenseElementsAttr::get(loaded, Builder(g.branch.getContext()).getZeroAttr(loaded.getElementType()));
  for (Operation &op : g.loading->without_terminator()) {
    if (&op == g.load)
      continue;
    SmallVector<Attribute> operands;
    for (Value v : op.getOperands()) {
      Attribute a = known.lookup(v);
      if (!a && !matchPattern(v, m_Constant(&a)))
        return false;
      operands.push_back(a);
    }
    SmallVector<OpFoldResult> results;
    if (failed(op.fold(operands, results)) || results.size() != op.getNumResults())
      return false;
    for (auto [result, folded] : llvm::zip(op.getResults(), results)) {
      auto attr = dyn_cast<Attribute>(folded);
      if (!attr)
        return false;
      known[result] = attr;
    }
  }
  return known.lookup(g.loading->getTerminator()->getOperand(0)) == expected;
}

void guard(Guardable g) {
  OpBuilder b(g.branch);
  Location loc = g.branch.getLoc();
  Value live = g.branch.getCondition();
  if (!g.onThen)
    live = arith::XOrIOp::create(b, loc, live, arith::ConstantIntOp::create(b, loc, 1, 1));
  bool noSelect = zeroLoadGives(g);
  IRMapping mapping;
  for (Operation &op : g.loading->without_terminator()) {
    if (&op != g.load) {
      b.clone(op, mapping);
      continue;
    }
    auto load = cast<vector::LoadOp>(op);
    SmallVector<Value> mapped;
    for (Value index : load.getIndices())
      mapped.push_back(mapping.lookupOrDefault(index));
    auto guarded = GuardedLoadOp::create(b, loc, load.getVectorType(), load.getBase(), mapped, live, /*readonly=*/true);
    mapping.map(op.getResult(0), guarded.getResult());
  }
  Value term = mapping.lookupOrDefault(g.loading->getTerminator()->getOperand(0));
  Value result = noSelect ? term : arith::SelectOp::create(b, loc, live, term, g.other()).getResult();
  g.branch.getResult(0).replaceAllUsesWith(result);
  g.branch.erase();
}

struct GuardLoadsPass : impl::MoeGuardLoadsBase<GuardLoadsPass> {
  void runOnOperation() override {
    SmallVector<Guardable> branches;
    getOperation()->walk([&](scf::ForOp loop) {
      bool nested = false;
      loop.getBody()->walk([&](LoopLikeOpInterface) { nested = true; });
      if (nested)
        return;
      loop.getBody()->walk([&](scf::IfOp branch) {
        if (std::optional<Guardable> g = guardable(branch))
          branches.push_back(*g);
      });
    });
    for (Guardable g : branches)
      guard(g);
  }
};
} // namespace
} // namespace moec::moe
