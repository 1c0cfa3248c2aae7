//===- WarpPointRows.cpp - GPU: a warp per row of points that share a row ---===//
//
// A domain marked by moe-group-points runs a warp per row of its points (or per run of a one-dim domain's
// points): the warp takes the row's points 32 at a time, a lane each, runs each point's ops before its dot
// product, and then the live points' dot products together, up to the mark's batch at a time, its
// lanes splitting each reduction (InterleavedPoints.cpp); moe-lane-point-access's prefix sums over the
// points run as ballots (emitLaneScans).
//===----------------------------------------------------------------------===//
#include "moec/contracts/Schedule.h"
#include "Transforms/InterleavedPoints.h"

using namespace mlir;

namespace moec::moe {

namespace {
/// `v` (an integer of at most 64 bits, or an index) as an i64, and back.
Value toI64(OpBuilder &b, Location loc, Value v) {
  Type i64 = b.getI64Type();
  if (v.getType().isIndex())
    return arith::IndexCastOp::create(b, loc, i64, v);
  return v.getType() == i64 ? v : Value(arith::ExtSIOp::create(b, loc, i64, v));
}
Value fromI64(OpBuilder &b, Location loc, Value v, Type type) {
  if (type.isIndex())
    return arith::IndexCastOp::create(b, loc, type, v);
  return type == v.getType() ? v : Value(arith::TruncIOp::create(b, loc, type, v));
}

/// `v` (any value a lane holds: an index, or an integer or float of at most 64 bits) as lane `from` holds it.
Value laneValue(OpBuilder &b, Location loc, Value v, Value from) {
  return shuffleWarp(b, loc, v, from, gpu::ShuffleMode::IDX);
}

/// The folds marked kLaneScanAttr for one chunk of 32 points of a row, lane l's point at `at` of the row's
/// `members` (`indices` its indices): `values`, lane l's point's value of each fold (its carry, the fold's
/// value at the chunk's first point, plus the steps of the chunk's points before l), and `carries`, the
/// values at the next chunk's first point. A lane's step from 0 (computed only where a later point of the
/// row needs it) adds c or nothing (countingFoldIncrement): a ballot of the lanes whose step adds c, and
/// c times a count of its bits. Integer addition is associative, also when it wraps: each value is the
/// fold's, bit for bit.
struct LaneScans {
  SmallVector<Value> values, carries;
};
LaneScans emitLaneScans(OpBuilder &b, DomainOp op, const VaryingAnalysis &analysis, ArrayRef<FoldOp> folds,
                        ArrayRef<Value> indices, Value at, Value members, Value lane32, ValueRange carries) {
  Location loc = op.op()->getLoc();
  Type i64 = b.getI64Type(), i32 = b.getI32Type();
  auto c32 = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, i32, v); };
  Value zero64 = arith::ConstantIntOp::create(b, loc, i64, 0);
  Value needed =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                            arith::AddIOp::create(b, loc, at, arith::ConstantIndexOp::create(b, loc, 1)), members);
  Value lanesBelow = arith::SubIOp::create(b, loc, arith::ShLIOp::create(b, loc, c32(1), lane32), c32(1));
  LaneScans scans;
  for (auto [constFold, carry] : llvm::zip(folds, carries)) {
    FoldOp fold = constFold;
    Type type = fold.getType();
    auto term = scf::IfOp::create(b, loc, TypeRange{i64}, needed, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(term.thenBlock());
      BodyEmitter step(b, op, analysis, 1, 1, 1);
      step.mapIndices(indices);
      step.mapScalar(fold.getBody().front().getArgument(0), indices.back());
      Value zero = type.isIndex() ? Value(arith::ConstantIndexOp::create(b, loc, 0))
                                  : Value(arith::ConstantIntOp::create(b, loc, type, 0));
      Value x = step.emitReductionStep(fold, zero);
      step.flushUnrolls();
      scf::YieldOp::create(b, loc, ValueRange{toI64(b, loc, x)});
      b.setInsertionPointToStart(term.elseBlock());
      scf::YieldOp::create(b, loc, ValueRange{zero64});
    }
    // The step is c or 0 (c = 0 counts nothing either way).
    Value adds = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, term.getResult(0), zero64);
    Value bits = NVVM::VoteSyncOp::create(b, loc, i32, c32(-1), adds, NVVM::VoteSyncKind::ballot);
    Value increment = arith::ConstantIntOp::create(b, loc, i64, *countingFoldIncrement(fold));
    auto times = [&](Value lanes) {
      return arith::MulIOp::create(b, loc, increment,
                                   arith::ExtUIOp::create(b, loc, i64, math::CtPopOp::create(b, loc, lanes)));
    };
    Value before = times(arith::AndIOp::create(b, loc, bits, lanesBelow));
    scans.values.push_back(fromI64(b, loc, arith::AddIOp::create(b, loc, carry, before), type));
    scans.carries.push_back(arith::AddIOp::create(b, loc, carry, times(bits)));
  }
  return scans;
}
/// Whether `v`, a value a waiting point keeps, is an index that fits 32 bits (signed) whatever the inputs: the
/// domain's last index below a constant bound that does, a constant that does, an index a signed cast made
/// from an integer of at most 32 bits (a row number loaded from an i32 tensor), or a choice between such
/// values (a select, or an scf.if's result: A3's slot row, out_index[..] where the slot is live, else -1).
bool fitsInt32(Value v, DomainOp op, int depth = 0) {
  if (!v.getType().isIndex() || depth > 8)
    return false;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    APInt bound;
    return arg.getOwner() == &op.body() && arg.getArgNumber() == op.body().getNumArguments() - 1 &&
           matchPattern(op.bounds().back(), m_ConstantInt(&bound)) && bound.isIntN(31);
  }
  Operation *def = v.getDefiningOp();
  APInt constant;
  if (matchPattern(v, m_ConstantInt(&constant)))
    return constant.isSignedIntN(32);
  if (auto cast = dyn_cast<arith::IndexCastOp>(def))
    return cast.getIn().getType().isSignlessInteger() && cast.getIn().getType().getIntOrFloatBitWidth() <= 32;
  if (auto select = dyn_cast<arith::SelectOp>(def))
    return fitsInt32(select.getTrueValue(), op, depth + 1) && fitsInt32(select.getFalseValue(), op, depth + 1);
  if (auto ifOp = dyn_cast<scf::IfOp>(def)) {
    unsigned result = cast<OpResult>(v).getResultNumber();
    return ifOp.elseBlock() && fitsInt32(ifOp.thenYield().getOperand(result), op, depth + 1) &&
           fitsInt32(ifOp.elseYield().getOperand(result), op, depth + 1);
  }
  return false;
}
} // namespace

