//===- GroupRowLowering.cpp - GPU: a scatter's group of rows on one block ---===//
//
// A scatter marked moe.row_group (moe-group-rows) runs a block per group of up to 16 members: each lane
// computes one member's row-invariant values, and along the row the warp computes the value once (again
// only where a member's keys change) and stores it to every live member's row, broadcast by shuffles.
//===----------------------------------------------------------------------===//
#include "moec/contracts/Schedule.h"
#include "Transforms/BodyEmitter.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace moec::moe {

Value emitGroupCount(OpBuilder &b, DomainOp op) {
  Location loc = op.op()->getLoc();
  Value groups = emitRunCount(b, loc, op.bounds()[op.bounds().size() - 2], kRowGroupMembers);
  for (Value bound : op.bounds().drop_back(2))
    groups = arith::MulIOp::create(b, loc, groups, bound);
  return groups;
}

namespace {
/// An integer, index or boolean as the 32-bit words a shuffle moves, and back. An index cast from an i32
/// travels as that i32.
struct WarpWords {
  /// `orig`'s emitted value `v` as words.
  static SmallVector<Value> pack(OpBuilder &b, Location loc, Value orig, const IRMapping &emitted) {
    if (auto cast = orig.getDefiningOp<arith::IndexCastOp>(); cast && cast.getIn().getType().isInteger(32))
      return {emitted.lookupOrDefault(cast.getIn())};
    Value v = emitted.lookupOrDefault(orig);
    if (v.getType().isIndex())
      v = arith::IndexCastOp::create(b, loc, b.getI64Type(), v);
    unsigned bits = v.getType().getIntOrFloatBitWidth();
    if (bits < 32)
      return {arith::ExtUIOp::create(b, loc, b.getI32Type(), v)};
    if (bits == 32)
      return {v};
    return {arith::TruncIOp::create(b, loc, b.getI32Type(), v),
            arith::TruncIOp::create(b, loc, b.getI32Type(),
                                    arith::ShRUIOp::create(b, loc, v, arith::ConstantIntOp::create(b, loc, 32, 64)))};
  }

  /// The value of `orig`'s type that pack gave as `words`, taken from their front.
  static Value unpack(OpBuilder &b, Location loc, Value orig, ArrayRef<Value> &words) {
    auto take = [&] {
      Value w = words.front();
      words = words.drop_front();
      return w;
    };
    Type type = orig.getType();
    if (auto cast = orig.getDefiningOp<arith::IndexCastOp>(); cast && cast.getIn().getType().isInteger(32))
      return arith::IndexCastOp::create(b, loc, type, take());
    unsigned bits = type.isIndex() ? 64 : type.getIntOrFloatBitWidth();
    if (bits < 32)
      return arith::TruncIOp::create(b, loc, type, take());
    if (bits == 32)
      return take();
    Value low = arith::ExtUIOp::create(b, loc, b.getI64Type(), take());
    Value high = arith::ShLIOp::create(b, loc, arith::ExtUIOp::create(b, loc, b.getI64Type(), take()),
                                       arith::ConstantIntOp::create(b, loc, 32, 64));
    Value wide = arith::OrIOp::create(b, loc, low, high);
    return type.isIndex() ? Value(arith::IndexCastOp::create(b, loc, type, wide)) : wide;
  }
};
} // namespace

