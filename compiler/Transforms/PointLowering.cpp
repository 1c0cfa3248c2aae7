//===- PointLowering.cpp - Point kernels: a dot product per domain point ---===//
//
// A domain that reduces along a contiguous dim runs point by point: on the CPU a range of points per
// thread (of a domain marked by moe-compact-predicated-points, only each row's listed live points), their
// dot products interleaved so that their gathered rows stream together; on the GPU a warp
// per point, its lanes splitting the reduction, or a warp per row of points whose dot products share a row
// (moe-group-points), up to 8 of them at a time; on Ascend a point at a time through UB buffers.
//===----------------------------------------------------------------------===//
#include "moec/contracts/Schedule.h"
#include "BodyEmitter.h"

#include "llvm/ADT/MapVector.h"

using namespace mlir;

namespace moec::moe {

Value emitPointCount(OpBuilder &b, DomainOp op) {
  return arith::MulIOp::create(b, op.op()->getLoc(), emitRowCount(b, op), op.bounds().back());
}

void emitStagedPoint(OpBuilder &b, DomainOp op, Value point, int64_t reductionWidth, StagedRow &staged) {
  Location loc = op.op()->getLoc();
  VaryingAnalysis analysis(op);
  SmallVector<Value> indices = unflattenRow(b, loc, point, op.bounds());
  BodyEmitter emitter(b, op, analysis, 1, op.schedule().getUnroll(), /*maxAlignment=*/1,
                      ReductionSplit{reductionWidth, 1, Value()});
  RowTarget target;
  target.staged = &staged;
  emitter.setRowTarget(target);
  emitter.emitElement(indices);
  IRMapping pointIndices;
  for (auto [arg, index] : llvm::zip(op.body().getArguments(), indices))
    pointIndices.map(arg, index);
  staged.copyOut(b, pointIndices);
}

bool runsPerPoint(DomainOp op) { return !isVectorizable(op) && contiguousReductionOf(op); }

namespace {
/// Points of a point kernel whose reductions wait to run together (splitSums): as many gathered
/// rows stream at once per thread (4 read a gathered row set at ~2x the bandwidth of 1 on a 2-core EPYC).
constexpr int64_t kInterleavedPoints = 4;
/// Only rows of at least a page stream: shorter dot products gain nothing from waiting in slots, which
/// costs (H = 64: 1.7x the time of the plain point loop, A3 at DeepSeek-V3's E).
constexpr int64_t kInterleavedRowBytes = 4096;

/// How a point kernel's body splits around its dot product for interleaving (emitPointRange):
///   before:  the top-level ops before `carrier`, run for each point in order;
///   carrier: the sum itself, or an scf.if whose then-block starts with it (the point is live when the
///            condition holds; its else-block runs at once for the others);
///   after:   the rest of the then-block (pure arithmetic on the sum), then the top-level ops after the
///            carrier and the write, run for the live points once their sums are known.
/// `saved` are the values of `before` (and the point's indices) that the sum or `after` use: kept per
/// pending point in small stack arrays.
struct InterleavedPoints {
  SumOp sum;
  Operation *carrier = nullptr;
  scf::IfOp carrierIf; // null when the carrier is the sum
  SmallVector<Value> saved;
};

/// The split, or nothing when the body does not have that shape: the sum's rows are shorter than
/// `minRowBytes` or not of a constant length;
/// the then-block does more than pure arithmetic after the sum; a saved value is not a scalar; or what
/// runs late reads memory that `before` writes (it would see later points' writes).
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

/// The waiting points of `plan` (emitters with their saved values mapped): their sums together, then each
/// one's late ops and write, under its flag in `actives` where that is given (see splitSums).
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

/// A point that is not live (its carrier's condition false), at `indices`: the carrier's else-block and what
/// comes after the carrier, its write included, now (`early` emitted the ops before the carrier).
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

/// A domain marked by moe-compact-predicated-points: the list of a row's live points, the count that is a
/// live point's position in it, and what the other points write.
struct LivePoints {
  CompactOp list;
  FoldOp rank;
  TypedAttr dead;
};

std::optional<LivePoints> livePoints(DomainOp op) {
  auto dead = op.op()->getAttrOfType<TypedAttr>(kDeadValueAttr);
  if (!dead)
    return std::nullopt;
  LivePoints points{nullptr, nullptr, dead};
  for (Operation &o : op.body()) {
    if (auto list = dyn_cast<CompactOp>(&o); list && list->hasAttr(kLiveListAttr))
      points.list = list;
    if (auto rank = dyn_cast<FoldOp>(&o); rank && rank->hasAttr(kLiveRankAttr))
      points.rank = rank;
  }
  if (!points.list || !points.rank)
    return std::nullopt;
  return points;
}

/// `block` without the yield its builder may have added (ops with no results get one): the caller ends it.
Block *withoutTerminator(Block *block) {
  if (!block->empty() && block->back().hasTrait<OpTrait::IsTerminator>())
    block->back().erase();
  return block;
}

/// Emits, for each point of [begin, end) in order, `visit(indices, rank, iterArgs)`, which ends its block
/// with the scf.yield of the next iteration values; returns the last ones. With `live`, only each row's
/// listed points, `rank` their position in the list, after the dead value is stored to the row's elements
/// in the range (a range may start or end within a row: it visits the listed points inside it).
using PointVisitor = function_ref<void(ValueRange indices, Value rank, ValueRange iterArgs)>;
ValueRange forEachPoint(OpBuilder &b, DomainOp op, Value begin, Value end, ValueRange inits,
                        std::optional<LivePoints> live, int64_t compactLanes, PointVisitor visit) {
  Location loc = op.op()->getLoc();
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  if (!live) {
    auto loop = scf::ForOp::create(b, loc, begin, end, cst(1), inits);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(withoutTerminator(loop.getBody()));
    visit(unflattenRow(b, loc, loop.getInductionVar(), op.bounds()), Value(), loop.getRegionIterArgs());
    return loop.getResults();
  }
  Value width = op.bounds().back();
  Value firstRow = arith::DivUIOp::create(b, loc, begin, width);
  Value endRow = arith::CeilDivUIOp::create(b, loc, end, width);
  auto rows = scf::ForOp::create(b, loc, firstRow, endRow, cst(1), inits);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(withoutTerminator(rows.getBody()));
  Value row = rows.getInductionVar();
  Value rowStart = arith::MulIOp::create(b, loc, row, width);
  Value lo = arith::MaxSIOp::create(b, loc, arith::SubIOp::create(b, loc, begin, rowStart), cst(0));
  Value hi = arith::MinSIOp::create(b, loc, arith::SubIOp::create(b, loc, end, rowStart), width);
  SmallVector<Value> indices = unflattenRow(b, loc, row, op.bounds().drop_back());
  {
    auto fill = scf::ForOp::create(b, loc, lo, hi, cst(1));
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(fill.getBody());
    SmallVector<Value> at(indices);
    at.push_back(fill.getInductionVar());
    memref::StoreOp::create(b, loc, arith::ConstantOp::create(b, loc, live->dead), op.output(), at);
  }
  VaryingAnalysis analysis(op);
  BodyEmitter listEmitter(b, op, analysis, 1, op.schedule().getUnroll(), /*maxAlignment=*/1);
  RowTarget target;
  target.compactLanes = compactLanes;
  listEmitter.setRowTarget(target);
  listEmitter.mapIndices(indices);
  listEmitter.emitOpAt(*live->list);
  Value list = listEmitter.value(live->list.getList());
  auto points =
      scf::ForOp::create(b, loc, cst(0), listEmitter.value(live->list.getCount()), cst(1), rows.getRegionIterArgs());
  {
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(withoutTerminator(points.getBody()));
    Value rank = points.getInductionVar();
    Value e = arith::IndexCastOp::create(b, loc, b.getIndexType(), memref::LoadOp::create(b, loc, list, rank));
    Value inside = arith::AndIOp::create(b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, e, lo),
                                         arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, e, hi));
    auto ifInside = scf::IfOp::create(b, loc, points.getResultTypes(), inside, /*withElseRegion=*/true);
    scf::YieldOp::create(b, loc, ifInside.getResults());
    b.setInsertionPointToStart(withoutTerminator(ifInside.elseBlock()));
    scf::YieldOp::create(b, loc, points.getRegionIterArgs());
    b.setInsertionPointToStart(withoutTerminator(ifInside.thenBlock()));
    SmallVector<Value> at(indices);
    at.push_back(e);
    visit(at, rank, points.getRegionIterArgs());
  }
  scf::YieldOp::create(b, loc, points.getResults());
  listEmitter.flushUnrolls();
  return rows.getResults();
}

