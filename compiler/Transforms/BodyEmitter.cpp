//===- BodyEmitter.cpp - Cloning a domain body for one position along its row ---===//
//
// BodyEmitter's core: a body's ops cloned for one (row, h) position, as vectors along h where the body
// varies along it; its writes and fused row stores, its reductions as loops (unrolled once nothing maps to
// them any more), its scf.ifs; and the helpers the lowerings of domain bodies share. Split sums are in
// SplitSums.cpp, lists in CompactLowering.cpp, step tables in StepTableLowering.cpp.
//===----------------------------------------------------------------------===//
#include "moec/contracts/Schedule.h"
#include "BodyEmitter.h"
#include "UnrollBudgets.h"

using namespace mlir;

namespace moec::moe {

int64_t vectorAccessAlignment(Value memref, int64_t width, int64_t baseAlignment) {
  auto type = cast<MemRefType>(memref.getType());
  int64_t elemBytes = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  int64_t align = std::min(baseAlignment, width * elemBytes);
  int64_t stride = elemBytes;
  for (int64_t d = type.getRank() - 1; d > 0; --d) {
    if (type.isDynamicDim(d))
      return elemBytes;
    stride *= type.getDimSize(d);
    align = std::min(align, stride & -stride); // the largest power of two dividing the row stride
  }
  return std::max(align, elemBytes);
}

Value emitRunCount(OpBuilder &b, Location loc, Value n, int64_t length) {
  Value rounded = arith::AddIOp::create(b, loc, n, arith::ConstantIndexOp::create(b, loc, length - 1));
  return arith::DivUIOp::create(b, loc, rounded, arith::ConstantIndexOp::create(b, loc, length));
}

void markStreamable(vector::StoreOp store) {
  int64_t alignment =
      vectorAccessAlignment(store.getBase(), store.getVectorType().getNumElements(), kMaxNontemporalAlignment);
  if (alignment >= 16) // x86's non-temporal vector stores need aligned addresses (see moe-streaming-stores)
    store->setAttr(kStreamableAttr, IntegerAttr::get(IntegerType::get(store.getContext(), 64), alignment));
}

OpBuilder builderAtFunctionEntry(OpBuilder &b) {
  Operation *func = b.getInsertionBlock()->getParentOp();
  while (!isa<FunctionOpInterface>(func))
    func = func->getParentOp();
  return OpBuilder::atBlockBegin(&func->getRegion(0).front());
}

Value loadAccumulators(OpBuilder &b, Location loc, Value accumulators, Value h, int64_t w) {
  if (w == 1)
    return memref::LoadOp::create(b, loc, accumulators, ValueRange{h});
  Type element = cast<MemRefType>(accumulators.getType()).getElementType();
  return vector::LoadOp::create(b, loc, VectorType::get({w}, element), accumulators, ValueRange{h});
}

void storeAccumulators(OpBuilder &b, Location loc, Value v, Value accumulators, Value h, int64_t w) {
  if (w == 1)
    memref::StoreOp::create(b, loc, v, accumulators, ValueRange{h});
  else
    vector::StoreOp::create(b, loc, v, accumulators, ValueRange{h});
}

BodyEmitter::BodyEmitter(OpBuilder &b, DomainOp domain, const VaryingAnalysis &analysis, int64_t width,
                         int64_t unroll, int64_t maxAlignment, ReductionSplit split, Value storeGuard, Part part)
    : b(b), domain(domain), analysis(analysis), width(width), unroll(unroll), maxAlignment(maxAlignment),
      split(split), storeGuard(storeGuard), part(part) {}

const IRMapping &BodyEmitter::emitRowPrologue(ValueRange rowIndices) {
  for (auto [arg, index] : llvm::zip(domain.body().getArguments().drop_back(), rowIndices))
    scalars.map(arg, index);
  emitOps(domain.body());
  return scalars;
}

void BodyEmitter::startFrom(const BodyEmitter &prologue) {
  scalars = prologue.scalars;
  sharedLists = prologue.sharedLists;
  laneLists = prologue.laneLists;
  stepTables = prologue.stepTables;
}

void BodyEmitter::setRowTarget(RowTarget t) {
  onGpu = t.onGpu;
  staged = t.staged;
  streamableStores = t.streamableStores;
  if (onGpu && part == Part::RowPrologue) {
    Location loc = domain.op()->getLoc();
    warpLane = arith::RemUIOp::create(b, loc, gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x),
                                      arith::ConstantIndexOp::create(b, loc, kWarpSize));
  }
}

