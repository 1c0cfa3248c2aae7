//===- BodyLowering.cpp - Domain bodies to scf/vector loops --------------===//
//
// A moe.compute / moe.scatter body is cloned once per loop nest. With a vector width V > 1 the clone
// is vectorized along the contiguous index h: a value that depends on h ("varying") becomes a vector<V x T>, everything else
// stays scalar and is computed once per vector. So in
//
//   sum(k < K) { let r = idx[n * K + k]; live(r) ? f32(x[r, h]) : 0.0 }
//
// r and live are scalars, x[r, h] is one 16-byte vector.load, and the accumulator is a vector<V x f32>.
// moe.sum and moe.fold become an scf.for with an accumulator (in order, never reassociated), unrolled
// per the schedule. A scatter's moe.write becomes a store under its guard.
//
// This file: a row's loops (emitRow; a staged row, emitStagedRow; a row of few steps, DirectSteps). What the
// lowerings ask of a domain op is in DomainQueries.cpp, an accumulated row's steps in AccumulatedRows.cpp.
//===----------------------------------------------------------------------===//
#include "AccumulatedRows.h"

using namespace mlir;

namespace moec::moe {

/// An accumulated reduction's steps for a row with at most kJammedSteps of them (fewer where its list is
/// shorter), added in registers for each vector instead of through the row's accumulators: for each vector,
/// init, then step j's term when j is below the bound (a select on a mask that is the same for every vector
/// of the row), in step order, as every other lowering adds them. Step j's row-invariant work runs once per
/// row, for step min(j, bound - 1) so that a step past the bound reads only what a live step reads; a row
/// with no step (bound below 1) takes the init instead and reads nothing. One loop serves every bound up to
/// kJammedSteps: a copy per bound (moe-version-row-loops on `j < bound` branches) made B2's and C2's CPU
/// kernels 8 times as large and as slow to compile.
class DirectSteps {
public:
  DirectSteps(OpBuilder &b, DomainOp op, Operation *accumulated, ArrayRef<Value> rowIndices,
              llvm::function_ref<std::unique_ptr<BodyEmitter>(int64_t)> newEmitter)
      : accumulated(accumulated), newEmitter(newEmitter) {
    rowStart = newEmitter(1);
    rowStart->mapIndices(rowIndices);
    bound = rowStart->value(accumulated->getOperand(0));
    // A list of the live steps of a short fold (B2's top-2) never holds more than the fold had.
    if (auto compact = accumulated->getOperand(0).getDefiningOp<CompactOp>())
      steps = std::min(steps, compact.getList().getType().getDimSize(0));
    auto fold = dyn_cast<FoldOp>(accumulated);
    init = fold ? rowStart->value(fold.getInit())
                : Value(arith::ConstantOp::create(b, op.op()->getLoc(), b.getF32FloatAttr(0.0f))); // as emitSum's
  }
  ~DirectSteps() {
    for (std::unique_ptr<BodyEmitter> &start : stepStarts)
      start->flushUnrolls();
    rowStart->flushUnrolls();
  }

