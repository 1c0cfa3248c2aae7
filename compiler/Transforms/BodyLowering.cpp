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
//===----------------------------------------------------------------------===//
#include "BodyEmitter.h"

using namespace mlir;

namespace moec::moe {

DomainOp DomainOp::dyn(Operation *op) {
  DomainOp d;
  if (isa_and_nonnull<ComputeOp, ScatterOp>(op))
    d.operation = op;
  return d;
}

ScheduleAttr DomainOp::schedule() const {
  auto schedule = operation->getAttrOfType<ScheduleAttr>("schedule");
  assert(schedule && "moe-schedule must run before the loop lowerings");
  return schedule;
}

void DomainOp::setSchedule(ScheduleAttr schedule) { operation->setAttr("schedule", schedule); }

LogicalResult requireSchedules(ArrayRef<DomainOp> ops) {
  for (DomainOp op : ops)
    if (!op.op()->getAttrOfType<ScheduleAttr>("schedule"))
      return op.op()->emitOpError("has no schedule; run moe-schedule first");
  return success();
}

SmallVector<DomainOp> collectDomainOps(Operation *root) {
  SmallVector<DomainOp> ops;
  root->walk([&](Operation *op) {
    if (DomainOp d = DomainOp::dyn(op))
      ops.push_back(d);
  });
  return ops;
}

std::string viewedTensorName(Value memref) {
  auto view = memref.getDefiningOp<ViewOp>();
  auto arg = view ? dyn_cast<BlockArgument>(view.getPtr()) : BlockArgument();
  if (!arg)
    return "";
  auto func = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
  auto text = func ? func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "moe.arg") : StringAttr();
  if (!text || !text.getValue().starts_with("tensor:"))
    return "";
  return text.getValue().drop_front(7).str();
}

bool isVectorizable(DomainOp op) { return VaryingAnalysis(op).blocker() == nullptr; }

DenseSet<Value> valuesAlongRow(DomainOp op) { return VaryingAnalysis(op).varyingValues(); }

SmallVector<Operation *> rowInvariantOps(DomainOp op) {
  VaryingAnalysis analysis(op);
  Block &body = op.body();
  DenseSet<Operation *> invariant;
  SmallVector<Operation *> ops;
  // Whether `v` exists before the row's loop: row indices, values from above the body, values of ops
  // already found invariant, and anything defined inside the op being checked.
  auto available = [&](Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return arg.getOwner() != &body || v != analysis.innerIndex();
    Operation *def = v.getDefiningOp();
    return def->getBlock() != &body || invariant.contains(def);
  };
  for (Operation &top : body.without_terminator()) {
    bool ok = llvm::none_of(top.getResults(), [&](Value v) { return analysis.isVarying(v); });
    top.walk([&](Operation *nested) {
      for (Value v : nested->getOperands())
        ok &= !analysis.isVarying(v) && available(v);
    });
    if (ok) {
      invariant.insert(&top);
      ops.push_back(&top);
    }
  }
  return ops;
}

bool hasRowInvariantGuard(DomainOp op, ArrayRef<Operation *> invariant) {
  auto write = dyn_cast<WriteOp>(op.body().getTerminator());
  if (!write || !write.getGuard())
    return false;
  Value guard = write.getGuard();
  if (isa<BlockArgument>(guard))
    return guard != op.body().getArguments().back();
  Operation *def = guard.getDefiningOp();
  return def->getBlock() != &op.body() || llvm::is_contained(invariant, def);
}

