//===- CompactPredicatedPoints.cpp - CPU: a row of points visits its live ones ===//
//
// A3 with probs runs a point per (token t, expert e): E of them per token, K of them live (K = 8 of
// E = 128 at Qwen3's shapes). Each point numbers its slot by counting the routing map's experts before it,
//   k = fold(j < e, n = 0) (m(j) ? n + 1 : n)          m(j) = routing_map[t, j] != 0
// and a point whose own m(e) is false writes a constant (probs_grad[t, e] = 0). Walking all E points
// costs the dead ones a load, a test, the carried count and a store each: several cycles apiece, ~8 % of
// the op's time at Qwen3's shapes.
//
// For a point domain (a dot product per point, vector width 1) whose last dim has a constant bound E,
// this pass finds such a prefix count and the same predicate m(e) in the body, and checks that every point
// where m(e) is false writes one constant c to its own element and does nothing else (the body, with
// m(e) replaced by false, canonicalizes to `moe.write c to [indices]`). It then adds, at the top of the
// body, the row's list of live points
//   %list, %n = moe.compact %E {moe.live_list} { ^bb0(%j): ...; moe.yield %m_j }
// marks the count `moe.live_rank` (at a live point it is the point's position in the list) and the domain
// `moe.dead_value = c`. The CPU point lowering then, per row, stores c to the row's elements, builds the
// list (16 entries a step with AVX-512's compress) and runs the body only at the listed points, the count
// taken from the list position. Each element gets the value it got before: results are bit-identical.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Rewrite/FrozenRewritePatternSet.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "moe-compact-predicated-points"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOECOMPACTPREDICATEDPOINTS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// A prefix count `fold(j < e, 0) (p(j) ? n + 1 : n)` and its predicate p(j).
struct PrefixCount {
  FoldOp fold;
  Value predicate; // in the fold's step
};

/// Whether `v`, in the fold's step of `domain`, is computed from j, the domain's outer indices and values
/// defined outside the domain, by pure ops or loads of memory the domain does not write. The row's list
/// is built from it before any of the body runs (emitPointRange), so it may use nothing else of the body.
bool isStepSlice(Value v, Block &step, DomainOp domain, const DenseSet<Value> &written) {
  Block &body = domain.body();
  if (v == step.getArgument(0))
    return true;
  if (auto arg = dyn_cast<BlockArgument>(v); arg && arg.getOwner() == &body)
    return arg != body.getArguments().back();
  Block *block = isa<BlockArgument>(v) ? cast<BlockArgument>(v).getOwner() : v.getDefiningOp()->getBlock();
  if (!domain.op()->isAncestor(block->getParentOp()))
    return true; // defined outside the domain
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != &step) // the accumulator, or a value of the body
    return false;
  auto load = dyn_cast<memref::LoadOp>(def);
  if (def->getNumRegions() > 0 || !(isMemoryEffectFree(def) || (load && !written.contains(load.getMemRef()))))
    return false;
  return llvm::all_of(def->getOperands(), [&](Value o) { return isStepSlice(o, step, domain, written); });
}

/// The memory the domain writes: its output, and what its stores and row stores write.
DenseSet<Value> writtenMemory(DomainOp domain) {
  DenseSet<Value> written{domain.output()};
  domain.op()->walk([&](Operation *op) {
    if (auto store = dyn_cast<memref::StoreOp>(op))
      written.insert(store.getMemRef());
    else if (auto rowStore = dyn_cast<RowStoreOp>(op))
      written.insert(rowStore.getOutput());
    else if (!isa<memref::LoadOp>(op) && hasEffect<MemoryEffects::Write>(op) && op->getNumRegions() == 0)
      written.insert(op->getOperands().begin(), op->getOperands().end());
  });
  return written;
}

