//===- VersionRowLoops.cpp - Loops along a row without their row's branches ===//
//
// A loop along a row tests, at every vector, conditions that are the same for the whole row: a gathered row's bounds
// check (the else branch reports the error), a compacted fold's "is term k live" (the else branch skips the term), a
// point's "is its row written". The branches predict well, but they cost instructions and registers in the hottest
// loop: B2 at top-8 spends two of each term's five instructions on them and reloads its row pointers from the stack.
// This pass runs such a loop in versions: copies where each condition is a constant (no error; for each live count,
// exactly the live terms), folded by the canonicalizer into straight-line code, and the original, taken for a row where
// a condition differs from what the copies assume. One test and one switch per row choose. Results do not change: a
// copy runs only where the conditions it assumed hold.
// On the GPU the gain is memory-level parallelism: the loop along a row there loads its gathered rows' indices and
// tests their bounds inside the loop, and each gather behind its branch was waited for before the next was issued. The
// copy without the branches issues all of them at once. There the loads of the indices move out of the loop first, and
// no switch is made (it would be an indirect branch): each condition takes its usual value.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Dialect/MoeDialect.h"
#include "moec/compiler/Transforms/ErrorPaths.h"
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

#include "llvm/ADT/MapVector.h"

#include <functional>

#define DEBUG_TYPE "moe-version-row-loops"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEVERSIONROWLOOPS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {
/// Conditions per loop beyond which the one test per row would cost more than the branches it removes.
constexpr size_t kMaxConditions = 64;
/// The most versions of a loop a selector may make (a fold of up to 16 live terms).
constexpr int64_t kMaxVersions = 17;

/// Whether `region` only passes values on: it holds nothing but a yield of values defined outside it.
bool passesThrough(Region &region) {
  Block &block = region.front();
  if (!llvm::hasSingleElement(block))
    return false;
  return llvm::all_of(block.getTerminator()->getOperands(),
                      [&](Value v) { return !region.isAncestor(v.getParentRegion()); });
}

/// Whether `region` moves data: it reads or writes memory.
bool movesData(Region &region) {
  bool moves = false;
  region.walk([&](Operation *op) {
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    moves |= effects && (effects.hasEffect<MemoryEffects::Read>() || effects.hasEffect<MemoryEffects::Write>());
  });
  return moves;
}

/// The value `branch`'s condition usually takes: the side that does not report an error, or the one that moves data
/// where the other only passes values on or is absent (a live term, not a skipped one; a point's row written, not
/// skipped); none otherwise.
/// Whether exactly one side of `branch` reports an error: a check (the other side the usual one).
bool isCheckBranch(scf::IfOp branch) {
  Region &elseRegion = branch.getElseRegion();
  return reportsError(branch.getThenRegion()) != (!elseRegion.empty() && reportsError(elseRegion));
}

std::optional<bool> usualValue(scf::IfOp branch) {
  Region &thenRegion = branch.getThenRegion(), &elseRegion = branch.getElseRegion();
  bool thenReports = reportsError(thenRegion), elseReports = !elseRegion.empty() && reportsError(elseRegion);
  if (isCheckBranch(branch))
    return elseReports;
  if (thenReports)
    return std::nullopt;
  if ((elseRegion.empty() || passesThrough(elseRegion)) && movesData(thenRegion))
    return true;
  if (!elseRegion.empty() && passesThrough(thenRegion) && movesData(elseRegion))
    return false;
  return std::nullopt;
}

/// A value several conditions compare with constants (a compacted fold's live count: `count > k`): the loop gets a
/// version per value, from `lo` to `hi` (every value from `hi` on compares as `hi` does).
struct Selector {
  Value value;
  int64_t lo = 0, hi = 0;
  llvm::MapVector<Value, std::function<bool(uint64_t)>> conditions; // each condition, as a function of the value
};