void BodyEmitter::mapIndices(ValueRange indices) {
  for (auto [arg, index] : llvm::zip(domain.body().getArguments(), indices))
    scalars.map(arg, index);
}

void BodyEmitter::premap(Value orig, Value emitted) {
  map(orig, emitted);
  skipMapped = true;
}

void BodyEmitter::emitRowInvariantOps(Block &block) {
  for (Operation &op : block.without_terminator())
    if (op.getNumResults() > 0 && llvm::none_of(op.getResults(), [&](Value r) { return analysis.isVarying(r); }))
      emitOp(op);
}

Value BodyEmitter::emitReductionStep(Operation *reduction, Value acc) {
  Block &body = reduction->getRegion(0).front();
  if (isa<FoldOp>(reduction)) {
    premap(body.getArgument(1), acc);
    return emitBlock(body, width > 1);
  }
  skipMapped = true;
  return arith::AddFOp::create(b, reduction->getLoc(), acc, emitBlock(body, width > 1));
}

void BodyEmitter::emitElement(ValueRange indices) {
  Block &body = domain.body();
  for (auto [arg, index] : llvm::zip(body.getArguments(), indices))
    scalars.map(arg, index);
  Location loc = domain.op()->getLoc();
  if (auto write = dyn_cast<WriteOp>(body.getTerminator())) {
    emitOps(body);
    SmallVector<Value> at;
    for (Value i : write.getIndices())
      at.push_back(i == analysis.innerIndex() ? scalars.lookup(i) : get(i, false));
    Value value = get(write.getValue(), width > 1);
    // After a prologue that checked a row-invariant guard, the row only runs where it holds.
    bool rowGuarded = part == Part::AfterPrologue && write->hasAttr(kRowGuardAttr);
    if (!write.getGuard() || rowGuarded) {
      emitStore(value, at, loc);
    } else {
      auto guard = scf::IfOp::create(b, loc, get(write.getGuard(), false), /*withElseRegion=*/false);
      OpBuilder::InsertionGuard insertion(b);
      b.setInsertionPointToStart(guard.thenBlock());
      emitStore(value, at, loc);
    }
  } else {
    emitStore(emitBlock(body, width > 1), indices, loc);
  }
  flushUnrolls();
}

Value BodyEmitter::emitWrittenValue(ValueRange indices) {
  Block &body = domain.body();
  for (auto [arg, index] : llvm::zip(body.getArguments(), indices))
    scalars.map(arg, index);
  emitOps(body);
  return get(cast<WriteOp>(body.getTerminator()).getValue(), width > 1);
}

void BodyEmitter::flushUnrolls() {
  for (scf::ForOp loop : pendingUnrolls)
    unrollLoop(loop);
  pendingUnrolls.clear();
}

void BodyEmitter::unrollLoop(scf::ForOp loop) {
  Value bound = loop.getUpperBound();
  if (unroll <= 1)
    return;
  int64_t bodyOps = 0;
  loop.getBody()->walk([&](Operation *) { ++bodyOps; });
  APInt trip;
  if (matchPattern(bound, m_ConstantInt(&trip)) && trip.getSExtValue() <= unroll) {
    if (bodyOps * trip.getSExtValue() <= kMaxUnrolledOps)
      (void)loopUnrollFull(loop);
  } else if (bodyOps * unroll <= kMaxUnrolledOps) {
    (void)loopUnrollByFactor(loop, unroll);
  }
}

void BodyEmitter::emitStore(Value value, ValueRange indices, Location loc) {
  if (staged)
    return staged->store(b, value, scalars.lookup(analysis.innerIndex()), width);
  std::optional<OpBuilder::InsertionGuard> insertion;
  if (storeGuard) { // one lane of a warp writes what all lanes computed
    insertion.emplace(b);
    b.setInsertionPointToStart(scf::IfOp::create(b, loc, storeGuard, false).thenBlock());
  }
  if (width > 1) {
    auto store = vector::StoreOp::create(b, loc, value, domain.output(), indices);
    store.setAlignmentAttr(b.getI64IntegerAttr(accessAlignment(domain.output())));
    if (streamableStores)
      markStreamable(store);
  } else {
    memref::StoreOp::create(b, loc, value, domain.output(), indices);
  }
}