void emitPointRangeWith(OpBuilder &b, DomainOp op, Value begin, Value end, int64_t reductionWidth, bool interleave,
                        BodyEmitter::RowStoreTarget rowStores, int64_t compactLanes) {
  Location loc = op.op()->getLoc();
  VaryingAnalysis analysis(op);
  int64_t unroll = op.schedule().getUnroll();
  ReductionSplit split{reductionWidth, 1, Value()};
  std::optional<LivePoints> live = livePoints(op);
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  auto newEmitter = [&] {
    auto emitter = std::make_unique<BodyEmitter>(b, op, analysis, 1, unroll, /*maxAlignment=*/1, split);
    emitter->rowStores = rowStores;
    return emitter;
  };
  // A point visited from the row's list: the list is the row's, and its position is the count.
  auto atPoint = [&](BodyEmitter &emitter, ValueRange indices, Value rank) {
    emitter.mapIndices(indices);
    if (!live)
      return;
    emitter.skip(live->list);
    emitter.skip(live->rank);
    emitter.mapScalar(live->rank.getResult(), rank);
  };
  std::optional<InterleavedPoints> plan = interleave && reductionWidth > 0 ? interleavedPoints(op, kInterleavedRowBytes) : std::nullopt;
  if (!plan) {
    forEachPoint(b, op, begin, end, {}, live, compactLanes, [&](ValueRange indices, Value rank, ValueRange) {
      std::unique_ptr<BodyEmitter> emitter = newEmitter();
      atPoint(*emitter, indices, rank);
      emitter->emitElement(indices);
      scf::YieldOp::create(b, loc);
      emitter->flushUnrolls();
    });
    return;
  }
  // One slot array per saved value, kInterleavedPoints entries each.
  SmallVector<Value> slots;
  {
    OpBuilder entry = builderAtFunctionEntry(b);
    for (Value v : plan->saved)
      slots.push_back(memref::AllocaOp::create(entry, loc, MemRefType::get({kInterleavedPoints}, v.getType())));
  }
  Block &body = op.body();
  // The live points in slots `at`: their sums together, then each one's late ops and write.
  auto finish = [&](ArrayRef<Value> at) {
    SmallVector<std::unique_ptr<BodyEmitter>> emitters;
    for (Value slot : at) {
      emitters.push_back(newEmitter());
      for (auto [v, array] : llvm::zip(plan->saved, slots))
        emitters.back()->mapScalar(v, memref::LoadOp::create(b, loc, array, ValueRange{slot}));
    }
    finishPoints(b, *plan, op, emitters, {});
  };
  // Points in order; a live one waits in the next free slot, and a full set of slots runs together.
  auto queuePoint = [&](ValueRange indices, Value rank, ValueRange iterArgs) {
    Value pending = iterArgs[0];
    std::unique_ptr<BodyEmitter> early = newEmitter();
    for (Operation *o = plan->carrier; o; o = o->getNextNode())
      early->skip(o);
    atPoint(*early, indices, rank);
    early->emitOpsOf(body);
    Value isLive =
        plan->carrierIf ? early->value(plan->carrierIf.getCondition()) : arith::ConstantIntOp::create(b, loc, 1, 1);
    auto ifLive = scf::IfOp::create(b, loc, b.getIndexType(), isLive, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifLive.thenBlock());
    for (auto [v, array] : llvm::zip(plan->saved, slots))
      memref::StoreOp::create(b, loc, early->value(v), array, ValueRange{pending});
    Value next = arith::AddIOp::create(b, loc, pending, cst(1));
    Value full = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, next, cst(kInterleavedPoints));
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(scf::IfOp::create(b, loc, full, /*withElseRegion=*/false).thenBlock());
      SmallVector<Value> all;
      for (int64_t i = 0; i < kInterleavedPoints; ++i)
        all.push_back(cst(i));
      finish(all);
    }
    scf::YieldOp::create(b, loc, ValueRange{arith::SelectOp::create(b, loc, full, cst(0), next)});
    b.setInsertionPointToStart(ifLive.elseBlock());
    emitDeadPoint(*plan, op, *early, indices);
    scf::YieldOp::create(b, loc, ValueRange{pending});
    b.setInsertionPointAfter(ifLive);
    scf::YieldOp::create(b, loc, ValueRange{ifLive.getResult(0)});
    early->flushUnrolls();
  };
  ValueRange waiting = forEachPoint(b, op, begin, end, ValueRange{cst(0)}, live, compactLanes, queuePoint);
  // The points left waiting, one at a time.
  auto rest = scf::ForOp::create(b, loc, cst(0), waiting[0], cst(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(rest.getBody());
  finish({rest.getInductionVar()});
}

} // namespace