/// The selector among `conditions`: the index value compared (unsigned) with constants by the most of them, at least
/// two; none when there is none or its versions would be too many.
std::optional<Selector> findSelector(const llvm::MapVector<Value, bool> &conditions) {
  llvm::MapVector<Value, Selector> byValue; // in the loop's order, so ties resolve the same way every time
  for (auto [condition, usual] : conditions) {
    auto compare = condition.getDefiningOp<arith::CmpIOp>();
    APInt constant;
    if (!compare || !compare.getLhs().getType().isIndex() || !matchPattern(compare.getRhs(), m_ConstantInt(&constant)))
      continue;
    uint64_t c = constant.getZExtValue();
    // The comparison as a function of the value, and the range [below, above] outside which it answers as at
    // the nearer end: `v > c` is false up to c and true from c + 1, `v >= c` false up to c - 1 and true from c.
    std::function<bool(uint64_t)> test;
    int64_t below = 0, above = 0;
    switch (compare.getPredicate()) {
    case arith::CmpIPredicate::ugt:
      test = [c](uint64_t v) { return v > c; };
      below = int64_t(c), above = int64_t(c) + 1;
      break;
    case arith::CmpIPredicate::uge:
      test = [c](uint64_t v) { return v >= c; };
      below = int64_t(c) - 1, above = int64_t(c);
      break;
    case arith::CmpIPredicate::ult:
      test = [c](uint64_t v) { return v < c; };
      below = int64_t(c) - 1, above = int64_t(c);
      break;
    case arith::CmpIPredicate::ule:
      test = [c](uint64_t v) { return v <= c; };
      below = int64_t(c), above = int64_t(c) + 1;
      break;
    default:
      continue;
    }
    if (c > uint64_t(kMaxVersions))
      continue;
    below = std::max<int64_t>(below, 0);
    Selector &s = byValue[compare.getLhs()];
    s.value = compare.getLhs();
    s.conditions[condition] = test;
    s.lo = s.conditions.size() == 1 ? below : std::min(s.lo, below);
    s.hi = s.conditions.size() == 1 ? above : std::max(s.hi, above);
  }
  std::optional<Selector> best;
  for (auto &[value, s] : byValue)
    if (s.conditions.size() >= 2 && s.hi - s.lo + 1 <= kMaxVersions &&
        (!best || s.conditions.size() > best->conditions.size()))
      best = s;
  return best;
}

struct VersionRowLoopsPass : impl::MoeVersionRowLoopsBase<VersionRowLoopsPass> {
  using MoeVersionRowLoopsBase::MoeVersionRowLoopsBase;

  void runOnOperation() override {
    SmallVector<scf::ForOp> innermost;
    getOperation()->walk([&](scf::ForOp loop) {
      bool nested = false;
      loop.getBody()->walk([&](LoopLikeOpInterface) { nested = true; });
      if (!nested)
        innermost.push_back(loop);
    });
    for (scf::ForOp loop : innermost)
      version(loop);
  }

  /// A branch inside a loop, the condition from outside the loop that decides it, the value it usually takes, and
  /// whether its other side reports an error (a check, not a term that may be skipped).
  struct Guard {
    scf::IfOp branch;
    Value condition;
    bool usual;
    bool check;
  };

  /// The branches inside `loop` decided by a condition defined outside it, with their usual values: the branch's
  /// condition, or, for one that is usually true, an operand of its `or` that is (a step's bounds check read from a
  /// table, or'ed with "true at every step": moe-lower-to-gpu's step tables).
  static SmallVector<Guard> invariantBranches(scf::ForOp loop) {
    SmallVector<Guard> found;
    auto outside = [&](Value v) { return !loop->isAncestor(v.getParentRegion()->getParentOp()); };
    loop.getBody()->walk([&](scf::IfOp branch) {
      std::optional<bool> usual = usualValue(branch);
      if (!usual)
        return;
      bool check = isCheckBranch(branch);
      Value condition = branch.getCondition();
      if (outside(condition)) {
        found.push_back({branch, condition, *usual, check});
        return;
      }
      auto either = condition.getDefiningOp<arith::OrIOp>();
      if (!either || !*usual)
        return;
      for (Value operand : either->getOperands())
        if (outside(operand)) {
          found.push_back({branch, operand, true, check});
          return;
        }
    });
    return found;
  }