void BodyEmitter::emitRowStore(RowStoreOp store) {
  Location loc = store.getLoc();
  if (staged) { // into the UB; the chunk's copy-out writes the row (copyOutRows)
    assert(store.getIndices().back() == analysis.innerIndex() && "a fused row store writes along its sum");
    staged->storeRow(b, store, get(store.getValue(), width > 1), scalars.lookup(analysis.innerIndex()), width);
    return;
  }
  SmallVector<Value> at;
  for (Value i : store.getIndices())
    at.push_back(i == analysis.innerIndex() ? scalars.lookup(i) : get(i, false));
  // Vectors run along j only in a split sum's terms; a sum that varies along the domain's vectorized
  // index steps j one at a time, and its row store (which does not vary with that index, or the body
  // would not vectorize) stores one element a step.
  bool alongJ = width > 1 && store.getIndices().back() == analysis.innerIndex();
  Value value = get(store.getValue(), alongJ);
  Value output = get(store.getOutput(), false);
  OpBuilder::InsertionGuard insertion(b);
  if (store.getGuard())
    b.setInsertionPointToStart(scf::IfOp::create(b, loc, get(store.getGuard(), false), false).thenBlock());
  if (!alongJ) {
    memref::StoreOp::create(b, loc, value, output, at);
    return;
  }
  auto vectorStore = vector::StoreOp::create(b, loc, value, output, at);
  vectorStore.setAlignmentAttr(b.getI64IntegerAttr(accessAlignment(output)));
  if (streamableStores)
    markStreamable(vectorStore);
}

Value BodyEmitter::get(Value orig, bool wantVector) {
  if (vectorized(orig)) {
    if (orig == analysis.innerIndex())
      return innerLanes();
    return vectors.lookup(orig);
  }
  Value v = scalars.lookupOrDefault(orig);
  if (wantVector && width > 1)
    return vector::BroadcastOp::create(b, v.getLoc(), vectorOf(v.getType()), v);
  return v;
}

Value BodyEmitter::innerLanes() {
  if (!laneIndices) {
    Location loc = domain.op()->getLoc();
    Value h = scalars.lookup(analysis.innerIndex());
    auto type = vectorOf(b.getIndexType());
    SmallVector<APInt> laneOffsets;
    for (int64_t i = 0; i < width; ++i)
      laneOffsets.push_back(APInt(64, i));
    Value offsets = arith::ConstantOp::create(b, loc, DenseElementsAttr::get(type, laneOffsets));
    laneIndices = arith::AddIOp::create(b, loc, vector::BroadcastOp::create(b, loc, type, h), offsets);
  }
  return laneIndices;
}

void BodyEmitter::emitOps(Block &block) {
  bool top = &block == &domain.body();
  for (Operation &op : block.without_terminator()) {
    if (skipped.contains(&op))
      continue;
    if (top && part != Part::All && op.hasAttr(kRowInvariantAttr) != (part == Part::RowPrologue))
      continue;
    if (skipMapped && op.getNumResults() > 0 &&
        llvm::all_of(op.getResults(), [&](Value r) { return scalars.contains(r) || vectors.contains(r); }))
      continue; // computed already, outside this loop (an accumulated row: emitRow)
    emitOp(op);
  }
}

void BodyEmitter::emitOp(Operation &op) {
  if (auto load = dyn_cast<memref::LoadOp>(op); load && staged)
    if (Value v = staged->load(b, load, analysis.isVarying(load.getResult()) ? scalars.lookup(analysis.innerIndex())
                                                                             : Value(),
                               width))
      return map(load.getResult(), v);
  if (auto load = dyn_cast<memref::LoadOp>(op); load && sharedLists.count(load.getMemRef()))
    emitSharedListLoad(load);
  else if (auto compact = dyn_cast<CompactOp>(op))
    emitCompact(compact);
  else if (auto sum = dyn_cast<SumOp>(op))
    emitSum(sum);
  else if (auto fold = dyn_cast<FoldOp>(op))
    emitFold(fold);
  else if (auto ifOp = dyn_cast<scf::IfOp>(op))
    emitIf(ifOp);
  else if (auto store = dyn_cast<RowStoreOp>(op))
    emitRowStore(store);
  else if (llvm::any_of(op.getOperands(), [&](Value v) { return vectorized(v); }))
    emitVectorOp(op);
  else
    b.clone(op, scalars);
}

Value BodyEmitter::emitBlock(Block &block, bool wantVector) {
  emitOps(block);
  return get(block.getTerminator()->getOperand(0), wantVector);
}

