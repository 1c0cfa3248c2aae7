//===- CompactLowering.cpp - moe.compact: the live entries of a range, in order ---===//
//
// BodyEmitter's lists: a moe.compact becomes a loop that appends the live indices to a stack array (CPU,
// Ascend), or, on the GPU, a warp-wide ballot that places 32 indices at a time in the warp's part of a
// shared-memory buffer; where the block's warps all run one row, they build one list for the block. A
// moe.compact marked by moe-compress-lists (CPU with AVX-512) tests its mark's count of entries at a time and
// appends their live indices with one compress: C2's rowmap row at E = 256 in 16 steps, not 256 dependent
// selects.
//===----------------------------------------------------------------------===//
#include "moec/contracts/Schedule.h"
#include "BodyEmitter.h"

using namespace mlir;

namespace moec::moe {

namespace {
/// The thread's lane in its warp, its bit in a ballot, and the bits of the lanes below it.
struct LaneBits {
  Value lane, bit, below;
  LaneBits(OpBuilder &b, Location loc) {
    auto i32 = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 32); };
    lane = arith::RemUIOp::create(b, loc, gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x),
                                  arith::ConstantIndexOp::create(b, loc, kWarpSize));
    bit = arith::ShLIOp::create(b, loc, i32(1), arith::IndexCastOp::create(b, loc, b.getI32Type(), lane));
    below = arith::SubIOp::create(b, loc, bit, i32(1));
  }
};

/// The number of set bits of `bits` (i32), as an index.
Value countBits(OpBuilder &b, Location loc, Value bits) {
  return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), math::CtPopOp::create(b, loc, bits));
}
} // namespace

void BodyEmitter::emitCompact(CompactOp compact) {
  if (onGpu)
    return emitWarpCompact(compact);
  Location loc = compact.getLoc();
  OpBuilder entry = atFunctionEntry();
  Value list = memref::AllocaOp::create(entry, loc, cast<MemRefType>(compact.getList().getType()));
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value bound = get(compact.getBound(), false);
  Value begin = cst(0), count = cst(0);
  auto lanes = compact->getAttrOfType<IntegerAttr>(kCompressLanesAttr);
  if (lanes && !staged)
    if (scf::ForOp steps = emitVectorCompact(compact, list, bound, lanes.getInt())) { // the entries after its whole steps remain
      begin = steps.getUpperBound();
      count = steps.getResult(0);
    }
  scalars.map(compact.getList(), list);
  if (isEqualConstantIntOrValue(begin, bound)) { // a whole number of vector steps: no entry left
    scalars.map(compact.getCount(), count);
    return;
  }
  auto loop = scf::ForOp::create(b, loc, begin, bound, cst(1), ValueRange{count});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Block &predicate = compact.getPredicate().front();
    Value k = loop.getInductionVar(), end = loop.getRegionIterArgs()[0];
    scalars.map(predicate.getArgument(0), k);
    Value live = emitBlock(predicate, false);
    memref::StoreOp::create(b, loc, arith::IndexCastOp::create(b, loc, b.getI32Type(), k), list, ValueRange{end});
    Value next = arith::AddIOp::create(b, loc, end, cst(1));
    scf::YieldOp::create(b, loc, ValueRange{arith::SelectOp::create(b, loc, live, next, end)});
  }
  scalars.map(compact.getCount(), loop.getResult(0));
  pendingUnrolls.push_back(loop);
}

bool compactVectorizes(CompactOp compact) {
  Block &predicate = compact.getPredicate().front();
  return !VaryingAnalysis(predicate.getArgument(0), predicate).blocker();
}

