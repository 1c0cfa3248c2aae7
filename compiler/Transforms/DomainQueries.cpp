//===- DomainQueries.cpp - What the lowerings ask of a domain op ----------===//
//
// DomainOp (a moe.compute or moe.scatter) and the questions the passes and lowerings ask of one: its schedule,
// whether it vectorizes, its row-invariant ops and guard, its integer-sum folds and predicated steps, its
// contiguous reduction, the steps and bytes a row runs and streams, its GPU mapping, and its count of rows.
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
  ArgAttr role = func ? argRole(func, arg.getArgNumber()) : nullptr;
  if (!role || role.getRole() != ArgRole::Tensor)
    return "";
  return role.getName().str();
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

} // namespace moec::moe
