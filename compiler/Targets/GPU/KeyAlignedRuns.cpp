//===- KeyAlignedRuns.cpp - GPU: runs of members that start where a key run starts ---===//
//
// A warp (or block) that takes a run of consecutive members sharing work by key (moe-group-points' one-dim
// point runs, moe-group-rows' groups: A3's drop-and-pad slots and the token whose row they read) would,
// with runs of a fixed length, split every key run that crosses a multiple of the length, and each part
// reads the key's row. Here a run starts where a key run starts, so that a key's members stay together.
//===----------------------------------------------------------------------===//
#include "Transforms/BodyEmitter.h"
#include "moec/compiler/Transforms/ErrorPaths.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace moec::moe {

namespace {
/// A start is looked for in this many members from the run's start, and from the next run's: lane l probes
/// member start - 1 + l, and 1 + 2 * window lanes cover both windows and the member before.
int64_t probeWindow(int64_t length) { return std::min<int64_t>(length, 15); }

/// The ops at the top of `body` that `values` come from, or nothing where one of them has a side effect or
/// reads a tensor the kernel writes (a probe of another member's keys must change nothing and race with
/// nothing), or a value is not an op's of the body.
std::optional<SetVector<Operation *>> sideEffectFreeSlice(Block &body, ArrayRef<Value> values) {
  SetVector<Operation *> slice;
  BackwardSliceOptions options;
  options.inclusive = true;
  options.filter = [&](Operation *o) { return o->getBlock() == &body; };
  for (Value v : values) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != &body || failed(getBackwardSlice(def, &slice, options)))
      return std::nullopt;
  }
  for (Operation *o : slice) {
    auto load = dyn_cast<memref::LoadOp>(o);
    if (load ? !viewsReadOnlyTensor(load.getMemRef()) : !isMemoryEffectFree(o))
      return std::nullopt;
  }
  return slice;
}

} // namespace

std::optional<KeyAlignedRun> emitKeyAlignedRun(OpBuilder &b, DomainOp op, ValueRange outer, Value start, Value members,
                                               int64_t length, Value lane, ArrayRef<Value> keys,
                                               int64_t vectorAlignment) {
  Location loc = op.op()->getLoc();
  Block &body = op.body();
  std::optional<SetVector<Operation *>> slice =
      keys.empty() || llvm::any_of(keys, [](Value k) { return !k.getType().isIntOrIndex(); })
          ? std::nullopt
          : sideEffectFreeSlice(body, keys);
  if (!slice)
    return std::nullopt;
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  // Lane l's member start - 1 + l (for run 0's lane 0 it wraps to a huge unsigned index: no member).
  Value member = arith::SubIOp::create(b, loc, arith::AddIOp::create(b, loc, start, lane), cst(1));
  Value probed = arith::AndIOp::create(
      b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, member, members),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, lane, cst(length + probeWindow(length))));
  SmallVector<Type> keyTypes;
  for (Value k : keys)
    keyTypes.push_back(k.getType());
  auto probe = scf::IfOp::create(b, loc, keyTypes, probed, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard inside(b);
    b.setInsertionPointToStart(probe.thenBlock());
    ScheduleAttr schedule = op.schedule();
    VaryingAnalysis analysis(op);
    BodyEmitter keyOps(b, op, analysis, 1, schedule.getUnroll(), vectorAlignment,
                       ReductionSplit{schedule.getVector(), 1, Value()});
    for (Operation &o : body.without_terminator())
      if (!slice->contains(&o))
        keyOps.skip(&o);
    SmallVector<Value> indices(outer);
    indices.push_back(member);
    keyOps.mapIndices(indices);
    keyOps.emitOpsOf(body);
    SmallVector<Value> values;
    for (Value k : keys)
      values.push_back(keyOps.value(k));
    scf::YieldOp::create(b, loc, values);
    b.setInsertionPointToStart(probe.elseBlock());
    SmallVector<Value> zeros;
    for (Type t : keyTypes)
      zeros.push_back(arith::ConstantOp::create(b, loc, b.getZeroAttr(t)));
    scf::YieldOp::create(b, loc, zeros);
  }
  return emitKeyRunBounds(b, loc, start, members, length, member, probed, probe.getResults());
}

KeyAlignedRun emitKeyRunBounds(OpBuilder &b, Location loc, Value start, Value members, int64_t length, Value member,
                               Value probed, ValueRange laneKeys) {
  const int64_t window = probeWindow(length);
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Type i32 = b.getI32Type();
  auto c32 = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, i32, v); };
  Value differs = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, member, cst(0));
  for (Value k : laneKeys) // against the lane before's (lane 0: its own)
    differs = arith::OrIOp::create(b, loc, differs,
                                   arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, k,
                                                         shuffleWarp(b, loc, k, c32(1), gpu::ShuffleMode::UP)));
  Value starts = NVVM::VoteSyncOp::create(b, loc, i32, c32(-1), arith::AndIOp::create(b, loc, probed, differs),
                                          NVVM::VoteSyncKind::ballot);
  // The first start among the members [from, from + window) of the run, else from + window.
  auto firstStart = [&](int64_t from) {
    uint32_t lanesOfWindow = uint32_t((uint64_t(1) << window) - 1) << (from + 1);
    Value within = arith::AndIOp::create(b, loc, starts, c32(int32_t(lanesOfWindow)));
    Value lanes = arith::IndexCastUIOp::create(b, loc, b.getIndexType(), math::CountTrailingZerosOp::create(b, loc, within));
    Value found = arith::SubIOp::create(b, loc, arith::AddIOp::create(b, loc, start, lanes), cst(1));
    Value none = arith::AddIOp::create(b, loc, start, cst(from + window));
    Value any = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, within, c32(0));
    return arith::MinUIOp::create(b, loc, arith::SelectOp::create(b, loc, any, found, none), members).getResult();
  };
  return KeyAlignedRun{firstStart(0), firstStart(length)};
}

} // namespace moec::moe
