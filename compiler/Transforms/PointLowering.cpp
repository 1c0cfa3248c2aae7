//===- PointLowering.cpp - Point kernels: a dot product per domain point ---===//
//
// A domain that reduces along a contiguous dim runs point by point: on the CPU a range of points per
// thread (of a domain marked by moe-compact-predicated-points, only each row's listed live points), their
// dot products interleaved so that their gathered rows stream together; on the GPU a warp
// per point, its lanes splitting the reduction, or a warp per row of points whose dot products share a row
// (moe-group-points), up to 8 of them at a time; on Ascend a point at a time through UB buffers.
//
// This file: the CPU's range of points, Ascend's staged point and the GPU's warp per point. A warp per row
// of points is in WarpPointRows.cpp, how points' dot products interleave in InterleavedPoints.cpp.
//===----------------------------------------------------------------------===//
#include "moec/contracts/Schedule.h"
#include "InterleavedPoints.h"

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
                        std::optional<LivePoints> live, PointVisitor visit) {
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

} // namespace

void emitPointRange(OpBuilder &b, DomainOp op, Value begin, Value end, int64_t reductionWidth) {
  Location loc = op.op()->getLoc();
  VaryingAnalysis analysis(op);
  int64_t unroll = op.schedule().getUnroll();
  ReductionSplit split{reductionWidth, 1, Value()};
  std::optional<LivePoints> live = livePoints(op);
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  auto newEmitter = [&] {
    auto emitter = std::make_unique<BodyEmitter>(b, op, analysis, 1, unroll, /*maxAlignment=*/1, split);
    emitter->markStreamableStores(); // CPU: the fused row stores' vectors (moe-streaming-stores)
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
  auto together = op.op()->getAttrOfType<IntegerAttr>(kInterleavedPointsAttr);
  std::optional<InterleavedPoints> plan =
      together && reductionWidth > 0 ? interleavedPoints(op, kInterleavedRowBytes) : std::nullopt;
  if (!plan) {
    forEachPoint(b, op, begin, end, {}, live, [&](ValueRange indices, Value rank, ValueRange) {
      std::unique_ptr<BodyEmitter> emitter = newEmitter();
      atPoint(*emitter, indices, rank);
      emitter->emitElement(indices);
      scf::YieldOp::create(b, loc);
      emitter->flushUnrolls();
    });
    return;
  }
  // One slot array per saved value, an entry per point run together.
  int64_t slotCount = together.getInt();
  SmallVector<Value> slots;
  {
    OpBuilder entry = builderAtFunctionEntry(b);
    for (Value v : plan->saved)
      slots.push_back(memref::AllocaOp::create(entry, loc, MemRefType::get({slotCount}, v.getType())));
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
    Value full = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, next, cst(slotCount));
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(scf::IfOp::create(b, loc, full, /*withElseRegion=*/false).thenBlock());
      SmallVector<Value> all;
      for (int64_t i = 0; i < slotCount; ++i)
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
  ValueRange waiting = forEachPoint(b, op, begin, end, ValueRange{cst(0)}, live, queuePoint);
  // The points left waiting, one at a time.
  auto rest = scf::ForOp::create(b, loc, cst(0), waiting[0], cst(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(rest.getBody());
  finish({rest.getInductionVar()});
}

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

void emitWarpPoint(OpBuilder &b, DomainOp op, Value point, Value lane, int64_t lanes, int64_t vectorAlignment) {
  Location loc = op.op()->getLoc();
  ScheduleAttr schedule = op.schedule();
  VaryingAnalysis analysis(op);
  SmallVector<Value> indices = unflattenRow(b, loc, point, op.bounds());
  Value leader = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                       arith::ConstantIndexOp::create(b, loc, 0));
  ReductionSplit split{schedule.getVector(), lanes, lane};
  BodyEmitter emitter(b, op, analysis, 1, schedule.getUnroll(), vectorAlignment, split, leader);
  if (lanes == kWarpSize)
    emitter.splitFoldsOver(lane);
  emitter.emitElement(indices);
}


Value emitPointRowCount(OpBuilder &b, DomainOp op) {
  if (op.bounds().size() > 1)
    return emitRowCount(b, op);
  return emitRunCount(b, op.op()->getLoc(), op.bounds().front(), kPointRunLength);
}

} // namespace moec::moe
