//===- SplitSums.cpp - Dot products along their own index, as partial sums ---===//
//
// BodyEmitter's split sums: a moe.sum that reads along its own index (contiguousReduction) runs as vectors
// of f32 partial sums, over a warp's lanes on the GPU, combined at the end. Several points' sums run
// interleaved in one loop (CPU point kernels), a staged point's a chunk at a time (Ascend), and on the GPU
// the loop along the row is unrolled for loads in flight.
//===----------------------------------------------------------------------===//
#include "BodyEmitter.h"
#include "UnrollBudgets.h"

using namespace mlir;

namespace moec::moe {

SmallVector<Value> BodyEmitter::splitSums(SumOp sum, ArrayRef<BodyEmitter *> points, ArrayRef<Value> actives) {
  BodyEmitter &first = *points.front();
  OpBuilder &b = first.b;
  Location loc = sum.getLoc();
  std::optional<VaryingAnalysis> along = contiguousReduction(sum);
  assert(along && first.split.width > 0 && "a sum that splits");
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  int64_t lanes = first.split.lanes;
  Value laneStart = lanes > 1 ? first.split.lane : cst(0);
  Value bound = first.get(sum.getBound(), false);
  int64_t w = first.splitWidth(bound);
  // Folded where the bound is a constant: the vector loop's step count then is one too.
  Value mainEnd = b.createOrFold<arith::MulIOp>(loc, b.createOrFold<arith::DivUIOp>(loc, bound, cst(w)), cst(w));
  SmallVector<Value> accs(points.size(), arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f)));
  Value tailBegin = laneStart;
  if (w > 1) {
    Value zeros = arith::ConstantOp::create(b, loc, b.getZeroAttr(vectorOf(b.getF32Type(), w)));
    SmallVector<Value> vectorParts =
        splitPartials(sum, *along, points, actives, arith::MulIOp::create(b, loc, laneStart, cst(w)), mainEnd,
                      lanes * w, w, SmallVector<Value>(points.size(), zeros), /*beginsInFirstStep=*/true);
    for (auto [acc, part] : llvm::zip(accs, vectorParts))
      acc = vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, part);
    tailBegin = arith::AddIOp::create(b, loc, mainEnd, laneStart);
  }
  // The elements the vectors leave, one at a time: none when the vectors divide a constant bound.
  APInt boundValue;
  bool whole = w > 1 && matchPattern(bound, m_ConstantInt(&boundValue)) && boundValue.getSExtValue() % w == 0;
  if (!whole)
    accs = splitPartials(sum, *along, points, actives, tailBegin, bound, lanes, 1, accs);
  for (Value &acc : accs)
    for (int64_t offset = lanes / 2; offset > 0; offset /= 2) {
      auto i32 = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 32); };
      Value other =
          gpu::ShuffleOp::create(b, loc, acc, i32(offset), i32(lanes), gpu::ShuffleMode::XOR).getShuffleResult();
      acc = arith::AddFOp::create(b, loc, acc, other);
    }
  return accs;
}

int64_t BodyEmitter::splitWidth(Value bound) const {
  int64_t w = split.width;
  APInt boundValue;
  if (split.lanes == 1 && matchPattern(bound, m_ConstantInt(&boundValue)))
    while (w > 1 && boundValue.getSExtValue() < w)
      w /= 2;
  return w;
}