Value shuffleWarp(OpBuilder &b, Location loc, Value v, Value arg, gpu::ShuffleMode mode) {
  Type type = v.getType();
  if (type.isIndex()) // as an i64, and back
    return arith::IndexCastOp::create(
        b, loc, type, shuffleWarp(b, loc, arith::IndexCastOp::create(b, loc, b.getI64Type(), v), arg, mode));
  unsigned bits = type.getIntOrFloatBitWidth();
  Type i32 = b.getI32Type();
  auto shuffle = [&](Value word) {
    return gpu::ShuffleOp::create(b, loc, word, arg, arith::ConstantIntOp::create(b, loc, 32, 32), mode)
        .getShuffleResult();
  };
  if (type.isF32() || type.isInteger(32))
    return shuffle(v);
  Type integer = b.getIntegerType(bits);
  Value word = isa<FloatType>(type) ? Value(arith::BitcastOp::create(b, loc, integer, v)) : v;
  Value moved;
  if (bits < 32) {
    moved = arith::TruncIOp::create(b, loc, integer, shuffle(arith::ExtUIOp::create(b, loc, i32, word)));
  } else {
    Value shift = arith::ConstantIntOp::create(b, loc, 32, 64);
    Value low = shuffle(arith::TruncIOp::create(b, loc, i32, word));
    Value high = shuffle(arith::TruncIOp::create(b, loc, i32, arith::ShRUIOp::create(b, loc, word, shift)));
    moved = arith::OrIOp::create(b, loc, arith::ExtUIOp::create(b, loc, integer, low),
                                 arith::ShLIOp::create(b, loc, arith::ExtUIOp::create(b, loc, integer, high), shift));
  }
  return isa<FloatType>(type) ? Value(arith::BitcastOp::create(b, loc, type, moved)) : moved;
}