void BodyEmitter::emitSum(SumOp sum) {
  Location loc = sum.getLoc();
  bool vec = vectorized(sum.getResult());
  if (!vec && split.width > 0)
    if (std::optional<VaryingAnalysis> along = contiguousReduction(sum))
      return emitSplitSum(sum, *along);
  Type accType = vec ? Type(vectorOf(b.getF32Type())) : Type(b.getF32Type());
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(accType));
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value bound = get(sum.getBound(), false);
  auto loop = scf::ForOp::create(b, loc, c0, bound, c1, ValueRange{zero});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Block &body = sum.getBody().front();
    scalars.map(body.getArgument(0), loop.getInductionVar());
    Value term = emitBlock(body, vec);
    Value acc = arith::AddFOp::create(b, loc, loop.getRegionIterArgs()[0], term);
    scf::YieldOp::create(b, loc, acc);
  }
  map(sum.getResult(), loop.getResult(0));
  pendingUnrolls.push_back(loop);
}

void BodyEmitter::emitFold(FoldOp fold) {
  Location loc = fold.getLoc();
  bool vec = vectorized(fold.getResult());
  if (!vec && warpLane && isIntegerSumFold(fold))
    return emitLaneSplitFold(fold);
  if (shortList.count && fold.getBound() == shortList.count)
    return emitShortListSteps(fold, vec);
  Value init = get(fold.getInit(), vec);
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value bound = get(fold.getBound(), false);
  auto loop = scf::ForOp::create(b, loc, c0, bound, c1, ValueRange{init});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Block &body = fold.getBody().front();
    scalars.map(body.getArgument(0), loop.getInductionVar());
    map(body.getArgument(1), loop.getRegionIterArgs()[0]);
    auto table = stepTables.find(fold);
    if (table != stepTables.end())
      readStepTable(table->second, loop.getInductionVar(), loc);
    scf::YieldOp::create(b, loc, emitBlock(body, vec));
    if (table != stepTables.end())
      for (Operation *op : table->second.invariant)
        skipped.erase(op);
  }
  map(fold.getResult(), loop.getResult(0));
  pendingUnrolls.push_back(loop);
}

void BodyEmitter::emitShortListSteps(FoldOp fold, bool vec) {
  Location loc = fold.getLoc();
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value init = get(fold.getInit(), vec);
  if (shortList.slots == 0) { // the version for a row with no live step
    map(fold.getResult(), init);
    return;
  }
  Value count = get(fold.getBound(), false);
  Value last = arith::SubIOp::create(b, loc, count, cst(1));
  auto loop = scf::ForOp::create(b, loc, cst(0), cst(shortList.slots), cst(1), ValueRange{init});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value j = loop.getInductionVar(), acc = loop.getRegionIterArgs()[0];
    Value at = arith::MinUIOp::create(b, loc, j, last);
    Block &body = fold.getBody().front();
    scalars.map(body.getArgument(0), at);
    auto table = stepTables.find(fold);
    if (table != stepTables.end())
      readStepTable(table->second, at, loc);
    Value live = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, j, count);
    auto ifLive = scf::IfOp::create(b, loc, TypeRange{acc.getType()}, live, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard inside(b);
      b.setInsertionPointToStart(ifLive.thenBlock());
      map(body.getArgument(1), acc);
      scf::YieldOp::create(b, loc, emitBlock(body, vec));
      b.setInsertionPointToStart(ifLive.elseBlock());
      scf::YieldOp::create(b, loc, acc);
    }
    scf::YieldOp::create(b, loc, ifLive.getResult(0));
    if (table != stepTables.end())
      for (Operation *op : table->second.invariant)
        skipped.erase(op);
  }
  map(fold.getResult(), loop.getResult(0));
  pendingUnrolls.push_back(loop);
}

void BodyEmitter::emitLaneSplitFold(FoldOp fold) {
  Location loc = fold.getLoc();
  Block &body = fold.getBody().front();
  Type type = fold.getType();
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value zero = type.isIndex() ? Value(cst(0)) : Value(arith::ConstantIntOp::create(b, loc, type, 0));
  auto loop = scf::ForOp::create(b, loc, warpLane, get(fold.getBound(), false), cst(kWarpSize), ValueRange{zero});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    scalars.map(body.getArgument(0), loop.getInductionVar());
    scalars.map(body.getArgument(1), loop.getRegionIterArgs()[0]);
    scf::YieldOp::create(b, loc, emitBlock(body, false));
  }
  auto i64 = b.getI64Type(), i32 = b.getI32Type();
  Value total = type.isIndex() ? Value(arith::IndexCastOp::create(b, loc, i64, loop.getResult(0)))
                               : Value(arith::ExtSIOp::create(b, loc, i64, loop.getResult(0)));
  if (type.isSignlessInteger(64))
    total = loop.getResult(0);
  auto c32 = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, i32, v); };
  Value shift = arith::ConstantIntOp::create(b, loc, i64, 32);
  for (int64_t offset = kWarpSize / 2; offset > 0; offset /= 2) {
    auto shuffled = [&](Value half) {
      return gpu::ShuffleOp::create(b, loc, half, c32(offset), c32(kWarpSize), gpu::ShuffleMode::XOR)
          .getShuffleResult();
    };
    Value lo = shuffled(arith::TruncIOp::create(b, loc, i32, total));
    Value hi = shuffled(arith::TruncIOp::create(b, loc, i32, arith::ShRUIOp::create(b, loc, total, shift)));
    Value hiBits = arith::ShLIOp::create(b, loc, arith::ExtUIOp::create(b, loc, i64, hi), shift);
    Value other = arith::OrIOp::create(b, loc, hiBits, arith::ExtUIOp::create(b, loc, i64, lo));
    total = arith::AddIOp::create(b, loc, total, other);
  }
  Value sum = type.isIndex() ? Value(arith::IndexCastOp::create(b, loc, type, total))
                             : Value(arith::TruncIOp::create(b, loc, type, total));
  if (type.isSignlessInteger(64))
    sum = total;
  map(fold.getResult(), arith::AddIOp::create(b, loc, get(fold.getInit(), false), sum));
}

