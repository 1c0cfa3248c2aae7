//===- AccumulatedRows.cpp - A row's reduction step by step over the whole row ---===//
//
// A row whose value is a reduction over gathered rows (an accumulated row: CPU rows, Ascend's staged rows)
// runs the reduction's steps one after the other over the whole row, into accumulators, instead of every
// step for each vector: accumulatedReduction finds the reduction, emitAccumulatedSteps emits its passes;
// emitRow and emitStagedRow (BodyLowering.cpp) then run the loop along the row from the accumulators.
//===----------------------------------------------------------------------===//
#include "AccumulatedRows.h"

using namespace mlir;

namespace moec::moe {

namespace {

/// The longest row whose f32 accumulators an accumulated row keeps on the stack (64 KiB).
constexpr int64_t kMaxAccumulatedRow = 16384;

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

} // namespace

Operation *accumulatedReduction(DomainOp op, const VaryingAnalysis &analysis, bool staged,
                                const DenseMap<Operation *, bool> &decided) {
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

} // namespace moec::moe