/// The fold of `domain`'s body that counts, over j below the last index e, the steps where a predicate of
/// j holds, from 0.
std::optional<PrefixCount> prefixCount(DomainOp domain) {
  Block &body = domain.body();
  Value e = body.getArguments().back();
  DenseSet<Value> written = writtenMemory(domain);
  for (Operation &op : body.without_terminator()) {
    auto fold = dyn_cast<FoldOp>(&op);
    if (!fold || fold.getBound() != e || !matchPattern(fold.getInit(), m_Zero()) || !fold.getType().isIndex())
      continue;
    Block &step = fold.getBody().front();
    auto select = step.getTerminator()->getOperand(0).getDefiningOp<arith::SelectOp>();
    if (!select || select.getFalseValue() != step.getArgument(1))
      continue;
    auto next = select.getTrueValue().getDefiningOp<arith::AddIOp>();
    if (!next || next.getLhs() != step.getArgument(1) || !matchPattern(next.getRhs(), m_One()))
      continue;
    if (isStepSlice(select.getCondition(), step, domain, written))
      return PrefixCount{fold, select.getCondition()};
  }
  return std::nullopt;
}

/// Whether `a` (in the domain body) computes what `b` (in the fold's step) does, with e for j. Ops compare
/// as CSE would (name, properties, types), their discardable attributes (moe.row_invariant) aside.
bool sameValue(Value a, Value b, Value e, Value j, Block &step) {
  if (b == j)
    return a == e;
  Operation *defA = a.getDefiningOp(), *defB = b.getDefiningOp();
  auto flags =
      OperationEquivalence::Flags(OperationEquivalence::IgnoreLocations | OperationEquivalence::IgnoreDiscardableAttrs);
  auto noOperands = [](Value, Value) { return failure(); };
  if (!defA || !defB)
    return a == b;
  if (defB->getBlock() != &step) // from outside the step: the same value, or equal constants
    return a == b || (defA->hasTrait<OpTrait::ConstantLike>() && defB->hasTrait<OpTrait::ConstantLike>() &&
                      OperationEquivalence::isEquivalentTo(defA, defB, noOperands, nullptr, flags));
  if (defA->getNumRegions() > 0 || cast<OpResult>(a).getResultNumber() != cast<OpResult>(b).getResultNumber())
    return false;
  return OperationEquivalence::isEquivalentTo(
      defA, defB, [&](Value x, Value y) { return success(sameValue(x, y, e, j, step)); }, nullptr, flags);
}

/// The body's value m(e) that is the count's predicate at j = e.
Value predicateAtPoint(DomainOp domain, PrefixCount count) {
  Block &body = domain.body();
  Block &step = count.fold.getBody().front();
  for (Operation &op : body.without_terminator())
    for (Value result : op.getResults())
      if (result.getType().isInteger(1) &&
          sameValue(result, count.predicate, body.getArguments().back(), step.getArgument(0), step))
        return result;
  return {};
}

/// The ops a rewrite inserts and has not erased. The folder puts the constants it makes (and moves those it
/// finds) at the function's entry, outside the region it rewrites; those of a scratch clone go with it.
struct InsertedOps : RewriterBase::Listener {
  llvm::SetVector<Operation *> ops;
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override { ops.insert(op); }
  void notifyOperationErased(Operation *op) override { ops.remove(op); }
};