void BodyEmitter::emitIf(scf::IfOp ifOp) {
  if (auto it = decided.find(ifOp); it != decided.end()) {
    Block &branch = it->second ? ifOp.getThenRegion().front() : ifOp.getElseRegion().front();
    emitOps(branch);
    for (auto [result, yielded] : llvm::zip(ifOp.getResults(), branch.getTerminator()->getOperands()))
      map(result, get(yielded, vectorized(result)));
    return;
  }
  Location loc = ifOp.getLoc();
  SmallVector<Type> types;
  for (Value r : ifOp.getResults())
    types.push_back(vectorized(r) ? Type(vectorOf(r.getType())) : r.getType());
  auto newIf = scf::IfOp::create(b, loc, types, get(ifOp.getCondition(), false), ifOp.elseBlock() != nullptr);
  auto emitBranch = [&](Block &from, Block *to) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(to);
    if (types.empty()) { // the builder already ended a result-less branch with its yield
      b.setInsertionPoint(to->getTerminator());
      emitOps(from);
      return;
    }
    emitOps(from);
    SmallVector<Value> yielded;
    for (auto [i, v] : llvm::enumerate(from.getTerminator()->getOperands()))
      yielded.push_back(get(v, isa<VectorType>(types[i])));
    scf::YieldOp::create(b, loc, yielded);
  };
  emitBranch(ifOp.getThenRegion().front(), newIf.thenBlock());
  if (ifOp.elseBlock())
    emitBranch(ifOp.getElseRegion().front(), newIf.elseBlock());
  for (auto [oldR, newR] : llvm::zip(ifOp.getResults(), newIf.getResults()))
    map(oldR, newR);
}

void BodyEmitter::emitVectorOp(Operation &op) {
  Location loc = op.getLoc();
  if (auto load = dyn_cast<memref::LoadOp>(op)) {
    SmallVector<Value> indices;
    for (Value i : load.getIndices())
      indices.push_back(i == analysis.innerIndex() ? scalars.lookup(i) : get(i, false));
    auto type = vectorOf(load.getType());
    auto vload = vector::LoadOp::create(b, loc, type, get(load.getMemRef(), false), indices);
    vload.setAlignmentAttr(b.getI64IntegerAttr(accessAlignment(load.getMemRef())));
    map(load.getResult(), vload.getResult());
    return;
  }
  OperationState state(loc, op.getName());
  for (Value v : op.getOperands())
    state.addOperands(get(v, true));
  for (Type t : op.getResultTypes())
    state.addTypes(vectorOf(t));
  state.addAttributes(op.getAttrs());
  Operation *newOp = b.create(state);
  for (auto [oldR, newR] : llvm::zip(op.getResults(), newOp->getResults()))
    map(oldR, newR);
}

void BodyEmitter::map(Value orig, Value emitted) {
  if (vectorized(orig))
    vectors.map(orig, emitted);
  else
    scalars.map(orig, emitted);
}

SmallVector<Value> unflattenRow(OpBuilder &b, Location loc, Value row, ValueRange rowBounds) {
  SmallVector<Value> indices(rowBounds.size());
  for (int64_t d = rowBounds.size() - 1; d >= 0; --d) {
    if (d == 0) {
      indices[d] = row;
      break;
    }
    indices[d] = arith::RemUIOp::create(b, loc, row, rowBounds[d]);
    row = arith::DivUIOp::create(b, loc, row, rowBounds[d]);
  }
  return indices;
}

} // namespace moec::moe
