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
// yields a value defined outside the branch (the accumulator passed on, or zero). That side may also load scalars
// the kernel only reads (2 or 4 bytes: a point's prob) and store vectors, directly or in a branch that only
// stores: A3's probs kernels run a batch of up to 8 dot products, each point's terms and the write of its row
// behind its `active` flag. Its loads and stores become guarded ones (moe.guarded_store: a predicated store),
// so the batch's loads issue back to back. A branch in such a loop that only stores (the batch's first point
// writing its row where it has one) becomes guarded stores too: a load after it need not wait for the stored
// value. Index and flag loads on their own (scalars) stay behind their branches: there a branch costs less
// than the predicated load's setup. A term that is skipped adds the same value as before, and writes nothing:
// results do not change.
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

/// A branch to rewrite: the side whose ops compute the term (`loading`), and the loads it guards.
struct Guardable {
  scf::IfOp branch;
  Block *loading;
  SmallVector<Operation *> loads;
  bool onThen; // the term is on the branch's then-side (its guard is the condition, else its negation)

  /// The other side's value (read when needed: it may be an earlier rewritten branch's result, replaced since).
  Value other() { return (onThen ? branch.elseBlock() : branch.thenBlock())->getTerminator()->getOperand(0); }
};

/// The bytes of a guarded access of `accessed` to `memref`, when moe.guarded_load/store can make it: a 1-D
/// vector of 4, 8 or 16 bytes or a scalar of 2 or 4, of the memref's element type; else 0. A vector access
/// must promise its own size as `alignment`: the guarded ops move it as one access (`ld.global.v2` of a row
/// that starts 4 bytes into an 8-byte word would fault), where a plain one is split when it is less aligned.
int64_t guardableBytes(Type accessed, Value memref, std::optional<uint64_t> alignment) {
  auto vector = dyn_cast<VectorType>(accessed);
  if ((vector ? vector.getElementType() : accessed) != cast<MemRefType>(memref.getType()).getElementType())
    return 0;
  int64_t bytes = guardedAccessBytes(accessed);
  if (vector && alignment.value_or(0) < uint64_t(bytes))
    return 0;
  return bytes;
}

/// Whether `op` may run for a skipped term: pure and speculatable, without regions.
bool runsAnyway(Operation &op) { return op.getNumRegions() == 0 && isMemoryEffectFree(&op) && isSpeculatable(&op); }

bool guardableStore(Operation &op) {
  auto store = dyn_cast<vector::StoreOp>(op);
  return store && guardableBytes(store.getVectorType(), store.getBase(), store.getAlignment()) != 0;
}

/// A branch inside the term that only writes: `scf.if %c { ops; vector.store }` (a batch's point writes its
/// row where it has one). Its stores become guarded by both conditions.
bool guardableStoreBranch(Operation &op) {
  auto branch = dyn_cast<scf::IfOp>(op);
  if (!branch || branch.getNumResults() != 0 || !branch.getElseRegion().empty())
    return false;
  return llvm::all_of(branch.thenBlock()->without_terminator(),
                      [](Operation &inner) { return guardableStore(inner) || runsAnyway(inner); });
}

/// The loads of block `loading` that the rewrite guards, when the block holds one vector load (4, 8 or 16
/// bytes: a row's data, not an index or a flag, whose branch costs less than the predicated load's setup), any
/// scalar loads (2 or 4 bytes: the point's prob), all of tensors the kernel only reads, vector stores, branches
/// that only store, and otherwise pure, speculatable ops without regions (they run for skipped terms too).
SmallVector<Operation *> guardableLoads(Block &loading) {
  SmallVector<Operation *> loads;
  int vectorLoads = 0;
  for (Operation &op : loading.without_terminator()) {
    if (auto load = dyn_cast<vector::LoadOp>(op)) {
      if (!viewsReadOnlyTensor(load.getBase()) ||
          guardableBytes(load.getVectorType(), load.getBase(), load.getAlignment()) < 4)
        return {};
      ++vectorLoads;
      loads.push_back(&op);
    } else if (auto load = dyn_cast<memref::LoadOp>(op)) {
      if (!viewsReadOnlyTensor(load.getMemRef()) || !guardableBytes(load.getType(), load.getMemRef(), std::nullopt))
        return {};
      loads.push_back(&op);
    } else if (!guardableStore(op) && !guardableStoreBranch(op) && !runsAnyway(op)) {
      return {};
    }
  }
  return vectorLoads == 1 ? loads : SmallVector<Operation *>();
}

