//===- InterleavedPoints.cpp - Points whose dot products run together ---===//
//
// How a point kernel's body splits around its dot product so that several points' dot products run
// interleaved (their gathered rows streaming together): the plan (interleavedPoints), the waiting points'
// sums and what follows them (finishPoints), and a point that is not live (emitDeadPoint). The CPU's range
// of points (PointLowering.cpp) and a GPU warp's row of points (WarpPointRows.cpp) run them.
//===----------------------------------------------------------------------===//
#include "InterleavedPoints.h"

using namespace mlir;

namespace moec::moe {

std::optional<InterleavedPoints> interleavedPoints(DomainOp op, int64_t minRowBytes) {
  InterleavedPoints plan;
  plan.sum = contiguousReductionOf(op);
  ReductionShape shape = reductionShape(op);
  if (!plan.sum || shape.length == 0 || shape.length * shape.elemBytes < minRowBytes)
    return std::nullopt;
  Block &body = op.body();
  plan.carrier = body.findAncestorOpInBlock(*plan.sum);
  SmallVector<Operation *> late; // ops (with their regions) that run after the sums
  if (plan.carrier != plan.sum) {
    plan.carrierIf = dyn_cast<scf::IfOp>(plan.carrier);
    if (!plan.carrierIf || plan.sum->getBlock() != plan.carrierIf.thenBlock() ||
        &plan.carrierIf.thenBlock()->front() != plan.sum.getOperation())
      return std::nullopt;
    for (Operation &o : *plan.carrierIf.thenBlock()) {
      if (&o == plan.sum.getOperation())
        continue;
      if (o.getNumRegions() > 0 || !isMemoryEffectFree(&o))
        return std::nullopt;
      late.push_back(&o);
    }
  }
  for (Operation *o = plan.carrier->getNextNode(); o; o = o->getNextNode())
    late.push_back(o);
  late.push_back(plan.sum);
  DenseSet<Value> before(body.getArguments().begin(), body.getArguments().end());
  DenseSet<Value> writtenBefore;
  for (Operation *o = &body.front(); o != plan.carrier; o = o->getNextNode()) {
    before.insert(o->getResults().begin(), o->getResults().end());
    o->walk([&](memref::StoreOp store) { writtenBefore.insert(store.getMemRef()); });
  }
  SetVector<Value> saved;
  bool readsWritten = false;
  DenseSet<Value> writtenLate; // a later point's early ops run before this point's late ones
  for (Operation *o : late)
    o->walk([&](Operation *inner) {
      for (Value v : inner->getOperands())
        if (before.contains(v))
          saved.insert(v);
      if (auto load = dyn_cast<memref::LoadOp>(inner))
        readsWritten |= writtenBefore.contains(load.getMemRef());
      if (auto store = dyn_cast<memref::StoreOp>(inner))
        writtenLate.insert(store.getMemRef());
      if (auto store = dyn_cast<RowStoreOp>(inner))
        writtenLate.insert(store.getOutput());
    });
  for (Operation *o = &body.front(); o != plan.carrier; o = o->getNextNode())
    o->walk([&](memref::LoadOp load) { readsWritten |= writtenLate.contains(load.getMemRef()); });
  for (Value arg : body.getArguments())
    saved.insert(arg); // the point's indices: the write's, and where the late ops are
  if (readsWritten || llvm::any_of(saved, [](Value v) { return !v.getType().isIntOrIndexOrFloat(); }))
    return std::nullopt;
  plan.saved = saved.takeVector();
  return plan;
}

void finishPoints(OpBuilder &b, InterleavedPoints plan, DomainOp op,
                  ArrayRef<std::unique_ptr<BodyEmitter>> emitters, ArrayRef<Value> actives) {
  Block &body = op.body();
  SmallVector<BodyEmitter *> points;
  for (const auto &emitter : emitters)
    points.push_back(emitter.get());
  SmallVector<Value> sums = BodyEmitter::splitSums(plan.sum, points, actives);
  for (auto [i, emitter, sum] : llvm::enumerate(points, sums)) {
    OpBuilder::InsertionGuard guard(b);
    if (i < actives.size() && actives[i])
      b.setInsertionPointToStart(scf::IfOp::create(b, op.op()->getLoc(), actives[i], false).thenBlock());
    emitter->mapScalar(plan.sum.getResult(), sum);
    if (plan.carrierIf) {
      emitter->skip(plan.sum);
      emitter->emitOpsOf(*plan.carrierIf.thenBlock());
      for (auto [result, yielded] : llvm::zip(plan.carrierIf.getResults(), plan.carrierIf.thenYield().getOperands()))
        emitter->mapScalar(result, emitter->value(yielded));
    }
    for (Operation *o = &body.front(); o != plan.carrier->getNextNode(); o = o->getNextNode())
      emitter->skip(o);
    SmallVector<Value> indices;
    for (Value arg : body.getArguments())
      indices.push_back(emitter->value(arg));
    emitter->emitElement(indices);
  }
}

void emitDeadPoint(InterleavedPoints plan, DomainOp op, BodyEmitter &early, ValueRange indices) {
  if (!plan.carrierIf)
    return;
  Block &body = op.body();
  early.emitOpsOf(*plan.carrierIf.elseBlock());
  for (auto [result, yielded] : llvm::zip(plan.carrierIf.getResults(), plan.carrierIf.elseYield().getOperands()))
    early.mapScalar(result, early.value(yielded));
  for (Operation *o = &body.front(); o != plan.carrier; o = o->getNextNode())
    early.skip(o);
  for (Operation *o = plan.carrier->getNextNode(); o; o = o->getNextNode())
    early.unskip(o);
  early.emitElement(indices);
}

bool pointsCanInterleave(DomainOp op, int64_t minRowBytes) { return interleavedPoints(op, minRowBytes).has_value(); }

} // namespace moec::moe