scf::ForOp BodyEmitter::emitVectorCompact(CompactOp compact, Value list, Value bound, int64_t w) {
  Block &predicate = compact.getPredicate().front();
  VaryingAnalysis along(predicate.getArgument(0), predicate);
  if (along.blocker())
    return {};
  Location loc = compact.getLoc();
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value steps = b.createOrFold<arith::MulIOp>(loc, b.createOrFold<arith::DivUIOp>(loc, bound, cst(w)), cst(w));
  auto loop = scf::ForOp::create(b, loc, cst(0), steps, cst(w), ValueRange{cst(0)});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value k = loop.getInductionVar(), end = loop.getRegionIterArgs()[0];
  BodyEmitter lanes(b, domain, along, w, unroll, maxAlignment);
  lanes.scalars = scalars;
  lanes.scalars.map(predicate.getArgument(0), k);
  Value live = lanes.emitBlock(predicate, true);
  lanes.flushUnrolls();
  // The step's indices k, k+1, ..., k+w-1, the live ones packed to the front (LLVM: vpcompressd on AVX-512).
  auto indexType = VectorType::get({w}, b.getI32Type());
  SmallVector<APInt> offsets;
  for (int64_t i = 0; i < w; ++i)
    offsets.push_back(APInt(32, i));
  Value first = vector::BroadcastOp::create(b, loc, indexType, arith::IndexCastOp::create(b, loc, b.getI32Type(), k));
  Value indices = arith::AddIOp::create(b, loc, first,
                                        arith::ConstantOp::create(b, loc, DenseElementsAttr::get(indexType, offsets)));
  Value packed = LLVM::CallIntrinsicOp::create(
                     b, loc, indexType, b.getStringAttr("llvm.experimental.vector.compress"),
                     ValueRange{indices, live, arith::ConstantOp::create(b, loc, b.getZeroAttr(indexType))})
                     .getResult(0);
  vector::StoreOp::create(b, loc, packed, list, ValueRange{end});
  auto maskWord = b.getIntegerType(w);
  Value bits = vector::ExtractOp::create(
      b, loc, vector::BitCastOp::create(b, loc, VectorType::get({1}, maskWord), live), ArrayRef<int64_t>{0});
  Value liveCount = arith::IndexCastUIOp::create(b, loc, b.getIndexType(), math::CtPopOp::create(b, loc, bits));
  scf::YieldOp::create(b, loc, ValueRange{arith::AddIOp::create(b, loc, end, liveCount)});
  pendingUnrolls.push_back(loop);
  return loop;
}

std::pair<Value, Value> BodyEmitter::ballotOfSteps(CompactOp compact, Value k, Value bound) {
  Location loc = compact.getLoc();
  Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, k, bound);
  auto tested = scf::IfOp::create(b, loc, b.getI1Type(), inside, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard branch(b);
    b.setInsertionPointToStart(tested.thenBlock());
    Block &predicate = compact.getPredicate().front();
    scalars.map(predicate.getArgument(0), k);
    scf::YieldOp::create(b, loc, ValueRange{emitBlock(predicate, false)});
    b.setInsertionPointToStart(tested.elseBlock());
    scf::YieldOp::create(b, loc, ValueRange{arith::ConstantIntOp::create(b, loc, 0, 1)});
  }
  Value live = tested.getResult(0);
  Value all = arith::ConstantIntOp::create(b, loc, -1, 32);
  return {live, NVVM::VoteSyncOp::create(b, loc, b.getI32Type(), all, live, NVVM::VoteSyncKind::ballot)};
}