/// The first moe.sum in the body that reduces along its own index, if any.
/// The add of an integer-sum fold's step (isIntegerSumFold), or null.
static arith::AddIOp integerSumStep(FoldOp fold) {
  Block &body = fold.getBody().front();
  Value acc = body.getArgument(1);
  if (!acc.getType().isIndex() && !acc.getType().isSignlessInteger(64) && !acc.getType().isSignlessInteger(32))
    return {};
  auto addsTo = [&](Value v) -> arith::AddIOp {
    auto add = v.getDefiningOp<arith::AddIOp>();
    if (!add || add->getBlock() != &body || (add.getLhs() == acc) == (add.getRhs() == acc))
      return {};
    return add;
  };
  Value step = cast<YieldOp>(body.getTerminator()).getValue();
  arith::AddIOp add = addsTo(step);
  Operation *select = nullptr;
  if (!add) {
    auto sel = step.getDefiningOp<arith::SelectOp>();
    if (!sel || sel->getBlock() != &body || sel.getCondition() == acc)
      return {};
    if (sel.getTrueValue() == acc)
      add = addsTo(sel.getFalseValue());
    else if (sel.getFalseValue() == acc)
      add = addsTo(sel.getTrueValue());
    select = sel;
  }
  if (!add || !llvm::all_of(acc.getUsers(), [&](Operation *user) { return user == add || user == select; }))
    return {};
  return add;
}

bool isIntegerSumFold(FoldOp fold) { return static_cast<bool>(integerSumStep(fold)); }

std::optional<int64_t> countingFoldIncrement(FoldOp fold) {
  arith::AddIOp add = integerSumStep(fold);
  if (!add)
    return std::nullopt;
  Value acc = fold.getBody().front().getArgument(1);
  APInt c;
  if (!matchPattern(add.getLhs() == acc ? add.getRhs() : add.getLhs(), m_ConstantInt(&c)))
    return std::nullopt;
  return c.getSExtValue();
}

SumOp contiguousReductionOf(DomainOp op) {
  SumOp found;
  op.op()->walk([&](SumOp sum) {
    if (!found && contiguousReduction(sum))
      found = sum;
  });
  return found;
}

/// How many times `op` runs per row: the product of the constant bounds of the sums, folds and compacts
/// around it up to `stop`, but for `along` (the reduction a row streams). A bound known only at run time
/// (a compacted list's length) counts once.
int64_t stepsPerRow(Operation *op, Operation *stop, Operation *along, int64_t liveSteps) {
  int64_t steps = 1;
  for (Operation *p = op->getParentOp(); p && p != stop; p = p->getParentOp()) {
    if (p == along)
      continue;
    Value bound;
    if (auto sum = dyn_cast<SumOp>(p))
      bound = sum.getBound();
    else if (auto fold = dyn_cast<FoldOp>(p))
      bound = fold.getBound();
    else if (auto compact = dyn_cast<CompactOp>(p))
      bound = compact.getBound();
    APInt value;
    if (!bound || !matchPattern(bound, m_ConstantInt(&value)) || value.getSExtValue() < 1)
      continue;
    int64_t count = value.getSExtValue();
    if (liveSteps > 0 && isa<SumOp, FoldOp>(p) && predicatedStep(p))
      count = std::min(count, liveSteps);
    steps = std::min<int64_t>(steps * count, int64_t(1) << 40);
  }
  return steps;
}

std::optional<PredicatedStep> predicatedStep(Operation *reduction) {
  Block &body = reduction->getRegion(0).front();
  Value yielded = cast<YieldOp>(body.getTerminator()).getValue();
  auto branch = yielded.getDefiningOp<scf::IfOp>();
  if (!branch || branch->getBlock() != &body || branch.getNumResults() != 1 || !branch.elseBlock())
    return std::nullopt;
  // Whether `v` leaves the accumulator unchanged: the fold's accumulator itself, or +0.0 for a sum.
  auto keepsAccumulator = [&](Value v) {
    if (isa<FoldOp>(reduction))
      return v == body.getArgument(1);
    APFloat zero(0.0f);
    return matchPattern(v, m_ConstantFloat(&zero)) && zero.isPosZero();
  };
  bool thenKeeps = keepsAccumulator(branch.thenYield().getOperand(0));
  bool elseKeeps = keepsAccumulator(branch.elseYield().getOperand(0));
  if (thenKeeps == elseKeeps)
    return std::nullopt;
  return PredicatedStep{branch, elseKeeps};
}

