//===- PredicatedFolds.cpp - Fold over the live steps only ---------===//
//
// C2 combines each token's rows as `fold(e < E, acc) { r = rowmap[t, e]; r < 0 ? acc : acc + x[r, h] }`:
// with E = 256 experts and K = 8 of them live, 248 of every 256 steps only test a predicate, and the
// lowering repeats them for every vector along h. When a fold inside a domain
//   - runs along the row (its result depends on the contiguous index),
//   - has a constant bound,
//   - and its step is `p ? acc : f(acc)` (or `p ? f(acc) : acc`) with p independent of the accumulator
//     and of the contiguous index,
// it is split into a moe.compact of the live steps (where f applies) and a fold over that list:
//   %list, %n = moe.compact %E { ^bb0(%e): ...; moe.yield %live }
//   moe.fold %n, %init { ^bb0(%i, %acc): %e = %list[%i]; ...; f(acc) }
// Live steps stay in increasing order, so every result is bit-identical. The compact op is row-invariant,
// so moe-hoist-row-invariants (after these passes) has it built once per row.
// A moe.sum whose term is `p ? 0.0 : f` (B2's dropped or inactive rows) is split the same way: its f32
// accumulator starts at +0.0 and so is never -0.0, which makes adding +0.0 exactly the identity.
// moe-compact-predicated-folds splits the long ones, moe-short-lists the short ones (PredicatedFolds.h).
//===----------------------------------------------------------------------===//
#include "PredicatedFolds.h"

#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/contracts/Schedule.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace moec::moe {

namespace {

/// Whether the fold's live steps add a term to the accumulator (so that the fold over the list is one the
/// CPU lowering runs as an accumulated row): any f32 sum, or a fold whose live branch ends in
/// `acc + x` or fma(x, w, acc) (rounded back to T or not: termAdditionReader), with the accumulator used
/// nowhere else but the other branch's yield. `inT`: also an accumulator kept in f16 or bf16, T(f32(acc) + x)
/// (the GPU's short lists run any fold's steps; the CPU's accumulated rows need the f32-carried form).
bool liveStepAccumulates(Operation *reduction, PredicatedStep step, bool inT) {
  if (isa<SumOp>(reduction))
    return reduction->getResult(0).getType().isF32();
  Block &live = step.liveIsThen ? step.branch.getThenRegion().front() : step.branch.getElseRegion().front();
  Value acc = reduction->getRegion(0).front().getArgument(1);
  if (!inT && !acc.getType().isF32())
    return false;
  Value next = live.getTerminator()->getOperand(0);
  Operation *keep = step.liveIsThen ? step.branch.elseYield() : step.branch.thenYield();
  Operation *reader = termAdditionReader(next, acc);
  return reader && reader->getBlock() == &live && next.getDefiningOp()->getBlock() == &live &&
         llvm::all_of(acc.getUsers(), [&](Operation *user) { return user == reader || user == keep; });
}

/// The ops of the reduction's body that `v` depends on, in body order; fails if one depends on the
/// accumulator or on a value that varies along the row.
FailureOr<SmallVector<Operation *>> predicateSlice(Operation *reduction, Value v, const DenseSet<Value> &alongRow) {
  Block &body = reduction->getRegion(0).front();
  Value acc = body.getNumArguments() > 1 ? body.getArgument(1) : Value();
  DenseSet<Operation *> slice;
  SmallVector<Value> work{v};
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (alongRow.contains(x) || (acc && x == acc))
      return failure();
    Operation *def = x.getDefiningOp();
    if (!def || def->getBlock() != &body || !slice.insert(def).second)
      continue;
    bool usesOutside = false;
    def->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        usesOutside |= (acc && operand == acc) || alongRow.contains(operand);
        if (Operation *d = operand.getDefiningOp(); d && d->getBlock() == &body)
          work.push_back(operand);
      }
    });
    if (usesOutside)
      return failure();
  }
  SmallVector<Operation *> ordered;
  for (Operation &op : body.without_terminator())
    if (slice.contains(&op))
      ordered.push_back(&op);
  return ordered;
}

/// One pass's compaction of the predicated reductions of one length (see PredicatedFolds.h).
struct FoldCompactor {
  bool gpu;
  FoldLength which;