  /// Whether the row's bound is at most `steps` (a bound below 1: no step at all, see `none`).
  Value fits(OpBuilder &b, Location loc) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, bound, arith::ConstantIndexOp::create(b, loc, steps));
  }
  /// Whether the row runs no step (B2's token whose rows are all dropped): its value is the init.
  Value none(OpBuilder &b, Location loc) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, bound, arith::ConstantIndexOp::create(b, loc, 1));
  }
  /// The reduction's value at a row with no step (w lanes).
  Value initValue(OpBuilder &b, Location loc, int64_t w) {
    return w == 1 ? init : Value(vector::BroadcastOp::create(b, loc, VectorType::get({w}, init.getType()), init));
  }

  /// Each step's row-invariant work, at `b`'s point (where the bound fits).
  void prepare(OpBuilder &b, Location loc) {
    Block &stepBody = accumulated->getRegion(0).front();
    Value last = arith::SubIOp::create(b, loc, bound, arith::ConstantIndexOp::create(b, loc, 1));
    for (int64_t j = 0; j < steps; ++j) {
      std::unique_ptr<BodyEmitter> &start = stepStarts.emplace_back(newEmitter(1));
      start->startFrom(*rowStart);
      Value step = arith::MinUIOp::create(b, loc, arith::ConstantIndexOp::create(b, loc, j), last);
      start->premap(stepBody.getArgument(0), step);
      start->emitRowInvariantOps(stepBody);
    }
  }

  /// The most steps a row runs directly (the versions' slots are powers of two up to it).
  int64_t mostSteps() const { return steps; }

  /// Whether the row's bound is at most `slots`.
  Value fitsIn(OpBuilder &b, Location loc, int64_t slots) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, bound, arith::ConstantIndexOp::create(b, loc, slots));
  }

  /// The reduction's value at the element `indices` (w lanes), from the first `slots` steps (the row's bound
  /// is at most that: see emitDirectVersions).
  Value sum(OpBuilder &b, Location loc, ArrayRef<Value> indices, int64_t w, int64_t slots) {
    Value acc = initValue(b, loc, w);
    for (auto [j, start] : llvm::enumerate(ArrayRef(stepStarts).take_front(slots))) {
      auto add = [&] { // at b's point
        std::unique_ptr<BodyEmitter> stepEmitter = newEmitter(w);
        stepEmitter->startFrom(*start);
        stepEmitter->mapIndices(indices);
        Value next = stepEmitter->emitReductionStep(accumulated, acc);
        stepEmitter->flushUnrolls();
        return next;
      };
      if (j == 0) { // the bound is at least 1
        acc = add();
        continue;
      }
      // Step j past the bound redoes the last live step's work (its row-invariant values are that step's,
      // see prepare), so computing it reads and checks only what that step does; its result is dropped.
      // One loop for every bound up to `steps`, with no branch per step: a select, which x86 makes a
      // masked add.
      Value live = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, arith::ConstantIndexOp::create(b, loc, j), bound);
      Value next = add();
      if (auto vector = dyn_cast<VectorType>(acc.getType()))
        live = vector::BroadcastOp::create(b, loc, VectorType::get(vector.getShape(), b.getI1Type()), live);
      acc = arith::SelectOp::create(b, loc, live, next, acc);
    }
    return acc;
  }

private:
  Operation *accumulated;
  llvm::function_ref<std::unique_ptr<BodyEmitter>(int64_t)> newEmitter;
  std::unique_ptr<BodyEmitter> rowStart;
  std::vector<std::unique_ptr<BodyEmitter>> stepStarts;
  Value bound, init;
  int64_t steps = kJammedSteps; // the most a row runs directly
};

/// A staged row (Ascend), chunk by chunk: each chunk's reduction steps (copy in a gathered row, add it to
/// the accumulators), the copy-in of what the rest reads, the loop along the chunk into the output
/// buffer, the copy-out. A reduction inside one branch of a condition of the row (C2's single-row copy)
/// is found by switching the row on the condition: each branch's row is emitted with the branch known.
void emitStagedRow(OpBuilder &b, DomainOp op, const VaryingAnalysis &analysis, StagedRow &staged,
                   ArrayRef<Value> rowIndices, const IRMapping *prologue, int64_t width,
                   DenseMap<Operation *, bool> &decidedIfs,
                   llvm::function_ref<std::unique_ptr<BodyEmitter>(int64_t)> newEmitter) {
  Location loc = op.op()->getLoc();
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value inner = op.bounds().back();
  IRMapping rowScalars;
  if (prologue)
    rowScalars = *prologue;
  for (auto [arg, index] : llvm::zip(op.body().getArguments().drop_back(), rowIndices))
    rowScalars.map(arg, index);
  auto emitChunks = [&] {
    Operation *accumulated = accumulatedReduction(op, analysis, true, decidedIfs);
    // A decided branch's values that do not vary along the row, once per row; every emitter starts there.
    std::unique_ptr<BodyEmitter> branchStart;
    if (!decidedIfs.empty()) {
      branchStart = newEmitter(1);
      branchStart->mapIndices(rowIndices);
      auto [ifOp, then] = *decidedIfs.begin();
      branchStart->emitRowInvariantOps(ifOp->getRegion(then ? 0 : 1).front());
    }
    auto fromBranch = [&](int64_t w) {
      std::unique_ptr<BodyEmitter> emitter = newEmitter(w);
      if (branchStart)
        emitter->startFrom(*branchStart);
      return emitter;
    };
    auto chunks = scf::ForOp::create(b, loc, cst(0), cst(staged.chunks()), cst(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(chunks.getBody());
    Value offset = arith::MulIOp::create(b, loc, chunks.getInductionVar(), cst(staged.chunk()));
    Value length = arith::MinSIOp::create(b, loc, cst(staged.chunk()), arith::SubIOp::create(b, loc, inner, offset));
    staged.beginChunk(offset, length);
    RowSpan span{offset, arith::AddIOp::create(b, loc, offset, length), offset};
    Value accumulators = accumulated ? staged.accumulators(accumulated->getResult(0).getType()) : Value();
    if (accumulated)
      emitAccumulatedSteps(b, op, accumulated, rowIndices, width, span, accumulators, &staged, fromBranch);
    staged.copyIn(b, op.body(), accumulated, branchStart ? branchStart->scalarValues() : rowScalars, Value());
    overSpan(b, loc, span, width, [&](Value h, int64_t w) {
      SmallVector<Value> indices(rowIndices);
      indices.push_back(h);
      std::unique_ptr<BodyEmitter> emitter = fromBranch(w);
      if (accumulated)
        emitter->premap(accumulated->getResult(0), loadAccumulators(b, loc, accumulators, span.local(b, loc, h), w));
      emitter->emitElement(indices);
    });
    staged.copyOut(b, rowScalars);
    if (branchStart)
      branchStart->flushUnrolls();
  };
  // The switch: a top-level scf.if of the row's condition with a reduction directly in a branch.
  scf::IfOp rowSwitch;
  if (!accumulatedReduction(op, analysis, true))
    for (Operation &o : op.body().without_terminator()) {
      auto ifOp = dyn_cast<scf::IfOp>(o);
      if (!ifOp || o.hasAttr(kRowInvariantAttr) || ifOp.getNumResults() == 0 || !ifOp.elseBlock())
        continue;
      Value condition = ifOp.getCondition();
      Operation *def = condition.getDefiningOp();
      bool ofTheRow = rowScalars.contains(condition) || (def && !op.op()->isAncestor(def));
      auto holdsReduction = [](Block *block) {
        return llvm::any_of(*block, [](Operation &inner) { return isa<FoldOp, SumOp>(inner); });
      };
      if (ofTheRow && (holdsReduction(ifOp.thenBlock()) || holdsReduction(ifOp.elseBlock()))) {
        rowSwitch = ifOp;
        break;
      }
    }
  if (!rowSwitch)
    return emitChunks();
  auto branches = scf::IfOp::create(b, loc, rowScalars.lookupOrDefault(rowSwitch.getCondition()), true);
  for (bool then : {true, false}) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint((then ? branches.thenBlock() : branches.elseBlock())->getTerminator());
    decidedIfs = {{rowSwitch.getOperation(), then}};
    emitChunks();
  }
  decidedIfs.clear();
}

void startLaneLoopAtZero(OpBuilder &b, scf::ForOp loop) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value iv = loop.getInductionVar();
  Value at = arith::AddIOp::create(b, loop.getLoc(), loop.getLowerBound(), iv);
  iv.replaceAllUsesExcept(at, at.getDefiningOp());
  b.setInsertionPoint(loop);
  loop.setLowerBound(arith::ConstantIndexOp::create(b, loop.getLoc(), 0));
}