int64_t streamedBytesPerRow(DomainOp op, int64_t inner) {
  Value along = op.body().getArguments().back();
  int64_t bytes = std::max<int64_t>(1, cast<MemRefType>(op.output().getType()).getElementTypeBitWidth() / 8);
  op.op()->walk([&](memref::LoadOp load) {
    if (load.getIndices().empty() || load.getIndices().back() != along)
      return;
    int64_t elem = std::max<int64_t>(1, load.getMemRefType().getElementTypeBitWidth() / 8);
    bytes = std::min<int64_t>(bytes + elem * stepsPerRow(load, op.op(), nullptr, kAssumedLiveSteps), int64_t(1) << 40);
  });
  return std::min<int64_t>(bytes * std::max<int64_t>(inner, 1), int64_t(1) << 50);
}

GpuMapping gpuMapping(DomainOp op) {
  if (runsPerPoint(op))
    return op.op()->hasAttr(kPointRowsAttr) ? GpuMapping::WarpPerPointRow : GpuMapping::WarpPerPoint;
  return GpuMapping::Rows;
}

ReductionShape reductionShape(DomainOp op) {
  SumOp sum = contiguousReductionOf(op);
  if (!sum)
    return {};
  ReductionShape shape;
  APInt bound;
  if (matchPattern(sum.getBound(), m_ConstantInt(&bound)))
    shape.length = bound.getSExtValue();
  sum.getBody().walk([&](memref::LoadOp load) {
    int64_t bytes = std::max<int64_t>(1, load.getType().getIntOrFloatBitWidth() / 8);
    shape.elemBytes = std::max(shape.elemBytes, bytes);
  });
  return shape;
}

Value emitRowCount(OpBuilder &b, DomainOp op) {
  Location loc = op.op()->getLoc();
  Value rows = arith::ConstantIndexOp::create(b, loc, 1);
  for (Value bound : op.bounds().drop_back())
    rows = arith::MulIOp::create(b, loc, rows, bound);
  return rows;
}

