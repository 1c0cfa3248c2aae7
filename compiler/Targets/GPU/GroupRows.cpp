//===- GroupRows.cpp - GPU: rows that write the same values run as one group ---===//
//
// A scatter over (outer..., k, h) whose written value does not depend on k writes the same values to
// the rows of every k: A3 copies token t's gradient row to the permuted row of each of its K slots. Run
// a row per warp, and each of those rows reads the same source row again (K reads of it per token). This
// pass marks such a scatter `moe.row_group`; moe-lower-to-gpu then runs a block per group (outer..., and
// up to 16 consecutive k), its warps splitting the row: a warp's lanes compute the members' row-invariant
// values (each lane one k), and along the row the warp computes the value once and stores it to each live
// member's row, the row and guard broadcast by shuffles.
//
// The value may also depend on k through a few row-invariant integers, its keys (marked `moe.group_key`):
// A3's drop-and-pad scatter over slots i copies the gradient row of token permute_token_id[i], and the
// slots of one token are consecutive (the forward op sorts them by token). Along the row the warp then
// computes the value again only for a member whose keys differ from the member before's. Any order of
// the keys gives the same results; a sorted one reads each source row about once per group.
//
// The value must be computable without the member's guard: a value MoeGen computed under the guard's own
// condition (`scf.if %live { load x[t, h] } else { 0 }`, the write guarded by `%live and ...`) is replaced
// by the load itself when what the branch does cannot fault (loads whose indices are domain indices within
// their dims, pure arithmetic): where the write happens the two are equal. A value that still depends on
// the guard takes it as a key.
// GPU only: a CPU thread reads the repeated row from its L1, and its stores stream.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"
#include "moec/contracts/Schedule.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "moe-group-rows"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEGROUPROWS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// Whether `cond` holds wherever `guard` does: it is the guard or a conjunct of it.
bool impliedBy(Value cond, Value guard) {
  if (guard == cond)
    return true;
  auto conjunction = guard.getDefiningOp<arith::AndIOp>();
  return conjunction && (impliedBy(cond, conjunction.getLhs()) || impliedBy(cond, conjunction.getRhs()));
}

/// Whether `value` equals the domain's bound `bound` (the same value, or equal constants).
bool sameExtent(Value size, Value bound) {
  if (size == bound)
    return true;
  auto a = size.getDefiningOp<arith::ConstantIndexOp>(), b = bound.getDefiningOp<arith::ConstantIndexOp>();
  return a && b && a.value() == b.value();
}

/// A load that cannot fault: each index is a domain index whose bound is the extent of the dim it indexes.
bool loadWithinDomain(memref::LoadOp load, DomainOp domain) {
  auto view = load.getMemRef().getDefiningOp<ViewOp>();
  if (!view)
    return false;
  for (auto [d, index] : llvm::enumerate(load.getIndices())) {
    auto arg = dyn_cast<BlockArgument>(index);
    if (!arg || arg.getOwner() != &domain.body())
      return false;
    if (!sameExtent(view.getSizes()[d], domain.bounds()[arg.getArgNumber()]))
      return false;
  }
  return true;
}

/// Replaces the written value `scf.if %c {ops; yield x} else {yield y}` by x when the write's guard
/// implies %c and the ops cannot fault: the ops move before the if.
void speculateGuardedValue(DomainOp domain, WriteOp write) {
  auto ifOp = write.getValue().getDefiningOp<scf::IfOp>();
  if (!ifOp || ifOp->getBlock() != &domain.body() || ifOp.getNumResults() != 1 || !write.getGuard() ||
      !impliedBy(ifOp.getCondition(), write.getGuard()) || !ifOp->getResult(0).hasOneUse())
    return;
  for (Operation &op : ifOp.thenBlock()->without_terminator()) {
    auto load = dyn_cast<memref::LoadOp>(op);
    bool safe = load ? loadWithinDomain(load, domain) : op.getNumRegions() == 0 && isPure(&op);
    if (!safe)
      return;
  }
  Value chosen = ifOp.thenYield().getOperand(0);
  for (Operation &op : llvm::make_early_inc_range(ifOp.thenBlock()->without_terminator()))
    op.moveBefore(ifOp);
  ifOp->getResult(0).replaceAllUsesWith(chosen);
  ifOp->erase();
}

/// Whether a key can be broadcast across a warp: an integer (an index) or a boolean.
bool broadcastable(Value key) { return key.getType().isIntOrIndex(); }

/// At most this many keys: each costs a shuffle or two per member and vector along the row.
constexpr size_t kMaxKeys = 4;

