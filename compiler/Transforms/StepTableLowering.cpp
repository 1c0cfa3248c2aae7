//===- StepTableLowering.cpp - GPU: a fold's per-step work, once per step, in shared memory ---===//
//
// BodyEmitter's step tables: a fold along the row (marked moe.step_table by moe-step-tables) whose steps do
// work that does not vary along it (a list entry, an index load and its checks, a prob) does that work in
// the row's prologue, once per step, into shared-memory columns that the steps along the row read (see
// emitStepTables in BodyEmitter.h).
//===----------------------------------------------------------------------===//
#include "moec/contracts/Schedule.h"
#include "BodyEmitter.h"

#include "moec/compiler/Transforms/ErrorPaths.h"

using namespace mlir;

namespace moec::moe {

void BodyEmitter::emitStepTables() {
  if (!onGpu || part != Part::RowPrologue || !warpLane || domain.schedule().getThreads() % kWarpSize != 0)
    return;
  // A fold moe-step-tables marked, which varies along the row: its accumulator does, so no op that reads it
  // counts as per-step work.
  for (Operation &op : domain.body().without_terminator()) {
    auto fold = dyn_cast<FoldOp>(op);
    if (fold && fold->hasAttr(kStepTableAttr) && analysis.isVarying(fold.getResult()))
      emitStepTable(fold);
  }
}

Value BodyEmitter::sharedBuffer(int64_t size, Type element, Location loc) {
  auto func = b.getInsertionBlock()->getParentOp()->getParentOfType<gpu::GPUFuncOp>();
  auto space = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Value buffer =
      func.addWorkgroupAttribution(MemRefType::get({size}, element, MemRefLayoutAttrInterface(), space), loc);
  func.setWorkgroupAttributionAttr(func.getNumWorkgroupAttributions() - 1, LLVM::LLVMDialect::getAlignAttrName(),
                                   b.getI64IntegerAttr(16));
  return buffer;
}

Value BodyEmitter::warpBase(Location loc, int64_t length) {
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value tx = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value ty = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::y);
  Value threads = cst(domain.schedule().getThreads());
  Value linear = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, ty, threads), tx);
  return arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, linear, cst(kWarpSize)), cst(length));
}

bool BodyEmitter::stepInvariant(Operation &op) const {
  bool invariant = true;
  op.walk([&](Operation *inner) {
    if (llvm::any_of(inner->getOperands(), [&](Value v) { return analysis.isVarying(v); }) ||
        llvm::any_of(inner->getResults(), [&](Value v) { return analysis.isVarying(v); }))
      invariant = false;
  });
  return invariant;
}

int64_t mostFoldSteps(FoldOp fold) {
  APInt constant;
  if (matchPattern(fold.getBound(), m_ConstantInt(&constant)))
    return constant.getSExtValue();
  if (auto compact = fold.getBound().getDefiningOp<CompactOp>(); compact && fold.getBound() == compact.getCount())
    return cast<MemRefType>(compact.getList().getType()).getDimSize(0);
  return 0;
}

/// Whether a check's column is false only at a step that runs the check and fails it: the check is tested (by
/// the branches that report it) in the block that computes it, the step's own or a branch of it directly in the
/// step, whose other side the table takes to hold (vacuousCheck). A check computed where a nested branch then
/// tests it may be false at a step that never runs it.
static bool testedWhereRun(Value check, Block &step) {
  Operation *def = check.getDefiningOp();
  if (!def)
    return false;
  Block *block = def->getBlock();
  Operation *around = block->getParentOp();
  if (block != &step && !(isa<scf::IfOp>(around) && around->getBlock() == &step))
    return false;
  return llvm::all_of(check.getUsers(), [&](Operation *user) {
    return user->getBlock() == block && !user->hasTrait<OpTrait::IsTerminator>();
  });
}