  void run(Operation *root) {
    for (DomainOp domain : collectDomainOps(root)) {
      ListBudget budget = listBudget(domain);
      if (budget.bytesPerEntry == 0)
        continue;
      DenseSet<Value> alongRow = valuesAlongRow(domain);
      SmallVector<Operation *> reductions;
      domain.op()->walk([&](Operation *op) {
        if (isa<FoldOp, SumOp>(op))
          reductions.push_back(op);
      });
      std::optional<SmallVector<Operation *>> invariant; // the domain's row-invariant ops, until it changes
      for (Operation *reduction : reductions)
        if (alongRow.contains(reduction->getResult(0)) && compact(reduction, alongRow, budget, invariant))
          invariant.reset();
    }
  }

  /// What the lists of one domain may hold together: on the CPU stack arrays of kListBytes in all; on the
  /// GPU one list per warp in shared memory, kListBytes per block in all. bytesPerEntry 0: the domain is
  /// not lowered a row at a time.
  struct ListBudget {
    int64_t bytesLeft = kListBytes;
    int64_t bytesPerEntry = 0; // an i32 per step, for each warp of a block on the GPU
  };
  ListBudget listBudget(DomainOp domain) const {
    ListBudget budget{kListBytes, 4};
    if (gpu) {
      auto schedule = domain.op()->getAttrOfType<ScheduleAttr>("schedule");
      if (!schedule || gpuMapping(domain) != GpuMapping::Rows)
        return {kListBytes, 0};
      int64_t warps = std::max<int64_t>(1, schedule.getThreads() * schedule.getRowsPerBlock() / kWarpSize);
      budget.bytesPerEntry = warps * 4;
    }
    // The lists the domain already has (an earlier pass's) count against it.
    domain.op()->walk([&](CompactOp list) {
      budget.bytesLeft -= cast<MemRefType>(list.getList().getType()).getDimSize(0) * budget.bytesPerEntry;
    });
    return budget;
  }
  static constexpr int64_t kListBytes = 16384;  // per domain: CPU stack, or GPU shared memory per block
  static constexpr int64_t kDefaultUnroll = 8;  // moec::chooseSchedule's, for unscheduled input

  /// GPU: whether the list will be row-invariant, hence built in the row's prologue where the warp is
  /// converged: the fold sits at the top of the domain's body, and what its predicate reads from the body
  /// is row-invariant too. `invariant` caches the domain's row-invariant ops.
  static bool builtInRowPrologue(Operation *reduction, ArrayRef<Operation *> slice,
                                 std::optional<SmallVector<Operation *>> &invariantCache) {
    DomainOp domain = DomainOp::dyn(reduction->getParentOp());
    if (!domain)
      return false;
    if (!invariantCache)
      invariantCache = rowInvariantOps(domain);
    const SmallVector<Operation *> &invariant = *invariantCache;
    Block &body = domain.body();
    bool ok = true;
    for (Operation *op : slice)
      op->walk([&](Operation *nested) {
        for (Value v : nested->getOperands()) {
          Operation *def = v.getDefiningOp();
          if (auto arg = dyn_cast<BlockArgument>(v))
            ok &= arg.getOwner() != &body || arg != body.getArguments().back();
          else if (def->getBlock() == &body)
            ok &= llvm::is_contained(invariant, def);
        }
      });
    return ok;
  }