/// The top-level row-invariant ops whose results the values along the row take from the member
/// (`fromMember`), in body order; nullopt when something along the row takes the member index itself.
std::optional<SmallVector<Operation *>> memberKeys(DomainOp domain, const DenseSet<Value> &fromMember,
                                                   Value member) {
  SetVector<Operation *> keys;
  for (Operation &top : domain.body().without_terminator()) {
    if (top.hasAttr(kRowInvariantAttr))
      continue;
    bool direct = false;
    top.walk([&](Operation *op) {
      for (Value v : op->getOperands()) {
        if (v == member)
          direct = true;
        Operation *def = v.getDefiningOp();
        if (fromMember.contains(v) && def && def->getBlock() == &domain.body() && def->hasAttr(kRowInvariantAttr))
          keys.insert(def);
      }
    });
    if (direct)
      return std::nullopt;
  }
  SmallVector<Operation *> ordered(keys.begin(), keys.end());
  llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

/// Whether the rows of `domain` that differ only in their last row index (the members) can run as
/// groups, and the ops computing the keys the written value takes from the member (see the file
/// comment). Speculates the written value first where that is what stands in the way.
std::optional<SmallVector<Operation *>> groupKeys(DomainOp domain) {
  auto write = dyn_cast<WriteOp>(domain.body().getTerminator());
  ScheduleAttr schedule = domain.schedule();
  if (!domain.isScatter() || !write || domain.bounds().size() < 2 || !schedule || schedule.getThreads() != kWarpSize ||
      gpuMapping(domain) != GpuMapping::Rows)
    return std::nullopt;
  // Members' values run on different lanes: nothing in the body may assume a converged warp (folds and
  // lists split over lanes) or reduce.
  bool plain = true;
  domain.body().walk([&](Operation *op) {
    if (isa<FoldOp, SumOp, CompactOp, RowStoreOp>(op))
      plain = false;
  });
  if (!plain)
    return std::nullopt;
  // Sharing the value pays only when computing it reads memory (a fill of constants stores as it is).
  bool loadsAlongRow = false;
  for (Operation &top : domain.body().without_terminator())
    if (!top.hasAttr(kRowInvariantAttr))
      top.walk([&](memref::LoadOp) { loadsAlongRow = true; });
  if (!loadsAlongRow)
    return std::nullopt;
  if (write.getGuard() && !write->hasAttr(kRowGuardAttr))
    return std::nullopt;
  // The member's row (all indices but h) is computed before the loop along the row.
  for (Value index : write.getIndices().drop_back()) {
    Operation *def = index.getDefiningOp();
    if (def && def->getBlock() == &domain.body() && !def->hasAttr(kRowInvariantAttr))
      return std::nullopt;
  }
  if (write.getIndices().back() != domain.body().getArguments().back())
    return std::nullopt;

  // The keys: the values along the row take from the member index only through them.
  Value member = domain.body().getArgument(domain.bounds().size() - 2);
  auto keysNow = [&]() -> std::optional<SmallVector<Operation *>> {
    DenseSet<Value> fromMember{member};
    for (Operation &top : domain.body().without_terminator()) {
      bool uses = false;
      top.walk<WalkOrder::PreOrder>([&](Operation *op) {
        if (llvm::any_of(op->getOperands(), [&](Value v) { return fromMember.contains(v); })) {
          uses = true;
          fromMember.insert(op->getResults().begin(), op->getResults().end());
        }
      });
      if (uses)
        fromMember.insert(top.getResults().begin(), top.getResults().end());
    }
    std::optional<SmallVector<Operation *>> keys = memberKeys(domain, fromMember, member);
    if (!keys || keys->size() > kMaxKeys || llvm::any_of(*keys, [](Operation *key) {
          return key->getNumResults() != 1 || !broadcastable(key->getResult(0));
        }))
      return std::nullopt;
    return keys;
  };
  // Speculating the value only takes keys away (the guard's condition), so a body rejected here would be
  // rejected after it too: nothing changes in a scatter that is not grouped.
  if (!keysNow())
    return std::nullopt;
  speculateGuardedValue(domain, write);
  return keysNow();
}

struct GroupRowsPass : impl::MoeGroupRowsBase<GroupRowsPass> {
  void runOnOperation() override {
    UnitAttr unit = UnitAttr::get(&getContext());
    for (DomainOp domain : collectDomainOps(getOperation())) {
      std::optional<SmallVector<Operation *>> keys = groupKeys(domain);
      if (!keys)
        continue;
      domain.op()->setAttr(kRowGroupAttr, unit);
      for (Operation *key : *keys)
        key->setAttr(kGroupKeyAttr, unit);
      // A group takes a block whose warps split the row: no more warps than the row has passes of 32 vectors.
      ScheduleAttr s = domain.schedule();
      APInt inner;
      if (matchPattern(domain.bounds().back(), m_ConstantInt(&inner))) {
        int64_t passes = std::max<int64_t>(1, (inner.getSExtValue() + kWarpSize * s.getVector() - 1) / (kWarpSize * s.getVector()));
        if (passes < s.getRowsPerBlock())
          domain.setSchedule(ScheduleAttr::get(&getContext(), passes, s.getThreads(), s.getVector(), s.getUnroll()));
      }
    }
  }
};
} // namespace
} // namespace moec::moe