/// `branch` as a rewrite, when one side computes the term with one guardable vector load and the other only
/// yields a value from outside the branch (a skipped term: zero, or the accumulator passed on).
std::optional<Guardable> guardable(scf::IfOp branch) {
  if (branch.getNumResults() != 1 || branch.getElseRegion().empty())
    return std::nullopt;
  for (bool onThen : {true, false}) {
    Block *loading = onThen ? branch.thenBlock() : branch.elseBlock();
    Block *skipping = onThen ? branch.elseBlock() : branch.thenBlock();
    Value other = skipping->getTerminator()->getOperand(0);
    if (!llvm::hasSingleElement(*skipping) || branch->isAncestor(other.getParentRegion()->getParentOp()))
      continue;
    if (SmallVector<Operation *> loads = guardableLoads(*loading); !loads.empty())
      return Guardable{branch, loading, loads, onThen};
  }
  return std::nullopt;
}

/// Whether the term's ops, with the loads giving zero, fold to `other` (a constant): then no select.
bool zeroLoadGives(Guardable g) {
  Attribute expected;
  if (!matchPattern(g.other(), m_Constant(&expected)))
    return false;
  DenseMap<Value, Attribute> known;
  Builder builder(g.branch.getContext());
  for (Operation *load : g.loads) {
    Type type = load->getResult(0).getType();
    auto vector = dyn_cast<VectorType>(type);
    known[load->getResult(0)] =
        vector ? Attribute(DenseElementsAttr::get(vector, builder.getZeroAttr(vector.getElementType())))
               : builder.getZeroAttr(type);
  }
  for (Operation &op : g.loading->without_terminator()) {
    if (llvm::is_contained(g.loads, &op) || op.getNumResults() == 0)
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

/// Whether `v` is never -0.0: a constant without -0.0, a sum with such an operand (round to nearest gives -0.0
/// only for -0.0 + -0.0), or a branch that yields such values on both sides.
bool neverNegativeZero(Value v, int depth = 0) {
  if (depth > 64)
    return false;
  Attribute constant;
  if (matchPattern(v, m_Constant(&constant))) {
    auto noNegativeZero = [](const APFloat &f) { return !(f.isZero() && f.isNegative()); };
    if (auto scalar = dyn_cast<FloatAttr>(constant))
      return noNegativeZero(scalar.getValue());
    auto elements = dyn_cast<DenseFPElementsAttr>(constant);
    return elements && llvm::all_of(elements.getValues<APFloat>(), noNegativeZero);
  }
  if (auto add = v.getDefiningOp<arith::AddFOp>())
    return add.getFastmath() == arith::FastMathFlags::none &&
           (neverNegativeZero(add.getLhs(), depth + 1) || neverNegativeZero(add.getRhs(), depth + 1));
  if (auto branch = v.getDefiningOp<scf::IfOp>(); branch && !branch.getElseRegion().empty()) {
    unsigned index = cast<OpResult>(v).getResultNumber();
    return neverNegativeZero(branch.thenYield().getOperand(index), depth + 1) &&
           neverNegativeZero(branch.elseYield().getOperand(index), depth + 1);
  }
  return false;
}

/// Clones `op` at `b` with the guard `live`: a load or store becomes a guarded one, a branch that only stores
/// has its ops cloned and its stores guarded by `live` and its condition, and any other op is cloned as is.
void cloneGuarded(OpBuilder &b, Operation &op, Value live, ArrayRef<Operation *> loads, IRMapping &mapping) {
  Location loc = op.getLoc();
  auto mapped = [&](ValueRange values) {
    SmallVector<Value> out;
    for (Value v : values)
      out.push_back(mapping.lookupOrDefault(v));
    return out;
  };
  if (llvm::is_contained(loads, &op)) {
    Value base = isa<vector::LoadOp>(op) ? cast<vector::LoadOp>(op).getBase() : cast<memref::LoadOp>(op).getMemRef();
    ValueRange indices =
        isa<vector::LoadOp>(op) ? cast<vector::LoadOp>(op).getIndices() : cast<memref::LoadOp>(op).getIndices();
    auto guarded = GuardedLoadOp::create(b, loc, op.getResult(0).getType(), base, mapped(indices), live,
                                         /*readonly=*/true);
    mapping.map(op.getResult(0), guarded.getResult());
  } else if (auto store = dyn_cast<vector::StoreOp>(op)) {
    GuardedStoreOp::create(b, loc, mapping.lookupOrDefault(store.getValueToStore()), store.getBase(),
                           mapped(store.getIndices()), live);
  } else if (auto branch = dyn_cast<scf::IfOp>(op)) {
    Value both = arith::AndIOp::create(b, loc, live, mapping.lookupOrDefault(branch.getCondition()));
    for (Operation &inner : branch.thenBlock()->without_terminator())
      cloneGuarded(b, inner, both, loads, mapping);
  } else {
    b.clone(op, mapping);
  }
}

/// Rewrites `g`; returns the branch it keeps around the term's arithmetic, if it keeps one.
scf::IfOp guard(Guardable g) {
  OpBuilder b(g.branch);
  Location loc = g.branch.getLoc();
  Value live = g.branch.getCondition();
  if (!g.onThen)
    live = arith::XOrIOp::create(b, loc, live, arith::ConstantIntOp::create(b, loc, 1, 1));
  bool noSelect = zeroLoadGives(g);
  IRMapping mapping;
  bool stores = llvm::any_of(g.loading->without_terminator(), [](Operation &op) { return op.getNumResults() == 0; });
  // The term added to a sum that is never -0.0 (B2's `acc + (live ? f32(x) : 0.0)`): a skipped term adds
  // +0.0, which changes no such sum, so the add can go behind the branch with the term's arithmetic.
  arith::AddFOp summed;
  if (noSelect && g.branch->hasOneUse())
    if (auto add = dyn_cast<arith::AddFOp>(*g.branch->user_begin());
        add && add->getBlock() == g.branch->getBlock() && add.getFastmath() == arith::FastMathFlags::none &&
        neverNegativeZero(add.getOperand(add.getLhs() == g.branch.getResult(0) ? 1 : 0)))
      summed = add;
  if ((!noSelect || summed) && !stores) {
    // The term's loads (and what their addresses need) issue here, guarded; its arithmetic stays behind a
    // branch, which no longer waits for a load issued inside it. A skipped term then costs its loads' setup and
    // a branch, not its arithmetic and a select per lane (C2 at Mixtral's top-2 of 8 experts: 8 terms a vector).
    SetVector<Operation *> feeding;
    for (Operation *load : g.loads)
      feeding.insert(load);
    for (size_t i = 0; i < feeding.size(); ++i)
      for (Value v : feeding[i]->getOperands())
        if (Operation *def = v.getDefiningOp(); def && def->getBlock() == g.loading)
          feeding.insert(def);
    for (Operation &op : g.loading->without_terminator())
      if (feeding.contains(&op))
        cloneGuarded(b, op, live, g.loads, mapping);
    if (summed)
      b.setInsertionPoint(summed); // where the sum's earlier terms are
    Operation *replaced = summed ? summed.getOperation() : g.branch.getOperation();
    Value passedOn = summed ? summed.getOperand(summed.getLhs() == g.branch.getResult(0) ? 1 : 0) : g.other();
    auto term = scf::IfOp::create(b, loc, replaced->getResultTypes(), live, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard inside(b);
      b.setInsertionPointToStart(term.thenBlock());
      for (Operation &op : g.loading->without_terminator())
        if (!feeding.contains(&op))
          b.clone(op, mapping);
      Value value = mapping.lookupOrDefault(g.loading->getTerminator()->getOperand(0));
      if (summed) {
        mapping.map(g.branch.getResult(0), value);
        value = b.clone(*summed, mapping)->getResult(0);
      }
      scf::YieldOp::create(b, loc, value);
      b.setInsertionPointToStart(term.elseBlock());
      scf::YieldOp::create(b, loc, passedOn);
    }
    replaced->getResult(0).replaceAllUsesWith(term.getResult(0));
    if (summed)
      summed.erase();
    g.branch.erase();
    return term;
  }
  for (Operation &op : g.loading->without_terminator())
    cloneGuarded(b, op, live, g.loads, mapping);
  Value term = mapping.lookupOrDefault(g.loading->getTerminator()->getOperand(0));
  Value result = noSelect ? term : arith::SelectOp::create(b, loc, live, term, g.other()).getResult();
  g.branch.getResult(0).replaceAllUsesWith(result);
  g.branch.erase();
  return {};
}

/// Whether `op` declares its memory effects and all of them are reads.
bool onlyReads(Operation *op) {
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  return effects && effects.onlyHasEffect<MemoryEffects::Read>();
}

/// Moves the guarded loads after `first` in its block (with the ops their operands need from there) before it:
/// each term's branch then finds its loads issued, all of them before the first branch. Only loads that no write
/// from `first` on precedes move.
void issueLoadsBefore(scf::IfOp first) {
  Block *block = first->getBlock();
  SmallVector<Operation *> later;
  bool written = false; // whether an op from `first` on writes memory: reads then stay where they are
  for (Operation *op = first; op; op = op->getNextNode()) {
    if (auto load = dyn_cast<GuardedLoadOp>(op); load && load.getReadonly() && !written)
      later.push_back(op);
    op->walk([&](Operation *inner) { written |= !isMemoryEffectFree(inner) && !onlyReads(inner); });
  }
  for (Operation *load : later) {
    SetVector<Operation *> slice;
    slice.insert(load);
    bool movable = true;
    for (size_t i = 0; i < slice.size() && movable; ++i)
      for (Value v : slice[i]->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def || def->getBlock() != block || def->isBeforeInBlock(first))
          continue;
        // Pure ops and reads (the row's list and table entries) without regions: nothing in between writes.
        movable &= def->getNumRegions() == 0 && (isMemoryEffectFree(def) || onlyReads(def));
        slice.insert(def);
      }
    if (!movable)
      continue;
    SmallVector<Operation *> ordered(slice.begin(), slice.end());
    llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    for (Operation *op : ordered)
      op->moveBefore(first);
  }
}

/// A branch that only stores, in the loop itself: its stores become guarded ones, so that the loads after it
/// in the loop issue before the stored value arrives.
void guardStoreBranch(scf::IfOp branch) {
  OpBuilder b(branch);
  IRMapping mapping;
  for (Operation &inner : branch.thenBlock()->without_terminator())
    cloneGuarded(b, inner, branch.getCondition(), {}, mapping);
  branch.erase();
}

struct GuardLoadsPass : impl::MoeGuardLoadsBase<GuardLoadsPass> {
  void runOnOperation() override {
    auto innermostLoops = [&](function_ref<void(scf::ForOp)> f) {
      getOperation()->walk([&](scf::ForOp loop) {
        bool nested = false;
        loop.getBody()->walk([&](LoopLikeOpInterface) { nested = true; });
        if (!nested)
          f(loop);
      });
    };
    SmallVector<Guardable> branches;
    innermostLoops([&](scf::ForOp loop) {
      loop.getBody()->walk([&](scf::IfOp branch) {
        if (std::optional<Guardable> g = guardable(branch))
          branches.push_back(*g);
      });
    });
    DenseMap<Block *, scf::IfOp> firstTerm;
    for (Guardable g : branches)
      if (scf::IfOp term = guard(g)) {
        scf::IfOp &first = firstTerm[term->getBlock()];
        if (!first || term->isBeforeInBlock(first))
          first = term;
      }
    for (auto &[block, first] : firstTerm)
      issueLoadsBefore(first);
    SmallVector<scf::IfOp> storeBranches;
    innermostLoops([&](scf::ForOp loop) {
      for (Operation &op : loop.getBody()->without_terminator())
        if (guardableStoreBranch(op))
          storeBranches.push_back(cast<scf::IfOp>(op));
    });
    for (scf::IfOp branch : storeBranches)
      guardStoreBranch(branch);
  }
};
} // namespace
} // namespace moec::moe