  /// Compacts `reduction` if it qualifies and its list fits what is left of `budget`; true if it did.
  bool compact(Operation *reduction, const DenseSet<Value> &alongRow, ListBudget &budget,
               std::optional<SmallVector<Operation *>> &invariant) {
    Value bound = reduction->getOperand(0);
    APInt boundValue;
    if (!matchPattern(bound, m_ConstantInt(&boundValue)) || boundValue.getSExtValue() < 1 ||
        boundValue.getSExtValue() > budget.bytesLeft / budget.bytesPerEntry)
      return false;
    // A reduction short enough to unroll fully keeps its branches: they are the same for every vector of
    // a row (well predicted, uniform across a warp), and its loads all issue at once; a loop over a list
    // of unknown length would serialize them (B2's top-8 sum ran at 0.7 of its speed). moe-short-lists
    // (FoldLength::Short) compacts those whose live steps add terms all the same: the CPU loop lowering adds
    // a short list's steps directly, each vector's loads at once, with neither the per-step tests nor their
    // row-invariant work per vector (C2 at Mixtral's top-2 of 8: 0.82 -> 1.06-1.14 of a memcpy).
    DomainOp domain;
    for (Operation *p = reduction->getParentOp(); p && !domain; p = p->getParentOp())
      domain = DomainOp::dyn(p);
    auto schedule = domain ? domain.op()->getAttrOfType<ScheduleAttr>("schedule") : ScheduleAttr();
    bool shortFold = boundValue.getSExtValue() <= (schedule ? schedule.getUnroll() : kDefaultUnroll);
    if (shortFold != (which == FoldLength::Short))
      return false;
    // On the GPU only a fold's steps read their row-invariant work from a step table (emitStepTables); a
    // short sum's steps would redo theirs for every vector (B2's top-8, every step live: 0.61 of a copy in
    // the emulator's bound, against 0.96 with its branches).
    if (shortFold && gpu && !isa<FoldOp>(reduction))
      return false;
    std::optional<PredicatedStep> step = predicatedStep(reduction);
    if (!step || (shortFold && !liveStepAccumulates(reduction, *step, /*inT=*/gpu)))
      return false;
    FailureOr<SmallVector<Operation *>> slice = predicateSlice(reduction, step->branch.getCondition(), alongRow);
    if (failed(slice))
      return false;
    if (gpu && !builtInRowPrologue(reduction, *slice, invariant))
      return false;
    Location loc = reduction->getLoc();
    Block &body = reduction->getRegion(0).front();
    OpBuilder b(reduction);
    int64_t length = boundValue.getSExtValue();
    budget.bytesLeft -= length * budget.bytesPerEntry;

    // The live steps: where the branch that changes the accumulator is taken.
    auto listType = MemRefType::get({length}, b.getI32Type());
    auto compacted = CompactOp::create(b, loc, listType, b.getIndexType(), bound);
    {
      OpBuilder::InsertionGuard guard(b);
      Block *predicate = b.createBlock(&compacted.getPredicate(), {}, {b.getIndexType()}, {loc});
      IRMapping map;
      map.map(body.getArgument(0), predicate->getArgument(0));
      for (Operation *op : *slice)
        b.clone(*op, map);
      Value live = map.lookupOrDefault(step->branch.getCondition());
      if (!step->liveIsThen)
        live = arith::XOrIOp::create(b, loc, live, arith::ConstantIntOp::create(b, loc, 1, 1));
      YieldOp::create(b, loc, live);
    }

    // The reduction over them: the step's other ops, then the live branch inlined.
    Type type = reduction->getResult(0).getType();
    Operation *reduced;
    Block *steps;
    {
      OpBuilder::InsertionGuard guard(b);
      if (auto fold = dyn_cast<FoldOp>(reduction)) {
        auto folded = FoldOp::create(b, loc, type, compacted.getCount(), fold.getInit());
        steps = b.createBlock(&folded.getBody(), {}, {b.getIndexType(), type}, {loc, loc});
        reduced = folded;
      } else {
        auto summed = SumOp::create(b, loc, type, compacted.getCount());
        steps = b.createBlock(&summed.getBody(), {}, {b.getIndexType()}, {loc});
        reduced = summed;
      }
      Value entry = memref::LoadOp::create(b, loc, compacted.getList(), ValueRange{steps->getArgument(0)});
      IRMapping map;
      map.map(body.getArgument(0), arith::IndexCastOp::create(b, loc, b.getIndexType(), entry).getResult());
      if (body.getNumArguments() > 1)
        map.map(body.getArgument(1), steps->getArgument(1));
      for (Operation &op : body.without_terminator())
        if (&op != step->branch.getOperation())
          b.clone(op, map);
      Block &liveBlock = step->liveIsThen ? step->branch.getThenRegion().front() : step->branch.getElseRegion().front();
      for (Operation &op : liveBlock.without_terminator())
        b.clone(op, map);
      YieldOp::create(b, loc, map.lookupOrDefault(liveBlock.getTerminator()->getOperand(0)));
    }
    reduction->getResult(0).replaceAllUsesWith(reduced->getResult(0));
    reduction->erase();
    return true;
  }
};
} // namespace

LogicalResult compactPredicatedFolds(Operation *root, StringRef target, FoldLength which) {
  if (target != "cpu" && target != "gpu")
    return root->emitError(which == FoldLength::Long ? "moe-compact-predicated-folds" : "moe-short-lists")
           << ": target must be cpu or gpu, not '" << target << "'";
  FoldCompactor{target == "gpu", which}.run(root);
  return success();
}

} // namespace moec::moe