void emitWarpPointRow(OpBuilder &b, DomainOp op, Value row, Value lane, int64_t vectorAlignment) {
  constexpr int64_t kWarpLanes = kWarpSize, kNarrowBatch = 2;
  const int64_t slots = op.op()->getAttrOfType<IntegerAttr>(kPointRowsAttr).getInt(); // a batch's points
  Location loc = op.op()->getLoc();
  ScheduleAttr schedule = op.schedule();
  VaryingAnalysis analysis(op);
  std::optional<InterleavedPoints> plan = interleavedPoints(op, /*minRowBytes=*/0);
  assert(plan && "moe-group-points marks only points that interleave");
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  auto i1 = [&](bool v) { return arith::ConstantIntOp::create(b, loc, v, 1); };
  auto zero = [&](Type t) { return arith::ConstantOp::create(b, loc, b.getZeroAttr(t)).getResult(); };
  Block &body = op.body();
  unsigned rank = body.getNumArguments();
  // The warp's points: its row's (outer..., every e), or a one-dim domain's run of kPointRunLength.
  SmallVector<Value> outer;
  Value first = cst(0), members = op.bounds().back();
  if (rank > 1)
    outer = unflattenRow(b, loc, row, op.bounds().drop_back());
  // What a waiting point keeps (its last index, and the values its sum and late ops take from before
  // them), in slots slots; the row's indices are the same for all. The keys (moe.group_key) are the same
  // for all the points of a batch: a live point whose keys differ from the waiting ones' runs them first.
  SmallVector<Value> kept;
  SmallVector<size_t> keys; // positions in `kept`
  for (Value v : plan->saved)
    if (auto arg = dyn_cast<BlockArgument>(v); !arg || arg.getOwner() != &body || arg.getArgNumber() == rank - 1) {
      if (Operation *def = v.getDefiningOp(); def && def->hasAttr(kGroupKeyAttr))
        keys.push_back(kept.size());
      kept.push_back(v);
    }
  if (rank == 1) { // a run of points, where the keys allow from where a run of equal keys starts
    SmallVector<Value> keyValues;
    for (size_t k : keys)
      keyValues.push_back(kept[k]);
    first = arith::MulIOp::create(b, loc, row, cst(kPointRunLength));
    Value end = arith::MinUIOp::create(b, loc, arith::AddIOp::create(b, loc, first, cst(kPointRunLength)), members);
    if (std::optional<KeyAlignedRun> run =
            emitKeyAlignedRun(b, op, {}, first, members, kPointRunLength, lane, keyValues, vectorAlignment))
      std::tie(first, end) = std::pair(run->first, run->end);
    members = arith::SubIOp::create(b, loc, end, first);
  }
  SmallVector<FoldOp> scanned; // moe-lane-point-access's prefix sums over the points
  for (Operation *o = &body.front(); o != plan->carrier; o = o->getNextNode())
    if (auto fold = dyn_cast<FoldOp>(o); fold && fold->hasAttr(kLaneScanAttr))
      scanned.push_back(fold);

  // The waiting points: how many, then each one's kept values in its slot. Where a row's points are
  // one chunk of at most 32 (a one-dim domain's run, or a constant row of <= 32: Mixtral's 8 experts),
  // a waiting point's values stay in its lane, and the state is a mask of the waiting lanes instead: a
  // batch takes its points' values from their lanes, and the steps carry no slots (whose selects, 8
  // slots x each kept value per step, cost more than the batch's shuffles, and whose values held
  // registers across the batch's loop).
  APInt rowLength;
  bool oneChunk =
      rank == 1 ? 2 * kPointRunLength <= kWarpLanes // emitKeyAlignedRun's runs: at most 2 L points
                : matchPattern(op.bounds().back(), m_ConstantInt(&rowLength)) && rowLength.getSExtValue() <= kWarpLanes;
  // A kept index that fits 32 bits (a point's last index below a constant bound, or an index widened from a
  // loaded i32, such as a row number) waits in its slots as an i32: an index is 64 bits on the GPU, and the
  // slots of a batch of 8 are carried across the row's steps (16 of A3's probs kernels' registers).
  SmallVector<bool> narrowSlots;
  for (Value v : kept)
    narrowSlots.push_back(!oneChunk && fitsInt32(v, op));
  Type i32 = b.getI32Type();
  auto slotType = [&](size_t k) { return narrowSlots[k] ? i32 : kept[k].getType(); };
  auto toSlot = [&](size_t k, Value v) {
    return narrowSlots[k] ? Value(arith::IndexCastOp::create(b, loc, i32, v)) : v;
  };
  auto fromSlot = [&](size_t k, Value v) {
    return narrowSlots[k] ? Value(arith::IndexCastOp::create(b, loc, b.getIndexType(), v)) : v;
  };
  SmallVector<Value> waiting{cst(0)};
  if (!oneChunk)
    for (size_t k = 0; k < kept.size(); ++k)
      waiting.append(slots, zero(slotType(k)));
  auto slot = [&](ValueRange state, size_t k, int64_t i) { return state[1 + k * slots + i]; };

  // The points 32 at a time, a lane each.
  Value chunks =
      arith::DivUIOp::create(b, loc, arith::AddIOp::create(b, loc, members, cst(kWarpLanes - 1)), cst(kWarpLanes));
  SmallVector<Value> inits(waiting);
  for (FoldOp fold : scanned) {
    BodyEmitter init(b, op, analysis, 1, 1, 1);
    init.mapIndices(outer);
    inits.push_back(toI64(b, loc, init.value(fold.getInit())));
  }
  auto chunkLoop = scf::ForOp::create(b, loc, cst(0), chunks, cst(1), inits);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(chunkLoop.getBody());
  Value chunk = chunkLoop.getInductionVar();
  ValueRange chunkState = chunkLoop.getRegionIterArgs().take_front(waiting.size());
  ValueRange carries = chunkLoop.getRegionIterArgs().drop_front(waiting.size());
  Value lane32 = arith::IndexCastOp::create(b, loc, b.getI32Type(), lane);
  Value at = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, chunk, cst(kWarpLanes)), lane);
  Value isPoint = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, at, members);
  SmallVector<Value> indices(outer);
  indices.push_back(arith::AddIOp::create(b, loc, first, at));
  LaneScans scans = emitLaneScans(b, op, analysis, scanned, indices, at, members, lane32, carries);

  // Each lane's point's ops before its dot product; a point that is not live finishes here, at once.
  SmallVector<Type> pointTypes{b.getI1Type()};
  for (Value v : kept)
    pointTypes.push_back(v.getType());
  auto ifPoint = scf::IfOp::create(b, loc, pointTypes, isPoint, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard inside(b);
    b.setInsertionPointToStart(ifPoint.thenBlock());
    BodyEmitter early(b, op, analysis, 1, schedule.getUnroll(), vectorAlignment,
                      ReductionSplit{schedule.getVector(), 1, Value()});
    for (Operation *o = plan->carrier; o; o = o->getNextNode())
      early.skip(o);
    for (auto [fold, value] : llvm::zip(scanned, scans.values)) {
      early.skip(fold);
      early.mapScalar(fold.getResult(), value);
    }
    early.mapIndices(indices);
    early.emitOpsOf(body);
    Value live = plan->carrierIf ? early.value(plan->carrierIf.getCondition()) : Value(i1(true));
    SmallVector<Value> results{live};
    for (Value v : kept)
      results.push_back(early.value(v));
    {
      OpBuilder::InsertionGuard dead(b);
      b.setInsertionPointToStart(
          scf::IfOp::create(b, loc, arith::XOrIOp::create(b, loc, live, i1(true)), /*withElseRegion=*/false)
              .thenBlock());
      emitDeadPoint(*plan, op, early, indices);
    }
    scf::YieldOp::create(b, loc, results);
    early.flushUnrolls();
    b.setInsertionPointToStart(ifPoint.elseBlock());
    SmallVector<Value> none{i1(false)};
    for (Value v : kept)
      none.push_back(zero(v.getType()));
    scf::YieldOp::create(b, loc, none);
  }
  Value liveLanes = NVVM::VoteSyncOp::create(b, loc, b.getI32Type(), arith::ConstantIntOp::create(b, loc, -1, 32),
                                             ifPoint.getResult(0), NVVM::VoteSyncKind::ballot);

  // The live points in order, a step each, and after the row's last chunk one more step (no point) that
  // runs the points still waiting.
  Value lastChunk =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, arith::AddIOp::create(b, loc, chunk, cst(1)), chunks);
  Value steps = arith::AddIOp::create(
      b, loc, arith::IndexCastUIOp::create(b, loc, b.getIndexType(), math::CtPopOp::create(b, loc, liveLanes)),
      arith::SelectOp::create(b, loc, lastChunk, cst(1), cst(0)));
  SmallVector<Value> stepInits{liveLanes};
  stepInits.append(chunkState.begin(), chunkState.end());
  if (oneChunk)
    stepInits.push_back(arith::ConstantIntOp::create(b, loc, 0, 32)); // the waiting lanes
  auto stepLoop = scf::ForOp::create(b, loc, cst(0), steps, cst(1), stepInits);
  {
    OpBuilder::InsertionGuard inside(b);
    b.setInsertionPointToStart(stepLoop.getBody());
    Value left = stepLoop.getRegionIterArgs()[0];
    ValueRange state = stepLoop.getRegionIterArgs().drop_front();
    Value pending = state[0];
    Value zero32 = arith::ConstantIntOp::create(b, loc, 0, 32);
    Value one32 = arith::ConstantIntOp::create(b, loc, 1, 32);
    auto lowestLane = [&](Value lanes, Value otherwise) { // the lowest set bit's lane, `otherwise` for none
      Value any = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, lanes, zero32);
      return arith::SelectOp::create(b, loc, any, math::CountTrailingZerosOp::create(b, loc, lanes), otherwise);
    };
    auto withoutLowest = [&](Value lanes) {
      return arith::AndIOp::create(b, loc, lanes, arith::SubIOp::create(b, loc, lanes, one32));
    };
    Value live = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, left, zero32);
    Value from = lowestLane(left, zero32);
    Value rest = withoutLowest(left);
    Value waitingLanes = oneChunk ? state.back() : Value();
    Value firstLane = oneChunk ? lowestLane(waitingLanes, zero32) : Value();
    // Slot i's kept value k: from its slot, or (one chunk) from the lane of the i-th waiting point.
    auto slotValue = [&](size_t k, int64_t i, Value laneOfSlot) {
      return oneChunk ? laneValue(b, loc, ifPoint.getResult(1 + k), laneOfSlot) : fromSlot(k, slot(state, k, i));
    };
    SmallVector<Value> pointValues(kept.size());
    for (size_t k = 0; k < kept.size(); ++k)
      if (!oneChunk || llvm::is_contained(keys, k))
        pointValues[k] = laneValue(b, loc, ifPoint.getResult(1 + k), from);
    // The waiting points run when the slots are full, at the row's end, or before a live point of other keys.
    // Their keys are slot 0's, one value each for all the batch (its shared terms are found by value).
    DenseMap<size_t, Value> waitingKeys;
    Value otherKeys = i1(false);
    for (size_t k : keys) {
      waitingKeys[k] = slotValue(k, 0, firstLane);
      otherKeys = arith::OrIOp::create(
          b, loc, otherKeys, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, pointValues[k], waitingKeys[k]));
    }
    Value full = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, pending, cst(slots));
    Value end = arith::XOrIOp::create(b, loc, live, i1(true));
    Value flush =
        arith::AndIOp::create(b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, pending, cst(0)),
                              arith::OrIOp::create(b, loc, arith::OrIOp::create(b, loc, full, end),
                                                   arith::AndIOp::create(b, loc, live, otherKeys)));
    {
      // The `pending` waiting points run together: slot i is active when i < pending, and an inactive slot
      // stands for slot 0's point (whose values are valid) without adding terms or writing. The keys are
      // slot 0's for all: the terms that take only them and the row's values are computed once.
      OpBuilder::InsertionGuard batch(b);
      b.setInsertionPointToStart(scf::IfOp::create(b, loc, flush, /*withElseRegion=*/false).thenBlock());
      Value leader = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, cst(0));
      // The first `width` slots' points together (the others must not be waiting).
      auto runBatch = [&](int64_t width) {
        SmallVector<std::unique_ptr<BodyEmitter>> emitters;
        SmallVector<Value> actives;
        SmallVector<Value> slotLanes; // one chunk: slot i's lane (slot 0's where slot i is not waiting)
        for (Value lanes = waitingLanes; oneChunk && int64_t(slotLanes.size()) < width; lanes = withoutLowest(lanes))
          slotLanes.push_back(slotLanes.empty() ? firstLane : lowestLane(lanes, firstLane));
        for (int64_t i = 0; i < width; ++i) {
          Value active =
              i == 0 ? Value() : Value(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, cst(i), pending));
          emitters.push_back(
              std::make_unique<BodyEmitter>(b, op, analysis, 1, schedule.getUnroll(), vectorAlignment,
                                            ReductionSplit{schedule.getVector(), kWarpSize, lane}, leader));
          emitters.back()->splitFoldsOver(lane);
          for (auto [arg, index] : llvm::zip(body.getArguments().drop_back(), outer))
            emitters.back()->mapScalar(arg, index);
          for (auto [k, v] : llvm::enumerate(kept)) {
            bool isKey = llvm::is_contained(keys, k);
            if (oneChunk) { // an inactive slot's lane is slot 0's already
              emitters.back()->mapScalar(v, isKey ? waitingKeys[k] : slotValue(k, i, slotLanes[i]));
              continue;
            }
            Value own = slot(state, k, i), firstSlot = slot(state, k, 0);
            emitters.back()->mapScalar(
                v, fromSlot(k, !active || isKey ? (isKey ? firstSlot : own)
                                                : Value(arith::SelectOp::create(b, loc, active, own, firstSlot))));
          }
          actives.push_back(active);
        }
        finishPoints(b, *plan, op, emitters, actives);
      };
      // A batch of at most kNarrowBatch points (a token routed to few experts: Mixtral's top-2) runs a loop
      // that loads and multiplies only that many rows; a slot that is not active still costs its
      // instructions, guarded. Each point's sum adds the same terms in the same order either way.
      if (slots <= kNarrowBatch) {
        runBatch(slots);
      } else {
        auto narrow = scf::IfOp::create(
            b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, pending, cst(kNarrowBatch)),
            /*withElseRegion=*/true);
        OpBuilder::InsertionGuard side(b);
        b.setInsertionPointToStart(narrow.thenBlock());
        runBatch(kNarrowBatch);
        b.setInsertionPointToStart(narrow.elseBlock());
        runBatch(slots);
      }
    }
    // A live point takes the first free slot.
    Value base = arith::SelectOp::create(b, loc, flush, cst(0), pending);
    SmallVector<Value> yielded{
        rest, arith::SelectOp::create(b, loc, live, arith::AddIOp::create(b, loc, base, cst(1)), base)};
    if (oneChunk) {
      Value stillWaiting = arith::SelectOp::create(b, loc, flush, zero32, waitingLanes);
      Value bit = arith::SelectOp::create(b, loc, live, arith::ShLIOp::create(b, loc, one32, from), zero32);
      yielded.push_back(arith::OrIOp::create(b, loc, stillWaiting, bit));
    }
    for (size_t k = 0; k < kept.size() && !oneChunk; ++k) {
      Value entering = toSlot(k, pointValues[k]);
      for (int64_t i = 0; i < slots; ++i) {
        Value here =
            arith::AndIOp::create(b, loc, live, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, base, cst(i)));
        yielded.push_back(arith::SelectOp::create(b, loc, here, entering, slot(state, k, i)));
      }
    }
    scf::YieldOp::create(b, loc, yielded);
  }
  SmallVector<Value> next(stepLoop.getResults().drop_front().take_front(waiting.size()));
  next.append(scans.carries);
  scf::YieldOp::create(b, loc, next);
}

} // namespace moec::moe