SmallVector<Value> BodyEmitter::splitPartials(SumOp sum, const VaryingAnalysis &along, ArrayRef<BodyEmitter *> points,
                                              ArrayRef<Value> actives, Value begin, Value end, int64_t step,
                                              int64_t termWidth, ValueRange inits, bool beginsInFirstStep) {
  BodyEmitter &first = *points.front();
  OpBuilder &b = first.b;
  Location loc = sum.getLoc();
  Block &body = sum.getBody().front();
  // What does not vary along j runs once, before the loop: a fused row's scale (A3's probs[t, e]).
  // Only top-level ops without regions that read at most: a load there reads proven-in-bounds indices
  // (a checked one sits in an scf.if), so it is safe even when the loop runs no step.
  SmallVector<Operation *> invariant;
  DenseSet<Operation *> hoistable;
  auto available = [&](Value v) { // computed before the loop: outside the body, or hoisted
    Operation *def = v.getDefiningOp();
    return isa<BlockArgument>(v) ? v.getParentBlock() != &body : (!sum->isAncestor(def) || hoistable.contains(def));
  };
  if (!first.staged)
    for (Operation &o : body.without_terminator())
      if (o.getNumRegions() == 0 && o.getNumResults() > 0 && (isa<memref::LoadOp>(o) || isMemoryEffectFree(&o)) &&
          llvm::none_of(o.getResults(), [&](Value r) { return along.isVarying(r); }) &&
          llvm::all_of(o.getOperands(), available)) {
        invariant.push_back(&o);
        hoistable.insert(&o);
      }
  // Per point; an op whose operands are the first point's takes the first point's results.
  SmallVector<IRMapping> hoisted;
  for (BodyEmitter *point : points) {
    BodyEmitter pre(b, first.domain, along, termWidth, first.unroll, first.maxAlignment);
    pre.scalars = point->scalars;
    for (Operation *o : invariant) {
      bool asFirst = !hoisted.empty() && llvm::all_of(o->getOperands(), [&](Value v) {
        return pre.scalars.lookupOrDefault(v) == hoisted.front().lookupOrDefault(v);
      });
      if (!asFirst) {
        pre.emitOp(*o);
        continue;
      }
      for (Value r : o->getResults())
        pre.scalars.map(r, hoisted.front().lookup(r));
    }
    hoisted.push_back(pre.scalars);
  }
  // What every point's term computes alike: loads and arithmetic whose operands are the same for all
  // points (A3: token t's gradient row, for each of its experts), computed once in the loop. An scf.if
  // qualifies too (a load under its bounds check) when everything in it takes only such values: its
  // stores (a failed check's status) then store the same values the points' would.
  SmallVector<Operation *> shared;
  if (points.size() > 1 && !first.staged) {
    DenseSet<Value> sharedValues{body.getArgument(0)};
    auto same = [&](Value v) {
      if (sharedValues.contains(v))
        return true;
      if (Operation *def = v.getDefiningOp(); (def && sum->isAncestor(def) && !hoistable.contains(def)) ||
                                              (!def && v.getParentBlock() == &body))
        return false; // a term's own value
      return llvm::all_of(hoisted, [&](IRMapping &m) { return m.lookupOrDefault(v) == hoisted[0].lookupOrDefault(v); });
    };
    auto computedAlike = [&](Operation &o) {
      bool alike = true;
      o.walk([&](Operation *inner) {
        alike &= isa<scf::IfOp, scf::YieldOp, memref::LoadOp, memref::StoreOp>(inner) ||
                 (inner->getNumRegions() == 0 && isMemoryEffectFree(inner));
        for (Value v : inner->getOperands())
          if (Operation *def = v.getDefiningOp();
              !(def && o.isAncestor(def)) &&
              !(isa<BlockArgument>(v) && o.isAncestor(v.getParentBlock()->getParentOp())))
            alike &= same(v);
      });
      return alike;
    };
    for (Operation &o : body.without_terminator())
      if (!hoistable.contains(&o) && o.getNumResults() > 0 && computedAlike(o)) {
        shared.push_back(&o);
        sharedValues.insert(o.getResults().begin(), o.getResults().end());
      }
  }
  auto loop = scf::ForOp::create(b, loc, begin, end, arith::ConstantIndexOp::create(b, loc, step), inits);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  BodyEmitter common(b, first.domain, along, termWidth, first.unroll, first.maxAlignment);
  common.scalars = hoisted.front();
  common.scalars.map(body.getArgument(0), loop.getInductionVar());
  for (Operation *o : shared)
    common.emitOp(*o);
  SmallVector<Value> next;
  for (auto [i, point, acc, scalars] : llvm::enumerate(points, loop.getRegionIterArgs(), hoisted)) {
    Value active = i < actives.size() ? actives[i] : Value();
    std::optional<OpBuilder::InsertionGuard> inside;
    scf::IfOp ifActive;
    if (active) { // acc + term where the point is active, acc where not
      inside.emplace(b);
      ifActive = scf::IfOp::create(b, loc, TypeRange{acc.getType()}, active, /*withElseRegion=*/true);
      b.setInsertionPointToStart(ifActive.elseBlock());
      scf::YieldOp::create(b, loc, acc);
      b.setInsertionPointToStart(ifActive.thenBlock());
    }
    BodyEmitter term(b, first.domain, along, termWidth, first.unroll, first.maxAlignment);
    term.scalars = scalars;
    term.staged = point->staged;
    term.streamableStores = point->streamableStores;
    for (Operation *o : invariant)
      term.skip(o);
    for (Operation *o : shared) {
      term.skip(o);
      for (Value r : o->getResults())
        common.vectorized(r) ? term.vectors.map(r, common.vectors.lookup(r))
                             : term.scalars.map(r, common.scalars.lookup(r));
    }
    term.scalars.map(body.getArgument(0), loop.getInductionVar());
    Value sumNow = arith::AddFOp::create(b, loc, acc, term.emitBlock(body, termWidth > 1));
    term.flushUnrolls();
    if (active) {
      scf::YieldOp::create(b, loc, sumNow);
      inside.reset();
      sumNow = ifActive.getResult(0);
    }
    next.push_back(sumNow);
  }
  common.flushUnrolls();
  scf::YieldOp::create(b, loc, next);
  // GPU: a loop whose lanes all start within its first step: moe-unroll-lane-sums may unroll it.
  if (first.split.lanes > 1 && termWidth > 1 && beginsInFirstStep)
    loop->setAttr(kLaneSumAttr, b.getUnitAttr());
  return SmallVector<Value>(loop.getResults());
}