void emitPointRange(OpBuilder &b, DomainOp op, Value begin, Value end, int64_t reductionWidth, bool interleave,
                    bool streamingStores, int64_t compactLanes) {
  // Fused row stores (moe.row_store) write vectors of the partial sums' width: where their outputs are
  // aligned to what those vectors can promise and large, they are non-temporal (a branch per store on a
  // condition tested once, not a second copy of the range).
  Location loc = op.op()->getLoc();
  SetVector<Value> outputs;
  op.op()->walk([&](RowStoreOp store) { outputs.insert(store.getOutput()); });
  int64_t alignment = kMaxNontemporalAlignment;
  for (Value output : outputs)
    alignment = std::min(alignment, vectorAccessAlignment(output, reductionWidth, kMaxNontemporalAlignment));
  if (!streamingStores || outputs.empty() || reductionWidth <= 1 || alignment < 16)
    return emitPointRangeWith(b, op, begin, end, reductionWidth, interleave, {}, compactLanes);
  Value streaming;
  for (Value output : outputs) {
    Value ok = emitStreamingCondition(b, loc, output, alignment);
    streaming = streaming ? Value(arith::AndIOp::create(b, loc, streaming, ok)) : ok;
  }
  emitPointRangeWith(b, op, begin, end, reductionWidth, interleave, {true, alignment, streaming}, compactLanes);
}