namespace {

/// The longest row whose f32 accumulators an accumulated row keeps on the stack (64 KiB).
constexpr int64_t kMaxAccumulatedRow = 16384;
/// The most fold steps one pass over an accumulated row runs (gathered rows read at once).
constexpr int64_t kJammedSteps = 8;

/// Whether a moe.sum or moe.fold adds f32 terms step by step, as a CPU accumulated row can run them: a
/// sum, or a fold whose step is a term addition (termAdditionReader) with acc used only there.
bool accumulatesTerms(Operation *reduction) {
  if (!reduction->getResult(0).getType().isF32())
    return false;
  auto fold = dyn_cast<FoldOp>(reduction);
  if (!fold)
    return isa<SumOp>(reduction);
  Block &step = fold.getBody().front();
  Value acc = step.getArgument(1), next = cast<YieldOp>(step.getTerminator()).getValue();
  Operation *reader = termAdditionReader(next, acc);
  return reader && reader->getBlock() == &step && next.getDefiningOp()->getBlock() == &step && acc.hasOneUse();
}

/// CPU: the reduction (moe.fold or moe.sum) of a row-at-a-time domain whose steps can run one after the
/// other over the whole row (an accumulated row, see emitRow), or null. It must
///   - vary along the row and add f32 terms (accumulatesTerms): a sum, or a fold whose step is `acc + x`
///     (either way round) or fma(x, w, acc), rounded to T after each step or not (C2 accumulating in T,
///     carried as f32), with acc used only there;
///   - have a bound (and init) that the row's prologue computes or that are defined outside the body, and
///     not be short enough to unroll fully;
///   - be followed only by elementwise arithmetic on its result (a truncation) up to the yield;
///   - while everything else in the body is row-invariant and the row has a constant length.
///   Staged (Ascend) rows take any such reduction with a float result (C2 accumulating in T too): their
///   loads along the row must read UB buffers that hold one gathered row at a time, whatever the bound.
///   `decided`: scf.if ops of the body whose branch is known (a staged row's switch), read as that branch.
Operation *accumulatedReduction(DomainOp op, const VaryingAnalysis &analysis, bool staged,
                                const DenseMap<Operation *, bool> &decided = DenseMap<Operation *, bool>()) {
  Block &body = op.body();
  APInt length;
  if (!matchPattern(op.bounds().back(), m_ConstantInt(&length)) ||
      (!staged && length.getSExtValue() > kMaxAccumulatedRow))
    return nullptr;
  auto availableBeforeRow = [&](Value v) {
    Operation *def = v.getDefiningOp();
    bool inDecidedBranch = def && decided.count(def->getParentOp()) && def->getParentOp()->getParentOp() == op.op();
    return !analysis.isVarying(v) && (!def || !op.op()->isAncestor(def) || def->hasAttr(kRowInvariantAttr) ||
                                      matchPattern(v, m_Constant()) || inDecidedBranch);
  };
  SmallVector<Operation *> ops; // the body's top-level ops, a decided scf.if as its branch's
  std::function<void(Block &)> flatten = [&](Block &block) {
    for (Operation &o : block.without_terminator()) {
      auto it = decided.find(&o);
      if (it == decided.end())
        ops.push_back(&o);
      else
        flatten(it->second ? o.getRegion(0).front() : o.getRegion(1).front());
    }
  };
  flatten(body);
  Operation *reduction = nullptr;
  for (Operation *top : ops) {
    Operation &o = *top;
    if (o.hasAttr(kRowInvariantAttr))
      continue;
    // In a decided branch, what does not vary runs once per row before the steps (emitStagedRow).
    if (o.getBlock() != &body && !reduction &&
        llvm::none_of(o.getResults(), [&](Value r) { return analysis.isVarying(r); }))
      continue;
    if (isa<FoldOp, SumOp>(o) && !reduction) {
      reduction = &o;
      continue;
    }
    // After the reduction: elementwise arithmetic on values that vary through it only.
    bool elementwise = (o.getDialect()->getNamespace() == "arith" || o.getDialect()->getNamespace() == "math") &&
                       o.hasTrait<OpTrait::Elementwise>() && o.getNumResults() == 1;
    if (!reduction || !elementwise || !analysis.isVarying(o.getResult(0)) ||
        !llvm::all_of(o.getOperands(), [&](Value v) { return analysis.isVarying(v) || availableBeforeRow(v); }))
      return nullptr;
  }
  Type type = reduction ? reduction->getResult(0).getType() : Type();
  if (!reduction || !(staged ? isa<FloatType>(type) : type.isF32()) || !analysis.isVarying(reduction->getResult(0)) ||
      !availableBeforeRow(reduction->getOperand(0)))
    return nullptr;
  // A reduction the lowering unrolls fully (a constant bound up to the unroll: B2's top-8) already issues
  // all its gathers at once and has its index loads hoisted; accumulating would only add passes over the
  // accumulators (measured: 0.65 against 0.91 of memcpy for B2 top-2).
  APInt steps;
  if (!staged && matchPattern(reduction->getOperand(0), m_ConstantInt(&steps)) &&
      steps.getSExtValue() <= op.schedule().getUnroll())
    return nullptr;
  if (auto write = dyn_cast<WriteOp>(body.getTerminator()); write && write.getGuard() && !availableBeforeRow(write.getGuard()))
    return nullptr;
  auto fold = dyn_cast<FoldOp>(reduction);
  if (fold && !availableBeforeRow(fold.getInit()))
    return nullptr;
  return staged || accumulatesTerms(reduction) ? reduction : nullptr;
}

} // namespace

Operation *termAdditionReader(Value next, Value acc) {
  // f32(T(acc + x)): accumulating in T, carried as f32 (moe-widen-rounded-folds)
  if (auto widen = next.getDefiningOp<arith::ExtFOp>())
    if (auto round = widen.getIn().getDefiningOp<arith::TruncFOp>(); round && widen.getIn().hasOneUse())
      return next.getType().isF32() && round.getIn().getType().isF32() ? termAdditionReader(round.getIn(), acc)
                                                                        : nullptr;
  // T(f32(acc) + x): accumulating in T, kept in T (the GPU); the widening of acc reads it
  if (auto round = next.getDefiningOp<arith::TruncFOp>();
      round && !next.getType().isF32() && acc.getType() == next.getType())
    for (Operation *user : acc.getUsers())
      if (auto widen = dyn_cast<arith::ExtFOp>(user); widen && widen.getOut().getType().isF32() && widen->hasOneUse() &&
                                                      termAdditionReader(round.getIn(), widen.getOut()))
        return widen;
  if (!next.getType().isF32())
    return nullptr;
  if (auto add = next.getDefiningOp<arith::AddFOp>())
    return add.getLhs() == acc || add.getRhs() == acc ? add.getOperation() : nullptr;
  if (auto fma = next.getDefiningOp<math::FmaOp>()) // a weighted sum: acc + x * w, rounded once
    return fma.getC() == acc ? fma.getOperation() : nullptr;
  return nullptr;
}