void BodyEmitter::emitStepTable(FoldOp fold) {
  Block &step = fold.getBody().front();
  int64_t length = mostFoldSteps(fold);
  // The bound must be known in the prologue: computed there, or defined before the domain.
  Value bound = fold.getBound();
  bool boundKnown = scalars.contains(bound) || !domain.op()->isAncestor(bound.getParentBlock()->getParentOp());
  if (length <= 0 || length > kMaxStepTableSteps || !boundKnown)
    return;
  SmallVector<Operation *> invariant;
  DenseSet<Operation *> invariantSet;
  bool readsMemory = false;
  // An op whose operands the table's loop has: the step index, values from before the fold, from inside
  // the op, or from per-step work already taken.
  auto ready = [&](Operation &op) {
    return !op.walk([&](Operation *inner) {
                for (Value v : inner->getOperands()) {
                  Operation *def = v.getDefiningOp();
                  Operation *where = def ? def : cast<BlockArgument>(v).getOwner()->getParentOp();
                  if (v != step.getArgument(0) && fold->isAncestor(where) && !op.isAncestor(where) &&
                      !(def && invariantSet.contains(def)))
                    return WalkResult::interrupt();
                }
                return WalkResult::advance();
              }).wasInterrupted();
  };
  auto take = [&](Operation &op) {
    invariantSet.insert(&op);
    op.walk([&](memref::LoadOp load) { readsMemory |= !sharedLists.count(load.getMemRef()); });
  };
  // A short list's steps (a list of the warp's lanes, emitLaneCompact) load their weights themselves: a float
  // that a load gives and only the term's arithmetic reads (C2's prob of each live expert). In the table, the
  // row's prologue would wait for that load, which depends on the row index, before the first gather; in the
  // step it overlaps the gathers (C2 weighted at Mixtral: 85.9 -> 90.3 % of copy). A long list keeps them in
  // the table: its jammed steps would hold 8 weights a vector (at DeepSeek-V3: 93.4 -> 85.9 %, half the warps).
  auto compact = bound.getDefiningOp<CompactOp>();
  auto lane = compact ? laneLists.find(compact.getList()) : laneLists.end();
  bool laneList = lane != laneLists.end();
  auto deferred = [&](Operation &op) {
    bool loads = false;
    op.walk([&](memref::LoadOp load) { loads |= !sharedLists.count(load.getMemRef()); });
    return laneList && loads && op.getNumResults() == 1 && isa<FloatType>(op.getResult(0).getType());
  };
  for (Operation &op : step.without_terminator())
    if (stepInvariant(op) && ready(op) && !deferred(op)) {
      invariant.push_back(&op);
      take(op);
    }
  // Per-step work inside a branch of the step whose condition is per-step too (C2 at few experts:
  // `r < 0 ? acc : fma(x[r, h], w[r], acc)`): the branch's ops that do not vary along the row.
  SmallVector<scf::IfOp> branching;
  for (Operation &op : step.without_terminator()) {
    auto ifOp = dyn_cast<scf::IfOp>(op);
    if (!ifOp || invariantSet.contains(&op) || analysis.isVarying(ifOp.getCondition()))
      continue;
    Value cond = ifOp.getCondition();
    Operation *condDef = cond.getDefiningOp();
    Operation *condAt = condDef ? condDef : cast<BlockArgument>(cond).getOwner()->getParentOp();
    if (fold->isAncestor(condAt) && !(condDef && invariantSet.contains(condDef)))
      continue; // the condition is not known in the table's loop
    bool any = false;
    for (Block *branch : {ifOp.thenBlock(), ifOp.elseBlock()}) {
      if (!branch)
        continue;
      SmallVector<Operation *> taken;
      for (Operation &inner : branch->without_terminator())
        if (stepInvariant(inner) && ready(inner) && !deferred(inner)) {
          take(inner);
          taken.push_back(&inner);
        }
      // Only what the rest of the step needs, directly or through what is kept: work that only reports
      // (a check's status stores) stays in the branch, which the loop then still branches around.
      DenseSet<Operation *> dropped;
      for (Operation *inner : llvm::reverse(taken)) { // users first
        bool needed = llvm::any_of(inner->getUsers(), [&](Operation *user) {
          while (user->getBlock() != inner->getBlock())
            user = user->getParentOp();
          return !dropped.contains(user); // kept per-step work, or the rest of the step
        });
        if (!needed) {
          invariantSet.erase(inner);
          dropped.insert(inner);
        }
      }
      any |= llvm::any_of(taken, [&](Operation *inner) { return invariantSet.contains(inner); });
    }
    if (any)
      branching.push_back(ifOp);
  }
  // The values the rest of the step uses (directly or inside its regions).
  SetVector<Value> columns;
  step.walk<WalkOrder::PreOrder>([&](Operation *op) { // in order: the columns' order fixes the IR's
    if (!invariantSet.contains(op))
      return;
    for (Value result : op->getResults())
      for (OpOperand &use : result.getUses()) {
        Operation *user = use.getOwner();
        while (user->getBlock() != op->getBlock())
          user = user->getParentOp();
        if (!invariantSet.contains(user))
          columns.insert(result);
      }
  });
  if (!readsMemory || columns.empty() ||
      llvm::any_of(columns, [](Value v) { return !v.getType().isIntOrIndexOrFloat(); }))
    return;

  Location loc = fold.getLoc();
  ScheduleAttr schedule = domain.schedule();
  int64_t warps = std::max<int64_t>(1, schedule.getThreads() * schedule.getRowsPerBlock() / kWarpSize);
  // The block's shared memory stays within what a kernel gets without opting in (48 KiB): the lists
  // take up to 16 KiB of it (moe-compact-predicated-folds), the tables up to 32 KiB.
  // A column is stored as a 32-bit word where it can be: i1 (shared-memory bytes would cost byte
  // permutes, prmt, to pack and unpack), and an index cast from an i32 the step computes (a loaded row
  // number), cast again where it is read.
  auto narrowIndex = [&](Value column) -> Value {
    auto cast = column.getDefiningOp<arith::IndexCastOp>();
    if (!cast || cast->getBlock() != &step || !cast.getIn().getType().isInteger(32))
      return Value();
    Operation *def = cast.getIn().getDefiningOp();
    return !def || def->getBlock() != &step || invariantSet.contains(def) ? cast.getIn() : Value();
  };
  auto stored = [&](Value column) {
    Type t = column.getType();
    return t.isInteger(1) || narrowIndex(column) ? Type(b.getI32Type()) : t;
  };
  int64_t bytes = 0;
  for (Value column : columns)
    bytes += warps * length *
             (stored(column).isIndex() ? 8 : std::max<int64_t>(4, stored(column).getIntOrFloatBitWidth() / 8));
  if (stepTableBytes + bytes > kStepTableBytes)
    return;
  stepTableBytes += bytes;
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  StepTable table;
  table.base = warpBase(loc, length);
  for (Value column : columns)
    table.columns.push_back({column, sharedBuffer(warps * length, stored(column), loc)});
  // A check's column is also summed up as "true at every step": where it is, the steps read the column as
  // true (readStepTable), and moe-version-row-loops gives their loop a copy without the check's branch.
  SmallVector<bool> summed, exact;
  SmallVector<Value> allTrueInit;
  for (auto &entry : table.columns) {
    summed.push_back(entry.first.getType().isInteger(1) && isCheckCondition(entry.first));
    exact.push_back(summed.back() && testedWhereRun(entry.first, step));
    if (summed.back())
      allTrueInit.push_back(arith::ConstantIntOp::create(b, loc, 1, 1));
  }
  // Step j's work: its ops, its branches' work, its columns stored at the table's row j; returns each summed
  // check's "true at every step so far" after it.
  auto emitStepWork = [&](Value j, ValueRange allTrueBefore) {
    scalars.map(step.getArgument(0), j);
    for (Operation *op : invariant)
      emitOp(*op);
    for (scf::IfOp ifOp : branching)
      emitBranchWork(ifOp, invariantSet, columns);
    Value at = arith::AddIOp::create(b, loc, table.base, j);
    SmallVector<Value> allTrue;
    for (auto [index, entry] : llvm::enumerate(table.columns)) {
      auto [column, buffer] = entry;
      Value narrow = narrowIndex(column);
      Value v = scalars.lookup(narrow ? narrow : column);
      if (summed[index])
        allTrue.push_back(arith::AndIOp::create(b, loc, allTrueBefore[allTrue.size()], v));
      if (v.getType().isInteger(1))
        v = arith::ExtUIOp::create(b, loc, b.getI32Type(), v);
      memref::StoreOp::create(b, loc, v, buffer, ValueRange{at});
    }
    return allTrue;
  };
  SmallVector<Value> allTrueAtEnd;
  if (laneList) {
    // A list of the warp's lanes (emitLaneCompact): a live lane writes the row of its own entry, at its place.
    auto work =
        scf::IfOp::create(b, loc, TypeRange(ValueRange(allTrueInit)), lane->second.live, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(work.thenBlock());
    laneEntries[compact.getList()] = lane->second.entry;
    scf::YieldOp::create(b, loc, emitStepWork(lane->second.place, allTrueInit));
    laneEntries.erase(compact.getList());
    b.setInsertionPointToStart(work.elseBlock());
    scf::YieldOp::create(b, loc, allTrueInit);
    allTrueAtEnd = work.getResults();
  } else {
    auto loop = scf::ForOp::create(b, loc, warpLane, get(bound, false), cst(kWarpSize), allTrueInit);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    scf::YieldOp::create(b, loc, emitStepWork(loop.getInductionVar(), loop.getRegionIterArgs()));
    allTrueAtEnd = loop.getResults();
  }
  Value fullMask = arith::ConstantIntOp::create(b, loc, -1, 32);
  NVVM::SyncWarpOp::create(b, loc, fullMask);
  size_t sums = 0;
  for (auto [isSummed, isExact] : llvm::zip(summed, exact)) {
    if (!isSummed) {
      table.allTrue.push_back(Value());
      continue;
    }
    auto vote =
        NVVM::VoteSyncOp::create(b, loc, b.getI1Type(), fullMask, allTrueAtEnd[sums++], NVVM::VoteSyncKind::all);
    if (isExact)
      vote->setAttr(kExactCheckVote, b.getUnitAttr());
    table.allTrue.push_back(vote.getResult());
  }
  table.invariant = std::move(invariantSet);
  stepTables[fold] = std::move(table);
}

/// Whether `column`, computed in one branch of `ifOp`, is a check that only that branch reads: on the other side it
/// is taken to hold. A step that skips its term (C2's unrouted expert) then leaves its warp's "every check holds"
/// true, so the row still runs the copy of its loop without the checks (moe-version-row-loops); as false, every row
/// with a skipped term ran the original loop, each gather behind its branch.
static bool vacuousCheck(Value column, scf::IfOp ifOp) {
  if (!column.getType().isInteger(1) || !isCheckCondition(column))
    return false;
  return llvm::none_of(column.getUsers(), [&](Operation *user) {
    return isa<scf::YieldOp>(user) && user->getParentOp() == ifOp; // passed out of the branch
  });
}

void BodyEmitter::emitBranchWork(scf::IfOp ifOp, const DenseSet<Operation *> &taken, const SetVector<Value> &columns) {
  Location loc = ifOp.getLoc();
  SmallVector<Value> out;
  SmallVector<Type> types;
  for (Value column : columns)
    if (ifOp->isAncestor(column.getDefiningOp())) {
      out.push_back(column);
      types.push_back(column.getType());
    }
  auto work = scf::IfOp::create(b, loc, types, get(ifOp.getCondition(), false), /*withElseRegion=*/true);
  for (auto [from, to] :
       {std::pair{&ifOp.getThenRegion(), work.thenBlock()}, std::pair{&ifOp.getElseRegion(), work.elseBlock()}}) {
    OpBuilder::InsertionGuard guard(b);
    if (to->mightHaveTerminator())
      b.setInsertionPoint(to->getTerminator());
    else
      b.setInsertionPointToEnd(to);
    if (!from->empty())
      for (Operation &op : from->front().without_terminator())
        if (taken.contains(&op))
          emitOp(op);
    if (types.empty())
      continue;
    SmallVector<Value> yields;
    for (Value v : out) {
      if (from->isAncestor(v.getParentRegion()))
        yields.push_back(scalars.lookup(v));
      else if (vacuousCheck(v, ifOp))
        yields.push_back(arith::ConstantIntOp::create(b, loc, 1, 1)); // a check that does not run holds
      else
        yields.push_back(arith::ConstantOp::create(b, loc, b.getZeroAttr(v.getType())));
    }
    scf::YieldOp::create(b, loc, yields);
  }
  for (auto [v, result] : llvm::zip(out, work.getResults()))
    scalars.map(v, result);
}

void BodyEmitter::readStepTable(const StepTable &table, Value j, Location loc) {
  Value at = arith::AddIOp::create(b, loc, table.base, j);
  for (auto [index, entry] : llvm::enumerate(table.columns)) {
    auto [column, buffer] = entry;
    Value v = memref::LoadOp::create(b, loc, buffer, ValueRange{at});
    if (column.getType().isInteger(1)) {
      v = arith::TruncIOp::create(b, loc, b.getI1Type(), v);
      if (Value allTrue = table.allTrue[index]) // a check's column (see emitStepTable)
        v = arith::OrIOp::create(b, loc, allTrue, v);
    } else if (column.getType() != v.getType()) { // a narrowed index (see emitStepTable)
      v = arith::IndexCastOp::create(b, loc, column.getType(), v);
    }
    scalars.map(column, v);
  }
  for (Operation *op : table.invariant)
    skipped.insert(op);
}

} // namespace moec::moe