void BodyEmitter::emitWarpCompact(CompactOp compact) {
  ScheduleAttr rows = domain.schedule();
  int64_t length = cast<MemRefType>(compact.getList().getType()).getDimSize(0);
  if (length <= kWarpSize)
    return emitLaneCompact(compact);
  if (part == Part::RowPrologue && rows.getRowsPerBlock() == 1 && rows.getThreads() > kWarpSize && rows.getThreads() % kWarpSize == 0)
    return emitBlockCompact(compact);
  Location loc = compact.getLoc();
  ScheduleAttr schedule = domain.schedule();
  int64_t warps = std::max<int64_t>(1, schedule.getThreads() * schedule.getRowsPerBlock() / kWarpSize);
  Value buffer = sharedBuffer(warps * length, b.getI32Type(), loc);
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  auto i32 = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 32); };
  Value base = warpBase(loc, length);
  LaneBits bits(b, loc);
  Value lane = bits.lane, lanesBelow = bits.below;
  Value bound = get(compact.getBound(), false);
  auto loop = scf::ForOp::create(b, loc, cst(0), bound, cst(kWarpSize), ValueRange{cst(0)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value k = arith::AddIOp::create(b, loc, loop.getInductionVar(), lane);
    auto [live, mask] = ballotOfSteps(compact, k, bound);
    Value end = loop.getRegionIterArgs()[0];
    Value place =
        arith::AddIOp::create(b, loc, end, countBits(b, loc, arith::AndIOp::create(b, loc, mask, lanesBelow)));
    auto store = scf::IfOp::create(b, loc, live, /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard branch(b);
      b.setInsertionPointToStart(store.thenBlock());
      memref::StoreOp::create(b, loc, arith::IndexCastOp::create(b, loc, b.getI32Type(), k), buffer,
                              ValueRange{arith::AddIOp::create(b, loc, base, place)});
    }
    scf::YieldOp::create(b, loc, ValueRange{arith::AddIOp::create(b, loc, end, countBits(b, loc, mask))});
  }
  NVVM::SyncWarpOp::create(b, loc, i32(-1));
  sharedLists[compact.getList()] = {buffer, base};
  scalars.map(compact.getCount(), loop.getResult(0));
}

void BodyEmitter::emitLaneCompact(CompactOp compact) {
  Location loc = compact.getLoc();
  int64_t length = cast<MemRefType>(compact.getList().getType()).getDimSize(0);
  ScheduleAttr schedule = domain.schedule();
  int64_t warps = std::max<int64_t>(1, schedule.getThreads() * schedule.getRowsPerBlock() / kWarpSize);
  Value buffer = sharedBuffer(warps * length, b.getI32Type(), loc);
  Value base = warpBase(loc, length);
  LaneBits bits(b, loc);
  // Lanes past the bound (at least 1: moe-compact-predicated-folds') test the last entry again, inside the
  // range, and are not live. Without a branch around it the test's work dominates the step table's below,
  // which then reads its loads instead of issuing them again (LLVM merges the two).
  Value bound = get(compact.getBound(), false);
  Value entry = arith::MinUIOp::create(b, loc, bits.lane,
                                       arith::SubIOp::create(b, loc, bound, arith::ConstantIndexOp::create(b, loc, 1)));
  Block &predicate = compact.getPredicate().front();
  scalars.map(predicate.getArgument(0), entry);
  Value live = arith::AndIOp::create(b, loc, emitBlock(predicate, false),
                                     arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, bits.lane, bound));
  Value mask = NVVM::VoteSyncOp::create(b, loc, b.getI32Type(), arith::ConstantIntOp::create(b, loc, -1, 32), live,
                                        NVVM::VoteSyncKind::ballot);
  Value place = countBits(b, loc, arith::AndIOp::create(b, loc, mask, bits.below));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(scf::IfOp::create(b, loc, live, /*withElseRegion=*/false).thenBlock());
    memref::StoreOp::create(b, loc, arith::IndexCastOp::create(b, loc, b.getI32Type(), bits.lane), buffer,
                            ValueRange{arith::AddIOp::create(b, loc, base, place)});
  }
  NVVM::SyncWarpOp::create(b, loc, arith::ConstantIntOp::create(b, loc, -1, 32));
  sharedLists[compact.getList()] = {buffer, base};
  laneLists[compact.getList()] = {entry, live, place};
  scalars.map(compact.getCount(), countBits(b, loc, mask));
}