void emitGroupRow(OpBuilder &b, DomainOp op, Value group, Value lane, Value warp, int64_t warps,
                  int64_t vectorAlignment) {
  constexpr int64_t kWarp = kWarpSize, kMembers = kRowGroupMembers;
  Location loc = op.op()->getLoc();
  ScheduleAttr schedule = op.schedule();
  VaryingAnalysis analysis(op);
  int64_t width = analysis.blocker() ? 1 : schedule.getVector();
  auto write = cast<WriteOp>(op.body().getTerminator());
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  auto i32 = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 32); };
  Value members = op.bounds()[op.bounds().size() - 2], inner = op.bounds().back();
  Value runs = emitRunCount(b, loc, members, kRowGroupMembers);
  SmallVector<Value> outer =
      unflattenRow(b, loc, arith::DivUIOp::create(b, loc, group, runs), op.bounds().drop_back(2));
  SmallVector<Value> keys;
  for (Operation &top : op.body().without_terminator())
    if (top.hasAttr(kGroupKeyAttr))
      keys.push_back(top.getResult(0));

  // This group's members [first, end): its run of kMembers, or with keys the run moved to start where a run of
  // equal keys starts (emitKeyRunBounds; at most 31 members). Lane i computes the row-invariant values of
  // member first + i, or with keys of member start - 1 + i, whose keys then say where the run starts and
  // ends (member first is at lane first - start + 1); its row-invariant ops that only store (marks, check
  // reports) run after that, for the group's own members only. Lanes past the last member compute that one
  // again (its checks and marks store the same values again), so that no lane runs a member that does not
  // exist.
  Value start = arith::MulIOp::create(b, loc, arith::RemUIOp::create(b, loc, group, runs), cst(kMembers));
  Value first = start;
  Value end = arith::MinUIOp::create(b, loc, arith::AddIOp::create(b, loc, start, cst(kMembers)), members);
  bool keyed = !keys.empty() && llvm::all_of(keys, [](Value k) { return k.getType().isIntOrIndex(); });
  Value probedMember, member;
  if (keyed) {
    probedMember = arith::SubIOp::create(b, loc, arith::AddIOp::create(b, loc, start, lane), cst(1));
    member = arith::MinUIOp::create(b, loc, probedMember, arith::SubIOp::create(b, loc, members, cst(1)));
  } else {
    Value last = arith::SubIOp::create(b, loc, end, cst(1)); // end >= 1: start's member exists
    member = arith::MinUIOp::create(b, loc, arith::AddIOp::create(b, loc, start, lane), last);
  }
  SmallVector<Value> rowIndices(outer);
  rowIndices.push_back(member);
  BodyEmitter prologueEmitter(b, op, analysis, 1, schedule.getUnroll(), vectorAlignment, {}, Value(),
                              Part::RowPrologue);
  SmallVector<Operation *> storesOnly; // row-invariant ops without results that write: after the bounds
  if (keyed)
    for (Operation &top : op.body().without_terminator())
      if (top.hasAttr(kRowInvariantAttr) && top.getNumResults() == 0 && !isMemoryEffectFree(&top)) {
        storesOnly.push_back(&top);
        prologueEmitter.skip(&top);
      }
  const IRMapping &prologue = prologueEmitter.emitRowPrologue(rowIndices);
  Value firstLane = cst(0);
  if (keyed) {
    SmallVector<Value> laneKeys;
    for (Value key : keys)
      laneKeys.push_back(prologue.lookupOrDefault(key));
    Value probed = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, probedMember, members);
    KeyAlignedRun run = emitKeyRunBounds(b, loc, start, members, kMembers, probedMember, probed, laneKeys);
    std::tie(first, end) = std::pair(run.first, run.end);
    firstLane = arith::AddIOp::create(b, loc, arith::SubIOp::create(b, loc, first, start), cst(1));
    Value own = arith::AndIOp::create(b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, member, first),
                                      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, member, end));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(scf::IfOp::create(b, loc, own, /*withElseRegion=*/false).thenBlock());
    for (Operation *top : storesOnly)
      prologueEmitter.emitOpAt(*top);
  }
  // What each member's store needs, as words a shuffle can broadcast: its guard, then its row.
  Value guard = write.getGuard() ? prologue.lookupOrDefault(write.getGuard())
                                 : Value(arith::ConstantIntOp::create(b, loc, 1, 1));
  SmallVector<Value> words{arith::ExtUIOp::create(b, loc, b.getI32Type(), guard)};
  for (Value index : write.getIndices().drop_back()) {
    SmallVector<Value> packed = WarpWords::pack(b, loc, index, prologue);
    words.append(packed.begin(), packed.end());
  }
  SmallVector<Value> keyWords;
  for (Value key : keys) {
    SmallVector<Value> packed = WarpWords::pack(b, loc, key, prologue);
    keyWords.append(packed.begin(), packed.end());
  }
  Value count = arith::SubIOp::create(b, loc, end, first);

  // Along the row, the warps take 32 vectors of w elements at a time round robin, a vector per lane. Every
  // lane of a warp runs every trip of its warp (one past the row's end computes and stores nothing) so
  // that the whole warp takes part in each shuffle.
  auto alongRow = [&](Value begin, Value end, int64_t w) {
    Value first = arith::AddIOp::create(b, loc, begin, arith::MulIOp::create(b, loc, warp, cst(kWarp * w)));
    auto loop = scf::ForOp::create(b, loc, first, end, cst(kWarp * w * warps));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value h = arith::AddIOp::create(b, loc, loop.getInductionVar(), arith::MulIOp::create(b, loc, lane, cst(w)));
    Value inRow = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, h, end);
    Type element = write.getValue().getType();
    Type valueType = w > 1 ? Type(VectorType::get({w}, element)) : element;
    // The written value at h, for the member whose keys are `keyValues` (the emitted values of `keys`).
    auto computeValue = [&](ArrayRef<Value> keyValues) -> Value {
      auto compute = scf::IfOp::create(b, loc, TypeRange{valueType}, inRow, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard inside(b);
      b.setInsertionPointToStart(compute.thenBlock());
      BodyEmitter emitter(b, op, analysis, w, schedule.getUnroll(), vectorAlignment, {}, Value(),
                          Part::AfterPrologue);
      emitter.startFrom(prologueEmitter);
      for (auto [key, value] : llvm::zip(keys, keyValues))
        emitter.mapScalar(key, value);
      SmallVector<Value> indices(rowIndices);
      indices.push_back(h);
      scf::YieldOp::create(b, loc, emitter.emitWrittenValue(indices));
      emitter.flushUnrolls();
      b.setInsertionPointToStart(compute.elseBlock());
      scf::YieldOp::create(b, loc, arith::ConstantOp::create(b, loc, b.getZeroAttr(valueType)).getResult());
      return compute.getResult(0);
    };
    // With keys, the loop over the members carries the keys' words and the value of the member before.
    Value unkeyedValue = keys.empty() ? computeValue({}) : Value();
    SmallVector<Value> carried;
    if (!keys.empty()) {
      carried.assign(keyWords.size(), i32(0));
      carried.push_back(arith::ConstantOp::create(b, loc, b.getZeroAttr(valueType)).getResult());
    }
    auto each = scf::ForOp::create(b, loc, cst(0), count, cst(1), carried);
    b.setInsertionPointToStart(each.getBody());
    Value from = arith::IndexCastOp::create(b, loc, b.getI32Type(),
                                            arith::AddIOp::create(b, loc, firstLane, each.getInductionVar()));
    auto broadcast = [&](Value word) {
      return gpu::ShuffleOp::create(b, loc, word, from, i32(kWarp), gpu::ShuffleMode::IDX).getShuffleResult();
    };
    Value value = unkeyedValue;
    SmallVector<Value> gotKeys;
    if (!keys.empty()) {
      // A member whose keys equal the member before's writes the same value (the first member computes it).
      Value changed = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, each.getInductionVar(), cst(0));
      for (auto [word, before] : llvm::zip(keyWords, each.getRegionIterArgs())) {
        gotKeys.push_back(broadcast(word));
        changed = arith::OrIOp::create(
            b, loc, changed, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, gotKeys.back(), before));
      }
      auto reload = scf::IfOp::create(b, loc, TypeRange{valueType}, changed, /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard inside(b);
        b.setInsertionPointToStart(reload.thenBlock());
        ArrayRef<Value> rest(gotKeys);
        SmallVector<Value> keyValues;
        for (Value key : keys)
          keyValues.push_back(WarpWords::unpack(b, loc, key, rest));
        scf::YieldOp::create(b, loc, computeValue(keyValues));
        b.setInsertionPointToStart(reload.elseBlock());
        scf::YieldOp::create(b, loc, each.getRegionIterArgs().back());
      }
      value = reload.getResult(0);
    }
    SmallVector<Value> got;
    for (Value word : words)
      got.push_back(broadcast(word));
    Value live = arith::AndIOp::create(
        b, loc, inRow, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, got[0], i32(0)));
    {
      OpBuilder::InsertionGuard inside(b);
      b.setInsertionPointToStart(scf::IfOp::create(b, loc, live, /*withElseRegion=*/false).thenBlock());
      ArrayRef<Value> rest = ArrayRef<Value>(got).drop_front();
      SmallVector<Value> at;
      for (Value index : write.getIndices().drop_back())
        at.push_back(WarpWords::unpack(b, loc, index, rest));
      at.push_back(h);
      BodyEmitter(b, op, analysis, w, schedule.getUnroll(), vectorAlignment).storeWrittenValue(value, at);
    }
    if (!keys.empty()) {
      SmallVector<Value> next(gotKeys);
      next.push_back(value);
      scf::YieldOp::create(b, loc, next);
    }
  };
  Value mainEnd = arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, inner, cst(width)), cst(width));
  if (width > 1)
    alongRow(cst(0), mainEnd, width);
  APInt innerValue;
  bool whole = width > 1 && matchPattern(inner, m_ConstantInt(&innerValue)) && innerValue.getSExtValue() % width == 0;
  if (!whole) // the elements a vector does not cover (all of them when width is 1), one at a time
    alongRow(width > 1 ? mainEnd : cst(0), inner, 1);
  prologueEmitter.flushUnrolls();
}

} // namespace moec::moe