/// The part of a row a loop along it covers, [begin, end): the whole row on the CPU, a chunk on Ascend,
/// whose buffers are indexed from the chunk's start (`offset`; null: 0).
struct RowSpan {
  Value begin, end, offset;
  Value local(OpBuilder &b, Location loc, Value h) const {
    return offset ? Value(arith::SubIOp::create(b, loc, h, offset)) : h;
  }
};

/// Loops over `span` (a vector part, then the scalar rest), `body(h, w)` for each.
void overSpan(OpBuilder &b, Location loc, const RowSpan &span, int64_t width,
              const std::function<void(Value, int64_t)> &body) {
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value vectorEnd;
  std::optional<int64_t> begin = getConstantIntValue(span.begin), end = getConstantIntValue(span.end);
  if (begin && end) { // the whole row: the bound as a constant
    vectorEnd = cst(*begin + (*end - *begin) / width * width);
  } else {
    Value length = arith::SubIOp::create(b, loc, span.end, span.begin);
    vectorEnd = arith::AddIOp::create(
        b, loc, span.begin, arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, length, cst(width)), cst(width)));
  }
  using Part = std::tuple<Value, Value, int64_t>; // begin, end, vector width
  for (auto [begin, end, w] : {Part{span.begin, vectorEnd, width}, Part{vectorEnd, span.end, 1}}) {
    auto loop = scf::ForOp::create(b, loc, begin, end, cst(w));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    body(loop.getInductionVar(), w);
  }
}