void BodyEmitter::emitBlockCompact(CompactOp compact) {
  Location loc = compact.getLoc();
  int64_t length = cast<MemRefType>(compact.getList().getType()).getDimSize(0);
  int64_t runs = (length + kWarpSize - 1) / kWarpSize;
  int64_t warps = domain.schedule().getThreads() / kWarpSize;
  Value buffer = sharedBuffer(length, b.getI32Type(), loc), ballots = sharedBuffer(runs, b.getI32Type(), loc);
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  auto i32 = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 32); };
  Value tx = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value warp = arith::DivUIOp::create(b, loc, tx, cst(kWarpSize));
  LaneBits bits(b, loc);
  Value lane = bits.lane, laneBit = bits.bit, lanesBelow = bits.below;
  Value bound = get(compact.getBound(), false);
  Value boundRuns = arith::CeilDivUIOp::create(b, loc, bound, cst(kWarpSize));

  // Each warp's runs: their ballots.
  auto tests = scf::ForOp::create(b, loc, warp, boundRuns, cst(warps));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(tests.getBody());
    Value run = tests.getInductionVar();
    Value k = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, run, cst(kWarpSize)), lane);
    Value mask = ballotOfSteps(compact, k, bound).second;
    // Every lane stores the same word: no branch on the lane (one on `lane == 0` once made moe-version-row-loops
    // copy this loop, the ballot into both copies, each run by part of the warp).
    memref::StoreOp::create(b, loc, mask, ballots, ValueRange{run});
  }
  gpu::BarrierOp::create(b, loc);

  // Each warp's runs again: their live indices, after those of the runs before.
  auto place = scf::ForOp::create(b, loc, warp, boundRuns, cst(warps));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(place.getBody());
    Value run = place.getInductionVar();
    auto before = scf::ForOp::create(b, loc, cst(0), run, cst(1), ValueRange{cst(0)});
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(before.getBody());
      Value bits = memref::LoadOp::create(b, loc, ballots, ValueRange{before.getInductionVar()});
      scf::YieldOp::create(
          b, loc, ValueRange{arith::AddIOp::create(b, loc, before.getRegionIterArgs()[0], countBits(b, loc, bits))});
    }
    Value mask = memref::LoadOp::create(b, loc, ballots, ValueRange{run});
    Value live =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, arith::AndIOp::create(b, loc, mask, laneBit), i32(0));
    Value at = arith::AddIOp::create(b, loc, before.getResult(0),
                                     countBits(b, loc, arith::AndIOp::create(b, loc, mask, lanesBelow)));
    auto store = scf::IfOp::create(b, loc, live, /*withElseRegion=*/false);
    b.setInsertionPointToStart(store.thenBlock());
    Value k = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, run, cst(kWarpSize)), lane);
    memref::StoreOp::create(b, loc, arith::IndexCastOp::create(b, loc, b.getI32Type(), k), buffer, ValueRange{at});
  }
  // The list's length: every run's live indices.
  auto total = scf::ForOp::create(b, loc, cst(0), boundRuns, cst(1), ValueRange{cst(0)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(total.getBody());
    Value bits = memref::LoadOp::create(b, loc, ballots, ValueRange{total.getInductionVar()});
    scf::YieldOp::create(
        b, loc, ValueRange{arith::AddIOp::create(b, loc, total.getRegionIterArgs()[0], countBits(b, loc, bits))});
  }
  gpu::BarrierOp::create(b, loc);
  sharedLists[compact.getList()] = {buffer, cst(0)};
  scalars.map(compact.getCount(), total.getResult(0));
}

void BodyEmitter::emitSharedListLoad(memref::LoadOp load) {
  if (Value entry = laneEntries.lookup(load.getMemRef())) // a step table's work for the lane's own entry
    return map(load.getResult(), arith::IndexCastOp::create(b, load.getLoc(), b.getI32Type(), entry).getResult());
  auto [buffer, base] = sharedLists.lookup(load.getMemRef());
  Value at = arith::AddIOp::create(b, load.getLoc(), base, get(load.getIndices()[0], false));
  map(load.getResult(), memref::LoadOp::create(b, load.getLoc(), buffer, ValueRange{at}).getResult());
}

} // namespace moec::moe