/// The constant every point where `live` is false writes to its own element, and nothing else it does; or
/// null. Decided on a clone of the domain with `live` replaced by false, canonicalized.
TypedAttr deadPointValue(DomainOp domain, Value live, const FrozenRewritePatternSet &patterns) {
  OpBuilder b(domain.op());
  IRMapping mapping;
  Operation *clone = b.clone(*domain.op(), mapping);
  Block &body = clone->getRegion(0).front();
  b.setInsertionPointToStart(&body);
  auto dead = arith::ConstantIntOp::create(b, live.getLoc(), 0, 1);
  mapping.lookup(live).replaceAllUsesWith(dead.getResult());
  TypedAttr value;
  InsertedOps inserted;
  inserted.ops.insert(dead); // the folder may move it out of the clone, to the function's entry
  if (succeeded(applyPatternsGreedily(clone->getRegion(0), patterns, GreedyRewriteConfig().setListener(&inserted)))) {
    auto write = dyn_cast<WriteOp>(body.getTerminator());
    bool onlyConstants =
        llvm::all_of(body.without_terminator(), [](Operation &op) { return op.hasTrait<OpTrait::ConstantLike>(); });
    if (write && !write.getGuard() && onlyConstants && llvm::equal(write.getIndices(), body.getArguments()))
      matchPattern(write.getValue(), m_Constant(&value));
  }
  SmallVector<Operation *> outside =
      llvm::filter_to_vector(inserted.ops, [&](Operation *op) { return !clone->isAncestor(op); });
  clone->erase();
  for (Operation *op : llvm::reverse(outside))
    if (isOpTriviallyDead(op))
      op->erase();
  return value;
}

/// The row's list of live points, at the top of the body: the count's predicate with j the list's index.
void addLiveList(DomainOp domain, PrefixCount count, int64_t bound) {
  Block &body = domain.body();
  Location loc = count.fold.getLoc();
  OpBuilder b = OpBuilder::atBlockBegin(&body);
  auto compact =
      CompactOp::create(b, loc, MemRefType::get({bound}, b.getI32Type()), b.getIndexType(), domain.bounds().back());
  compact->setAttr(kLiveListAttr, b.getUnitAttr());
  Block *predicate = b.createBlock(&compact.getPredicate(), {}, {b.getIndexType()}, {loc});
  Block &step = count.fold.getBody().front();
  IRMapping mapping;
  mapping.map(step.getArgument(0), predicate->getArgument(0));
  for (Operation &op : step.without_terminator()) // the predicate's slice (the rest is dead, and DCE'd)
    b.clone(op, mapping);
  YieldOp::create(b, loc, mapping.lookup(count.predicate));
  // The slice's unused ops (the count's add and select) go; what the predicate needs stays.
  SmallVector<Operation *> cloned;
  for (Operation &op : predicate->without_terminator())
    cloned.push_back(&op);
  for (Operation *op : llvm::reverse(cloned))
    if (isOpTriviallyDead(op))
      op->erase();
}

struct CompactPredicatedPointsPass : impl::MoeCompactPredicatedPointsBase<CompactPredicatedPointsPass> {
  FrozenRewritePatternSet canonicalization;

  LogicalResult initialize(MLIRContext *context) override {
    RewritePatternSet patterns(context);
    for (Dialect *dialect : context->getLoadedDialects())
      dialect->getCanonicalizationPatterns(patterns);
    for (RegisteredOperationName op : context->getRegisteredOperations())
      op.getCanonicalizationPatterns(patterns, context);
    canonicalization = FrozenRewritePatternSet(std::move(patterns));
    return success();
  }

  void runOnOperation() override {
    for (DomainOp domain : collectDomainOps(getOperation())) {
      APInt bound;
      if (!runsPerPoint(domain) || !domain.schedule() || domain.schedule().getVector() != 1 ||
          domain.body().getNumArguments() < 2 || !matchPattern(domain.bounds().back(), m_ConstantInt(&bound)) ||
          bound.getSExtValue() < 1)
        continue;
      std::optional<PrefixCount> count = prefixCount(domain);
      if (!count)
        continue;
      Value live = predicateAtPoint(domain, *count);
      TypedAttr dead = live ? deadPointValue(domain, live, canonicalization) : TypedAttr();
      if (!dead)
        continue;
      addLiveList(domain, *count, bound.getSExtValue());
      count->fold->setAttr(kLiveRankAttr, UnitAttr::get(&getContext()));
      domain.op()->setAttr(kDeadValueAttr, dead);
    }
  }
};

} // namespace
} // namespace moec::moe