void BodyEmitter::emitSplitSum(SumOp sum, const VaryingAnalysis &along) {
  if (!staged)
    return map(sum.getResult(), splitSums(sum, {this}).front());
  Location loc = sum.getLoc();
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value bound = get(sum.getBound(), false);
  int64_t w = splitWidth(bound);
  Value mainEnd = arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, bound, cst(w)), cst(w));
  auto partials = [&](Value begin, Value end, int64_t step, int64_t termWidth, Value init) {
    return splitPartials(sum, along, {this}, {}, begin, end, step, termWidth, init).front();
  };
  emitStagedSplitSum(sum, w, bound, mainEnd, partials);
}

template <typename Partials>
void BodyEmitter::emitStagedSplitSum(SumOp sum, int64_t w, Value bound, Value mainEnd, Partials &&partials) {
  Location loc = sum.getLoc();
  Block &body = sum.getBody().front();
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  int64_t chunk = staged->chunk(), chunks = staged->chunks();
  SmallVector<RowStoreOp> rowStores; // copied out after each chunk
  sum->walk([&](RowStoreOp store) { rowStores.push_back(store); });
  // Stages the chunk from `offset` and returns its end.
  auto stage = [&](Value offset) {
    Value length = arith::MinSIOp::create(b, loc, cst(chunk), arith::SubIOp::create(b, loc, bound, offset));
    staged->beginChunk(offset, length);
    staged->copyIn(b, body, nullptr, scalars, Value());
    return arith::AddIOp::create(b, loc, offset, length).getResult();
  };
  Type partialType = w > 1 ? Type(vectorOf(b.getF32Type(), w)) : Type(b.getF32Type());
  Value acc = arith::ConstantOp::create(b, loc, b.getZeroAttr(partialType));
  if (chunks > 1) {
    auto loop = scf::ForOp::create(b, loc, cst(0), cst(chunks - 1), cst(1), ValueRange{acc});
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value offset = arith::MulIOp::create(b, loc, loop.getInductionVar(), cst(chunk));
    Value end = stage(offset);
    Value next = partials(offset, end, w, w, loop.getRegionIterArgs()[0]);
    staged->copyOutRows(b, rowStores, scalars);
    scf::YieldOp::create(b, loc, ValueRange{next});
    acc = loop.getResult(0);
  }
  Value last = cst((chunks - 1) * chunk);
  Value end = stage(last);
  if (w > 1) {
    acc = vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, partials(last, mainEnd, w, w, acc));
    last = mainEnd;
  }
  map(sum.getResult(), partials(last, end, 1, 1, acc));
  staged->copyOutRows(b, rowStores, scalars);
}

} // namespace moec::moe