/// The steps of `accumulated` (an accumulatedReduction) for the row at `rowIndices`, each over the whole
/// row (`span`) instead of every step for each vector: into `accumulators` (f32; a staged row's reduction
/// type on Ascend), set to the reduction's
/// init (+0.0 for a sum), then passes of 8 steps (the last one masked: its steps past the bound are dropped;
/// one at a time for a staged row, whose UB holds one gathered row per step), each reading its steps'
/// gathered rows at once and adding their terms to each element in step order. Each element adds its terms in the same order as the
/// plain lowering, so results are the same; a step's row-invariant work (its list entry, index load and
/// check) runs once per pass instead of once per vector.
/// `newEmitter(w)` makes an emitter of width w that starts from the row's prologue.
void emitAccumulatedSteps(OpBuilder &b, DomainOp op, Operation *accumulated, ArrayRef<Value> rowIndices,
                          int64_t width, const RowSpan &span, Value accumulators, StagedRow *staged,
                          llvm::function_ref<std::unique_ptr<BodyEmitter>(int64_t)> newEmitter) {
  Location loc = op.op()->getLoc();
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  std::unique_ptr<BodyEmitter> rowStart = newEmitter(1);
  rowStart->mapIndices(rowIndices);
  auto fold = dyn_cast<FoldOp>(accumulated);
  Value init = fold ? rowStart->value(fold.getInit())
                    : Value(arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f))); // as emitSum's
  overSpan(b, loc, span, width, [&](Value h, int64_t w) {
    Value v = w == 1 ? init : Value(vector::BroadcastOp::create(b, loc, VectorType::get({w}, init.getType()), init));
    storeAccumulators(b, loc, v, accumulators, span.local(b, loc, h), w);
  });
  Block &stepBody = accumulated->getRegion(0).front();
  Value bound = rowStart->value(accumulated->getOperand(0));
  // One pass of `jam` steps from step `first`, adding each to the accumulators in order; with `masked`, a
  // step at or past the bound redoes the last step's work (so it reads only what a live step reads) and its
  // result is dropped by a select.
  auto emitPass = [&](Value first, int64_t jam, bool masked) {
    std::vector<std::unique_ptr<BodyEmitter>> stepStarts; // each step's row-invariant values
    SmallVector<Value> live;
    Value last = arith::SubIOp::create(b, loc, bound, cst(1));
    for (int64_t j = 0; j < jam; ++j) {
      std::unique_ptr<BodyEmitter> &start = stepStarts.emplace_back(newEmitter(1));
      start->startFrom(*rowStart);
      Value step = arith::AddIOp::create(b, loc, first, cst(j));
      if (masked && j > 0) {
        live.push_back(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, step, bound));
        step = arith::MinUIOp::create(b, loc, step, last);
      } else {
        live.push_back(Value());
      }
      start->premap(stepBody.getArgument(0), step);
      start->emitRowInvariantOps(stepBody);
      if (staged)
        staged->copyIn(b, stepBody, nullptr, start->scalarValues(), step);
    }
    overSpan(b, loc, span, width, [&](Value h, int64_t w) {
      SmallVector<Value> indices(rowIndices);
      indices.push_back(h);
      Value local = span.local(b, loc, h);
      Value acc = loadAccumulators(b, loc, accumulators, local, w);
      for (auto [start, isLive] : llvm::zip(stepStarts, live)) {
        std::unique_ptr<BodyEmitter> stepEmitter = newEmitter(w);
        stepEmitter->startFrom(*start);
        stepEmitter->mapIndices(indices);
        Value next = stepEmitter->emitReductionStep(accumulated, acc);
        stepEmitter->flushUnrolls();
        Value mask = isLive;
        if (mask && w > 1)
          mask = vector::BroadcastOp::create(b, loc, VectorType::get({w}, b.getI1Type()), mask);
        acc = mask ? Value(arith::SelectOp::create(b, loc, mask, next, acc)) : next;
      }
      storeAccumulators(b, loc, acc, accumulators, local, w);
    });
    for (std::unique_ptr<BodyEmitter> &start : stepStarts)
      start->flushUnrolls();
  };
  // Whole passes of `jam` steps, then (unstaged) the rest in one masked pass: two loops along the row, not
  // one per power of two below `jam`.
  int64_t jam = staged ? 1 : kJammedSteps;
  Value whole = arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, bound, cst(jam)), cst(jam));
  auto passes = scf::ForOp::create(b, loc, cst(0), whole, cst(jam));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(passes.getBody());
    emitPass(passes.getInductionVar(), jam, /*masked=*/false);
  }
  if (jam > 1) {
    auto rest = scf::IfOp::create(b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, whole, bound),
                                  /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(rest.thenBlock());
    emitPass(whole, jam, /*masked=*/true);
  }
  rowStart->flushUnrolls();
}

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

int64_t outputVectorAlignment(DomainOp op, int64_t baseAlignment) {
  VaryingAnalysis analysis(op);
  int64_t width = analysis.blocker() ? 1 : op.schedule().getVector();
  return vectorAccessAlignment(op.output(), width, baseAlignment);
}

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
    return o.hasAttr(kRowInvariantAttr) || (rowTarget.stepTables && isa<FoldOp>(o)); // a fold's step table
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
    if (rowTarget.stepTables) // where the row runs: the steps' checks report only there
      prologueEmitter->emitStepTables();
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
  Operation *accumulated =
      rowTarget.accumulateRows && width > 1 && laneStride == 1 ? accumulatedReduction(op, analysis, false) : nullptr;
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
    if (rowTarget.laneLoops && w > 1 && matchPattern(inner, m_ConstantInt(&innerValue)) &&
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

Value emitStreamingCondition(OpBuilder &b, Location loc, Value output, int64_t alignment) {
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, output);
  Value misalignment = arith::RemUIOp::create(b, loc, base, cst(alignment));
  Value aligned = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, misalignment, cst(0));
  auto type = cast<MemRefType>(output.getType());
  Value elements = cst(1);
  for (int64_t d = 0; d < type.getRank(); ++d)
    elements = arith::MulIOp::create(b, loc, elements, memref::DimOp::create(b, loc, output, d));
  Value large = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, elements,
                                      cst(kStreamingStoreBytes / std::max<int64_t>(1, type.getElementTypeBitWidth() / 8)));
  return arith::AndIOp::create(b, loc, aligned, large);
}

} // namespace moec::moe