/// The entries of the list whose count is `count`.
static int64_t listLength(Value count) {
  return cast<MemRefType>(count.getDefiningOp<CompactOp>().getList().getType()).getDimSize(0);
}

/// GPU: the count of a short list (2 to `unroll` entries, built in the row's prologue) that a fold along the
/// row runs over, or null. C2 at Mixtral: a token's live experts of 8, usually 2. (A short sum is not
/// compacted on the GPU: moe-compact-predicated-folds.)
static Value shortListAlongRow(DomainOp op, const VaryingAnalysis &analysis, int64_t unroll) {
  Value count;
  op.body().walk([&](FoldOp fold) {
    if (count || !analysis.isVarying(fold.getResult()))
      return;
    auto compact = fold.getBound().getDefiningOp<CompactOp>();
    if (compact && fold.getBound() == compact.getCount() && compact->getBlock() == &op.body() &&
        listLength(compact.getCount()) > 1 && listLength(compact.getCount()) <= unroll)
      count = compact.getCount();
  });
  return count;
}

/// The loops along a row whose reductions run over a short list of `length` entries, in one version per
/// power of two of live entries: a row with `count` of them runs the version for the least power of two (or
/// 0) at or above it, whose folds take that many steps (emitShortListSteps), the list's length at most.
/// A warp's row decides one branch (uniform), and a token routed to 2 of 8 experts gathers 2 rows per
/// vector, not 8 behind their predicates. `emitLoops` emits the loops with `slots` set.
static void emitShortListVersions(OpBuilder &b, Location loc, Value count, int64_t length, int64_t &slots,
                                  llvm::function_ref<void()> emitLoops) {
  OpBuilder::InsertionGuard guard(b);
  for (int64_t version = 0; version < length; version = version ? 2 * version : 2) {
    Value fits = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, count,
                                       arith::ConstantIndexOp::create(b, loc, version));
    auto branch = scf::IfOp::create(b, loc, fits, /*withElseRegion=*/true);
    b.setInsertionPointToStart(branch.thenBlock());
    slots = version;
    emitLoops();
    b.setInsertionPointToStart(branch.elseBlock());
  }
  slots = length;
  emitLoops();
}