  void version(scf::ForOp loop) {
    bool candidates = false;
    loop.getBody()->walk([&](scf::IfOp branch) { candidates |= usualValue(branch).has_value(); });
    if (!candidates || runsWarpWide(loop))
      return;
    // Conditions computed in the loop from values outside it (`count > k`) move out first, with the loads of
    // read-only tensors they come from (the GPU's loop along a row loads its gathered rows' indices).
    moveLoopInvariantCode(cast<LoopLikeOpInterface>(loop.getOperation()));
    if (hoistReadOnlyLoads(loop))
      moveLoopInvariantCode(cast<LoopLikeOpInterface>(loop.getOperation()));
    hoistInvariantBranchConditions(loop);
    SmallVector<Guard> branches = invariantBranches(loop);
    if (branches.empty() || branches.size() > kMaxConditions)
      return;
    llvm::MapVector<Value, bool> usual; // one condition may guard several branches; in the loop's order
    for (const Guard &g : branches)
      if (!usual.try_emplace(g.condition, g.usual).second && usual[g.condition] != g.usual)
        return; // two branches want opposite values of one condition
    std::optional<Selector> selector = selectVersions ? findSelector(usual) : std::nullopt;

    OpBuilder b(loop);
    Location loc = loop.getLoc();
    Value holds = checkedConditionsHold(b, loc, loop, branches, usual, selector);
    auto choice = scf::IfOp::create(b, loc, loop.getResultTypes(), holds, /*withElseRegion=*/true);
    b.setInsertionPointToStart(choice.thenBlock());
    ValueRange fast;
    if (selector) {
      // A version per value of the selector (clamped to where its comparisons still change).
      Value at = arith::MinUIOp::create(
          b, loc, arith::MaxUIOp::create(b, loc, selector->value, arith::ConstantIndexOp::create(b, loc, selector->lo)),
          arith::ConstantIndexOp::create(b, loc, selector->hi));
      SmallVector<int64_t> cases;
      for (int64_t v = selector->lo; v < selector->hi; ++v)
        cases.push_back(v);
      auto dispatch = scf::IndexSwitchOp::create(b, loc, loop.getResultTypes(), at, cases, cases.size());
      auto fill = [&](Region &region, int64_t value) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&region.emplaceBlock());
        llvm::MapVector<Value, bool> known = usual;
        for (auto [condition, compare] : selector->conditions)
          known[condition] = compare(uint64_t(value));
        scf::YieldOp::create(b, loc, cloneKnowing(b, loc, loop, known));
      };
      for (auto [region, value] : llvm::zip(dispatch.getCaseRegions(), cases))
        fill(region, value);
      fill(dispatch.getDefaultRegion(), selector->hi);
      fast = dispatch.getResults();
    } else {
      fast = cloneKnowing(b, loc, loop, usual);
    }
    if (!loop.getResultTypes().empty())
      scf::YieldOp::create(b, loc, fast);
    loop->replaceAllUsesWith(choice.getResults());
    Block *rest = choice.elseBlock();
    // Without a selector (the GPU), a row whose checks hold but not all of whose terms are live (B2 past
    // active_num, C2's unrouted experts) runs a copy that keeps only the terms' branches: moe-guard-loads then
    // makes their loads predicated, so that the row's gathers issue together there too.
    SmallVector<Guard> checks;
    for (const Guard &g : branches)
      if (g.check)
        checks.push_back(g);
    if (!selectVersions && !checks.empty() && checks.size() < branches.size()) {
      if (rest->empty())
        b.setInsertionPointToEnd(rest);
      else
        b.setInsertionPoint(rest->getTerminator());
      llvm::MapVector<Value, bool> known;
      for (const Guard &g : checks)
        known[g.condition] = g.usual;
      Value checksHold = checkedConditionsHold(b, loc, loop, checks, usual, std::nullopt);
      auto split = scf::IfOp::create(b, loc, loop.getResultTypes(), checksHold, /*withElseRegion=*/true);
      b.setInsertionPointToStart(split.thenBlock());
      ValueRange live = cloneKnowing(b, loc, loop, known);
      if (!loop.getResultTypes().empty()) {
        scf::YieldOp::create(b, loc, live);
        b.setInsertionPointAfter(split);
        scf::YieldOp::create(b, loc, split.getResults());
      }
      rest = split.elseBlock();
    }
    // The original, for the other rows. Without a selector (the GPU), where every branch is a check or the live
    // terms' copy above took the rows whose checks hold, and the test of the checks is exact, those rows failed a
    // check: the loop only reports.
    if (!selectVersions && !checks.empty() && checksTestedExactly(loop, branches, checks, usual))
      keepOnlyReports(loop);
    if (loop.getResultTypes().empty()) { // the blocks came with their yields
      loop->moveBefore(rest->getTerminator());
    } else {
      loop->moveBefore(rest, rest->end());
      b.setInsertionPointToEnd(rest);
      scf::YieldOp::create(b, loc, loop.getResults());
    }
  }

  /// Whether `loop` holds an op the threads of a warp or block must run together (a vote, a shuffle, a barrier).
  /// Its copies would be chosen by conditions that may differ between lanes (a block list's `lane == 0`), each
  /// copy with its own such op, run by only some of the lanes.
  static bool runsWarpWide(scf::ForOp loop) {
    return loop.getBody()
        ->walk([](Operation *op) {
          bool together =
              isa_and_nonnull<NVVM::NVVMDialect>(op->getDialect()) || isa<gpu::BarrierOp, gpu::ShuffleOp>(op);
          return together ? WalkResult::interrupt() : WalkResult::advance();
        })
        .wasInterrupted();
  }

  /// Moves the loads at the top level of `loop`'s body from tensors the function never writes, at indices defined
  /// outside the loop, before it (with the pure ops they need, which LICM already moved), under a branch that runs the
  /// loop only when it runs at least once: a load that ran in every iteration then runs once, and never where the
  /// loop would not have. Whether it moved any.
  static bool hoistReadOnlyLoads(scf::ForOp loop) {
    SmallVector<memref::LoadOp> loads;
    for (Operation &op : loop.getBody()->without_terminator()) {
      auto load = dyn_cast<memref::LoadOp>(op);
      if (load && viewsReadOnlyTensor(load.getMemref()) && llvm::all_of(load->getOperands(), [&](Value v) {
            return !loop->isAncestor(v.getParentRegion()->getParentOp());
          }))
        loads.push_back(load);
    }
    if (loads.empty())
      return false;
    OpBuilder b(loop);
    Location loc = loop.getLoc();
    Value runs = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, loop.getLowerBound(), loop.getUpperBound());
    auto once = scf::IfOp::create(b, loc, loop.getResultTypes(), runs, /*withElseRegion=*/true);
    loop->replaceAllUsesWith(once.getResults());
    b.setInsertionPointToStart(once.thenBlock());
    if (!loop.getResultTypes().empty()) {
      auto yield = scf::YieldOp::create(b, loc, loop.getResults());
      loop->moveBefore(yield);
      b.setInsertionPointToStart(once.elseBlock());
      scf::YieldOp::create(b, loc, loop.getInitArgs());
    } else {
      loop->moveBefore(once.thenBlock()->getTerminator());
    }
    for (memref::LoadOp load : loads)
      load->moveBefore(loop);
    return true;
  }

  /// Moves the speculatable ops in `loop`'s branches whose operands are all defined outside the loop before it (a
  /// bounds check computed where its load is, in the branch of a live term), so that those branches' conditions are
  /// seen to be the row's.
  static void hoistInvariantBranchConditions(scf::ForOp loop) {
    auto outside = [&](Value v) { return !loop->isAncestor(v.getParentRegion()->getParentOp()); };
    for (bool moved = true; moved;) { // until a pass moves nothing: an op may need one moved in the same pass
      SmallVector<Operation *> movable;
      loop.getBody()->walk<WalkOrder::PreOrder>([&](Operation *op) {
        if (op->getParentOp() != loop && op->getNumRegions() == 0 && !op->hasTrait<OpTrait::IsTerminator>() &&
            isMemoryEffectFree(op) && isSpeculatable(op) && llvm::all_of(op->getOperands(), outside))
          movable.push_back(op);
      });
      for (Operation *op : movable)
        op->moveBefore(loop);
      moved = !movable.empty();
    }
  }

  /// Whether checkedConditionsHold(checks) is false only where a check that runs fails, not also where one that
  /// does not run would (a single-row copy's check of its row, which a row of several never reads): each check's
  /// branch is inside no branch of the loop but ones whose conditions it exempts, or its condition is a step
  /// table's vote that records only the steps that run the check (moe-lower-to-gpu marks it kExactCheckVote).
  static bool checksTestedExactly(scf::ForOp loop, ArrayRef<Guard> branches, ArrayRef<Guard> checks,
                                  const llvm::MapVector<Value, bool> &usual) {
    DenseSet<Operation *> known;
    for (const Guard &g : branches)
      known.insert(g.branch);
    return llvm::all_of(checks, [&](Guard g) {
      if (g.condition != g.branch.getCondition()) { // an operand of the branch's `or`: a step table's
        Operation *vote = g.condition.getDefiningOp();
        return vote && vote->hasAttr(kExactCheckVote);
      }
      bool onlyGuards = llvm::all_of(g.condition.getUsers(),
                                     [&](Operation *user) { return !loop->isAncestor(user) || known.contains(user); });
      for (Operation *parent = g.branch->getParentOp(); parent != loop; parent = parent->getParentOp()) {
        auto around = dyn_cast<scf::IfOp>(parent);
        if (!around || !usual.count(around.getCondition()) || !onlyGuards)
          return false;
      }
      return true;
    });
  }

  /// Removes `loop`'s writes other than the status buffer's (the canonicalizer then drops the work that fed them): a
  /// row that failed a check runs it to report the failure, its outputs incomplete as the error says. Its loads,
  /// stores and arithmetic would otherwise hold registers the whole kernel pays for in occupancy (C2 at Mixtral's
  /// shape without mixed precision: 72 registers, 32 without them).
  static void keepOnlyReports(scf::ForOp loop) {
    SmallVector<Operation *> writes;
    loop.getBody()->walk([&](Operation *op) {
      auto effects = dyn_cast<MemoryEffectOpInterface>(op);
      if (!effects || !effects.hasEffect<MemoryEffects::Write>())
        return;
      SmallVector<MemoryEffects::EffectInstance> instances;
      effects.getEffects(instances);
      bool outputOnly = llvm::all_of(instances, [](const MemoryEffects::EffectInstance &e) {
        return !isa<MemoryEffects::Write>(e.getEffect()) || (e.getValue() && !isStatus(e.getValue()));
      });
      if (outputOnly)
        writes.push_back(op);
    });
    for (Operation *op : writes)
      op->erase();
    // What the loop carries (a dot product's partial sums) feeds writes after it, of the same incomplete outputs:
    // it yields its initial values instead, so that its work goes too (held across the loop, A3's batch of 8
    // dot products' 64 partial sums made its probs kernel need 250 registers).
    Operation *yield = loop.getBody()->getTerminator();
    yield->setOperands(loop.getRegionIterArgs());
    loop->removeAttr(MoeDialect::LaneSumAttrHelper::getNameStr()); // it no longer sums
  }

  /// A copy of `loop` with each condition in `known` replaced by its value; the copy's results.
  static ValueRange cloneKnowing(OpBuilder &b, Location loc, scf::ForOp loop,
                                 const llvm::MapVector<Value, bool> &known) {
    IRMapping mapping;
    for (auto [condition, value] : known)
      mapping.map(condition, arith::ConstantIntOp::create(b, loc, value ? 1 : 0, 1).getResult());
    return b.clone(*loop, mapping)->getResults();
  }

  /// i1: every branch's condition that the selector does not decide takes its usual value, or the branch does not run
  /// (a branch around it takes its other side: a dead term's bounds check does not matter). That exemption holds only
  /// for a condition that nothing in the loop reads but such branches, as the copies read it as its usual value.
  static Value checkedConditionsHold(OpBuilder &b, Location loc, scf::ForOp loop, ArrayRef<Guard> branches,
                                     const llvm::MapVector<Value, bool> &usual,
                                     const std::optional<Selector> &selector) {
    DenseSet<Operation *> known;
    for (const Guard &g : branches)
      known.insert(g.branch);
    auto onlyGuards = [&](Value condition) {
      return llvm::all_of(condition.getUsers(),
                          [&](Operation *user) { return !loop->isAncestor(user) || known.contains(user); });
    };
    Value all = arith::ConstantIntOp::create(b, loc, 1, 1);
    auto negate = [&](Value v) -> Value {
      return arith::XOrIOp::create(b, loc, v, arith::ConstantIntOp::create(b, loc, 1, 1));
    };
    for (const Guard &g : branches) {
      scf::IfOp branch = g.branch;
      Value condition = g.condition;
      bool value = g.usual;
      if (selector && selector->conditions.count(condition))
        continue;
      Value ok = value ? condition : negate(condition);
      // Each enclosing branch with a condition from outside the loop, on the side that skips this one.
      for (Operation *parent = branch->getParentOp(); parent != loop && onlyGuards(condition);
           parent = parent->getParentOp()) {
        auto around = dyn_cast<scf::IfOp>(parent);
        if (!around || !usual.count(around.getCondition()))
          continue;
        bool inThen = around.getThenRegion().isAncestor(branch->getParentRegion());
        Value skips = inThen ? negate(around.getCondition()) : around.getCondition();
        ok = arith::OrIOp::create(b, loc, ok, skips);
      }
      all = arith::AndIOp::create(b, loc, all, ok);
    }
    return all;
  }
};
} // namespace
} // namespace moec::moe