void emitWarpPoint(OpBuilder &b, DomainOp op, Value point, Value lane, int64_t lanes, int64_t vectorAlignment,
                   bool loadsInFlight) {
  Location loc = op.op()->getLoc();
  ScheduleAttr schedule = op.schedule();
  VaryingAnalysis analysis(op);
  SmallVector<Value> indices = unflattenRow(b, loc, point, op.bounds());
  Value leader = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                       arith::ConstantIndexOp::create(b, loc, 0));
  ReductionSplit split{schedule.getVector(), lanes, lane, loadsInFlight};
  BodyEmitter emitter(b, op, analysis, 1, schedule.getUnroll(), vectorAlignment, split, leader);
  if (lanes == kWarpSize)
    emitter.splitFoldsOver(lane);
  emitter.emitElement(indices);
}

bool pointsCanInterleave(DomainOp op, int64_t minRowBytes) { return interleavedPoints(op, minRowBytes).has_value(); }

Value emitPointRowCount(OpBuilder &b, DomainOp op) {
  if (op.bounds().size() > 1)
    return emitRowCount(b, op);
  return emitRunCount(b, op.op()->getLoc(), op.bounds().front(), kPointRunLength);
}

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
} // namespace

void emitWarpPointRow(OpBuilder &b, DomainOp op, Value row, Value lane, int64_t vectorAlignment, bool loadsInFlight) {
  constexpr int64_t kSlots = kWarpInterleavedPoints, kWarpLanes = kWarpSize, kNarrowBatch = 2;
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
  // them), in kSlots slots; the row's indices are the same for all. The keys (moe.group_key) are the same
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
  SmallVector<Value> waiting{cst(0)};
  if (!oneChunk)
    for (Value v : kept)
      waiting.append(kSlots, zero(v.getType()));
  auto slot = [&](ValueRange state, size_t k, int64_t i) { return state[1 + k * kSlots + i]; };

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
      return oneChunk ? laneValue(b, loc, ifPoint.getResult(1 + k), laneOfSlot) : slot(state, k, i);
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
    Value full = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, pending, cst(kSlots));
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
                                            ReductionSplit{schedule.getVector(), kWarpSize, lane, loadsInFlight}, leader));
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
            emitters.back()->mapScalar(v, !active || isKey
                                              ? (isKey ? firstSlot : own)
                                              : Value(arith::SelectOp::create(b, loc, active, own, firstSlot)));
          }
          actives.push_back(active);
        }
        finishPoints(b, *plan, op, emitters, actives);
      };
      // A batch of at most kNarrowBatch points (a token routed to few experts: Mixtral's top-2) runs a loop
      // that loads and multiplies only that many rows; a slot that is not active still costs its
      // instructions, guarded. Each point's sum adds the same terms in the same order either way.
      auto narrow = scf::IfOp::create(
          b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, pending, cst(kNarrowBatch)),
          /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard side(b);
        b.setInsertionPointToStart(narrow.thenBlock());
        runBatch(kNarrowBatch);
        b.setInsertionPointToStart(narrow.elseBlock());
        runBatch(kSlots);
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
    for (auto [k, v] : llvm::enumerate(kept))
      for (int64_t i = 0; i < kSlots && !oneChunk; ++i) {
        Value here =
            arith::AndIOp::create(b, loc, live, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, base, cst(i)));
        yielded.push_back(arith::SelectOp::create(b, loc, here, pointValues[k], slot(state, k, i)));
      }
    scf::YieldOp::create(b, loc, yielded);
  }
  SmallVector<Value> next(stepLoop.getResults().drop_front().take_front(waiting.size()));
  next.append(scans.carries);
  scf::YieldOp::create(b, loc, next);
}

} // namespace moec::moe