void emitRow(OpBuilder &b, DomainOp op, Value row, Value laneStart, int64_t laneStride, int64_t vectorAlignment,
             int64_t reductionWidth, RowTarget rowTarget) {
  Location loc = op.op()->getLoc();
  ScheduleAttr schedule = op.schedule();
  VaryingAnalysis analysis(op);
  int64_t width = analysis.blocker() ? 1 : schedule.getVector();
  SmallVector<Value> rowIndices = unflattenRow(b, loc, row, op.bounds().drop_back());
  Value inner = op.bounds().back();
  ReductionSplit split{reductionWidth, 1, Value()};

  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  // Row-invariant ops (marked by moe-hoist-row-invariants) once per row; a row-invariant write guard
  // then skips the row's loops altogether.
  bool hoisted = llvm::any_of(op.body().without_terminator(), [&](Operation &o) {
    return o.hasAttr(kRowInvariantAttr) || o.hasAttr(kStepTableAttr); // a fold's step table
  });
  auto write = dyn_cast<WriteOp>(op.body().getTerminator());
  bool rowGuard = write && write.getGuard() && write->hasAttr(kRowGuardAttr);
  std::optional<BodyEmitter> prologueEmitter;
  const IRMapping *prologue = nullptr;
  std::optional<OpBuilder::InsertionGuard> insideGuard;
  if (hoisted || rowGuard) {
    prologueEmitter.emplace(b, op, analysis, 1, schedule.getUnroll(), vectorAlignment, split, Value(),
                            Part::RowPrologue);
    prologueEmitter->setRowTarget(rowTarget);
    prologue = &prologueEmitter->emitRowPrologue(rowIndices);
    if (rowGuard) {
      auto guard = scf::IfOp::create(b, loc, prologue->lookupOrDefault(write.getGuard()), false);
      insideGuard.emplace(b);
      b.setInsertionPointToStart(guard.thenBlock());
    }
    prologueEmitter->emitStepTables(); // where the row runs: the steps' checks report only there
  }
  Part part = prologue ? Part::AfterPrologue : Part::All;
  // The prologue's loops unroll last, when nothing refers to them by mapping any more.
  llvm::scope_exit finish([&] {
    if (prologueEmitter)
      prologueEmitter->flushUnrolls();
  });
  // An emitter of width w for this row, of its part of the body, with the branches known here.
  DenseMap<Operation *, bool> decidedIfs;
  Value shortListCount = rowTarget.onGpu && prologue ? shortListAlongRow(op, analysis, schedule.getUnroll()) : Value();
  if (shortListCount && !prologue->contains(shortListCount))
    shortListCount = Value();
  int64_t shortListSlots = 0; // the version being emitted (see emitShortListVersions)
  auto newEmitter = [&](int64_t w) {
    auto emitter = std::make_unique<BodyEmitter>(b, op, analysis, w, schedule.getUnroll(), vectorAlignment, split,
                                                 Value(), part);
    emitter->setRowTarget(rowTarget);
    emitter->decide(decidedIfs);
    if (prologueEmitter)
      emitter->startFrom(*prologueEmitter);
    if (shortListCount)
      emitter->runShortListIn(shortListCount, shortListSlots);
    return emitter;
  };
  // A reduction over gathered rows as the row's value: its steps first, over the whole row (see
  // emitAccumulatedSteps); the loop along the row below then starts from the accumulators.
  StagedRow *staged = rowTarget.staged;
  if (staged)
    return emitStagedRow(b, op, analysis, *staged, rowIndices, prologue, width, decidedIfs, newEmitter);
  // The reduction moe-accumulate-rows marked (CPU), if it still qualifies.
  Operation *accumulated = !rowTarget.onGpu && width > 1 && laneStride == 1 ? accumulatedReduction(op, analysis, false) : nullptr;
  if (accumulated && !accumulated->hasAttr(kAccumulatedRowAttr))
    accumulated = nullptr;
  // Vector part: h in [laneStart*V, (inner/V)*V) step laneStride*V.
  Value mainEnd = arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, inner, cst(width)), cst(width));
  Value accumulators;
  // A row with at most kJammedSteps steps (C2's K live experts of E) skips the accumulators: each vector
  // adds its steps in registers, as a fully unrolled reduction would (DirectSteps); one with none writes
  // the init.
  std::optional<DirectSteps> direct;
  scf::IfOp fewSteps;
  std::optional<OpBuilder::InsertionGuard> branchGuard;
  if (accumulated) {
    int64_t length = cast<arith::ConstantIndexOp>(inner.getDefiningOp()).value();
    OpBuilder entry = builderAtFunctionEntry(b);
    accumulators = memref::AllocaOp::create(entry, loc, MemRefType::get({length}, b.getF32Type()));
    direct.emplace(b, op, accumulated, rowIndices, newEmitter);
    fewSteps = scf::IfOp::create(b, loc, direct->fits(b, loc), /*withElseRegion=*/true);
    branchGuard.emplace(b);
    b.setInsertionPointToStart(fewSteps.elseBlock());
    emitAccumulatedSteps(b, op, accumulated, rowIndices, width, RowSpan{cst(0), inner, Value()}, accumulators, nullptr,
                         newEmitter);
  }
  enum class Direct { No, NoStep, Steps } directNow = Direct::No; // which branch the loops below go to
  int64_t directSlots = 0; // Direct::Steps: the steps of the version being emitted
  auto emitLoop = [&](Value begin, Value end, int64_t step, int64_t w) {
    auto loop = scf::ForOp::create(b, loc, begin, end, cst(step));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> indices(rowIndices);
    indices.push_back(loop.getInductionVar());
    {
      std::unique_ptr<BodyEmitter> emitter = newEmitter(w);
      if (accumulated)
        emitter->premap(accumulated->getResult(0),
                        directNow == Direct::Steps ? direct->sum(b, loc, indices, w, directSlots)
                        : directNow == Direct::NoStep
                            ? direct->initValue(b, loc, w)
                            : loadAccumulators(b, loc, accumulators, loop.getInductionVar(), w));
      emitter->emitElement(indices);
    }
    // GPU: a loop that every lane runs a constant number of times (the lane's offset, laneStart * w, is below
    // its step) is marked: moe-unroll-row-loops unrolls it once the passes that version and guard its body have
    // run. Left from the lane's offset, its count is no constant that LLVM would unroll it by unasked (B2 at
    // Qwen3: its 2 steps of 8 gathers, unrolled, took the registers of 8 of its 32 warps per SM).
    APInt innerValue;
    if (rowTarget.onGpu && w > 1 && matchPattern(inner, m_ConstantInt(&innerValue)) &&
        innerValue.getSExtValue() / w * w % step == 0) {
      b.setInsertionPoint(loop);
      loop.setUpperBound(cst(innerValue.getSExtValue() / w * w));
      loop->setAttr(kLaneLoopAttr, b.getUnitAttr());
    }
  };
  auto emitLoops = [&](RowTarget target) {
    RowTarget saved = rowTarget;
    rowTarget = target;
    if (width > 1) {
      Value vectorBegin = arith::MulIOp::create(b, loc, laneStart, cst(width));
      emitLoop(vectorBegin, mainEnd, laneStride * width, width);
    }
    // Scalar remainder (everything when width is 1).
    APInt innerValue;
    if (!(width > 1 && matchPattern(inner, m_ConstantInt(&innerValue)) && innerValue.getSExtValue() % width == 0)) {
      Value tailBegin = width > 1 ? arith::AddIOp::create(b, loc, mainEnd, laneStart).getResult() : laneStart;
      emitLoop(tailBegin, inner, laneStride, 1);
    }
    rowTarget = saved;
  };
  if (shortListCount)
    emitShortListVersions(b, loc, prologue->lookup(shortListCount), listLength(shortListCount), shortListSlots,
                          [&] { emitLoops(rowTarget); });
  else
    emitLoops(rowTarget);
  if (fewSteps) {
    b.setInsertionPointToStart(fewSteps.thenBlock());
    auto noStep = scf::IfOp::create(b, loc, direct->none(b, loc), /*withElseRegion=*/true);
    b.setInsertionPointToStart(noStep.thenBlock());
    directNow = Direct::NoStep;
    emitLoops(rowTarget);
    b.setInsertionPointToStart(noStep.elseBlock());
    directNow = Direct::Steps;
    direct->prepare(b, loc);
    // A version per power of two of steps: a row adds at most twice its live steps' terms (B2 in active
    // mode, a token's live slots of 8: one version of 8 masked steps lost a tenth of its speed).
    for (int64_t slots = 1; slots < direct->mostSteps(); slots *= 2) {
      auto fits = scf::IfOp::create(b, loc, direct->fitsIn(b, loc, slots), /*withElseRegion=*/true);
      b.setInsertionPointToStart(fits.thenBlock());
      directSlots = slots;
      emitLoops(rowTarget);
      b.setInsertionPointToStart(fits.elseBlock());
    }
    directSlots = direct->mostSteps();
    emitLoops(rowTarget);
  }
}

} // namespace moec::moe
