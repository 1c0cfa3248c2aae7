//===- BodyEmitter.h - Cloning a domain body into loops (private to Transforms) ---===//
//
// What the lowerings of domain bodies share (BodyLowering.cpp: rows; GroupRowLowering.cpp: GPU row groups;
// PointLowering.cpp: point kernels): VaryingAnalysis, which values vary along the contiguous index, and
// BodyEmitter, which clones a body for one position along it (see BodyLowering.cpp's file comment).
//===----------------------------------------------------------------------===//
#ifndef MOEC_COMPILER_TRANSFORMS_BODYEMITTER_H
#define MOEC_COMPILER_TRANSFORMS_BODYEMITTER_H

#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Schedule.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/ScopeExit.h"

#include <optional>


namespace moec::moe {
using namespace mlir;


/// The values of a compute body that depend on its contiguous index.
class VaryingAnalysis {
public:
  explicit VaryingAnalysis(DomainOp domain) : VaryingAnalysis(domain.body().getArguments().back(), domain.body()) {}

  /// Values of `block` that depend on `seed` (the domain's last index, or a reduction's index).
  VaryingAnalysis(Value seed, Block &block) : inner(seed) {
    varying.insert(inner);
    visit(block);
  }

  bool isVarying(Value v) const { return varying.contains(v); }
  const DenseSet<Value> &varyingValues() const { return varying; }
  Value innerIndex() const { return inner; }

  /// Why the body cannot be vectorized, or null.
  Operation *blocker() const { return firstBlocker; }

private:
  void visit(Block &block) {
    for (Operation &op : block) {
      if (auto fold = dyn_cast<FoldOp>(op))
        visitFold(fold);
      else
        for (Region &region : op.getRegions())
          for (Block &nested : region)
            visit(nested);
      bool anyVarying = llvm::any_of(op.getOperands(), [&](Value v) { return isVarying(v); });
      checkAllowed(op, anyVarying);
      bool resultsVary = anyVarying;
      if (auto ifOp = dyn_cast<scf::IfOp>(op))
        resultsVary = yieldsVarying(ifOp.thenYield()) || (ifOp.elseBlock() && yieldsVarying(ifOp.elseYield()));
      if (auto sum = dyn_cast<SumOp>(op))
        resultsVary = isVarying(cast<YieldOp>(sum.getBody().front().getTerminator()).getValue());
      if (auto fold = dyn_cast<FoldOp>(op))
        resultsVary = isVarying(fold.getInit()) || isVarying(fold.getBody().getArgument(1));
      if (resultsVary)
        for (Value r : op.getResults())
          varying.insert(r);
    }
  }

  /// The accumulator varies if the init does or if one step makes it vary: visit the body assuming it
  /// does not, and again assuming it does when the first visit yields a varying value.
  void visitFold(FoldOp fold) {
    Block &body = fold.getBody().front();
    Value acc = body.getArgument(1);
    if (isVarying(fold.getInit()))
      varying.insert(acc);
    visit(body);
    if (!isVarying(acc) && isVarying(cast<YieldOp>(body.getTerminator()).getValue())) {
      varying.insert(acc);
      visit(body);
    }
  }

  bool yieldsVarying(scf::YieldOp yield) {
    return llvm::any_of(yield.getOperands(), [&](Value v) { return isVarying(v); });
  }

  void checkAllowed(Operation &op, bool anyVarying) {
    if (!anyVarying || firstBlocker)
      return;
    bool ok = false;
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      auto indices = load.getIndices();
      ok = !isVarying(load.getMemRef()) && !indices.empty() && indices.back() == inner &&
           llvm::none_of(indices.drop_back(), [&](Value v) { return isVarying(v); });
    } else if (auto ifOp = dyn_cast<scf::IfOp>(op)) {
      ok = !isVarying(ifOp.getCondition());
    } else if (auto sum = dyn_cast<SumOp>(op)) {
      ok = !isVarying(sum.getBound());
    } else if (auto fold = dyn_cast<FoldOp>(op)) {
      ok = !isVarying(fold.getBound());
    } else if (auto write = dyn_cast<WriteOp>(op)) {
      auto indices = write.getIndices();
      ok = !indices.empty() && indices.back() == inner && (!write.getGuard() || !isVarying(write.getGuard())) &&
           llvm::none_of(indices.drop_back(), [&](Value v) { return isVarying(v); });
    } else if (auto store = dyn_cast<RowStoreOp>(op)) { // a fused row's element j, as a write's
      auto indices = store.getIndices();
      ok = !isVarying(store.getOutput()) && !indices.empty() && indices.back() == inner &&
           (!store.getGuard() || !isVarying(store.getGuard())) &&
           llvm::none_of(indices.drop_back(), [&](Value v) { return isVarying(v); });
    } else if (isa<scf::YieldOp, YieldOp>(op)) {
      ok = true;
    } else {
      StringRef dialect = op.getDialect()->getNamespace();
      ok = (dialect == "arith" || dialect == "math") && op.hasTrait<OpTrait::Elementwise>();
    }
    if (!ok)
      firstBlocker = &op;
  }

  Value inner;
  DenseSet<Value> varying;
  Operation *firstBlocker = nullptr;
};

/// A moe.sum whose body reads along its own index (x[row, j] for sum over j): it can run as vector
/// partial sums, split over lanes, and be combined at the end. Summation order changes; the spec allows
/// that for these dot products (f32 accumulation, tolerance of §5.6).
inline std::optional<VaryingAnalysis> contiguousReduction(SumOp sum) {
  Block &body = sum.getBody().front();
  VaryingAnalysis analysis(body.getArgument(0), body);
  if (analysis.blocker())
    return std::nullopt;
  bool readsAlong = false;
  body.walk([&](memref::LoadOp load) {
    readsAlong |= !load.getIndices().empty() && load.getIndices().back() == body.getArgument(0);
  });
  if (!readsAlong)
    return std::nullopt;
  return analysis;
}

/// How moe.sum reductions along their own index are split: vectors of `width` f32 partial sums, over
/// `lanes` threads whose id is `lane` (GPU warp), combined with shuffles. width 0: not at all.
struct ReductionSplit {
  int64_t width = 0;
  int64_t lanes = 1;
  Value lane;
  bool loadsInFlight = false; // lanes > 1: unroll the loop along the row for loads in flight
};

/// Which of the body's top-level ops an emitter clones: all of them, only the row-invariant ones (the
/// row's prologue), or all but those (the loop along the row, after a prologue).
enum class Part { All, RowPrologue, AfterPrologue };

/// The byte alignment a vector access of `width` elements along the last dim of `memref` can promise, given
/// a base pointer aligned to `baseAlignment`: h is a multiple of the width, but a row starts only at a
/// multiple of its stride.
inline int64_t vectorAccessAlignment(Value memref, int64_t width, int64_t baseAlignment) {
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

/// ceil(n / length): the runs of up to `length` consecutive indices of a dim of n (a row group's members, a
/// one-dim row of points).
inline Value emitRunCount(OpBuilder &b, Location loc, Value n, int64_t length) {
  Value rounded = arith::AddIOp::create(b, loc, n, arith::ConstantIndexOp::create(b, loc, length - 1));
  return arith::DivUIOp::create(b, loc, rounded, arith::ConstantIndexOp::create(b, loc, length));
}

/// A builder at the start of the function `b` inserts into (for stack arrays allocated once per call).
inline OpBuilder builderAtFunctionEntry(OpBuilder &b) {
  Operation *func = b.getInsertionBlock()->getParentOp();
  while (!isa<FunctionOpInterface>(func))
    func = func->getParentOp();
  return OpBuilder::atBlockBegin(&func->getRegion(0).front());
}

/// Element h of row accumulators (f32 on the CPU; a staged row's reduction type on Ascend), or the w
/// elements from h.
inline Value loadAccumulators(OpBuilder &b, Location loc, Value accumulators, Value h, int64_t w) {
  if (w == 1)
    return memref::LoadOp::create(b, loc, accumulators, ValueRange{h});
  Type element = cast<MemRefType>(accumulators.getType()).getElementType();
  return vector::LoadOp::create(b, loc, VectorType::get({w}, element), accumulators, ValueRange{h});
}

inline void storeAccumulators(OpBuilder &b, Location loc, Value v, Value accumulators, Value h, int64_t w) {
  if (w == 1)
    memref::StoreOp::create(b, loc, v, accumulators, ValueRange{h});
  else
    vector::StoreOp::create(b, loc, v, accumulators, ValueRange{h});
}

/// GPU: `v` (an index, or an integer or float of at most 64 bits) as a warp shuffle of `mode` with `arg` (an
/// i32) moves it: IDX from lane `arg`, UP from lane l - arg (lane l itself below arg). Wider than 32 bits, in
/// two words.
Value shuffleWarp(OpBuilder &b, Location loc, Value v, Value arg, gpu::ShuffleMode mode);

/// Clones a compute body for one (row, h) position, vectorized when width > 1.
class BodyEmitter {
public:
  BodyEmitter(OpBuilder &b, DomainOp domain, const VaryingAnalysis &analysis, int64_t width,
              int64_t unroll, int64_t maxAlignment, ReductionSplit split = {}, Value storeGuard = {},
              Part part = Part::All)
      : b(b), domain(domain), analysis(analysis), width(width), unroll(unroll), maxAlignment(maxAlignment),
        split(split), storeGuard(storeGuard), part(part) {}

  /// Part::RowPrologue: emits the row-invariant ops for row indices `rowIndices` and returns the values
  /// they map to, for the emitters of the loop along the row to start from. Its loops are unrolled by
  /// flushUnrolls() once those emitters are done: unrolling replaces the values the mapping holds.
  const IRMapping &emitRowPrologue(ValueRange rowIndices) {
    for (auto [arg, index] : llvm::zip(domain.body().getArguments().drop_back(), rowIndices))
      scalars.map(arg, index);
    emitOps(domain.body());
    return scalars;
  }

  /// Starts from values a row prologue already computed.
  void startFrom(const BodyEmitter &prologue) {
    scalars = prologue.scalars;
    sharedLists = prologue.sharedLists;
    laneLists = prologue.laneLists;
    stepTables = prologue.stepTables;
  }

  /// GPU, a row's prologue (after its guard): for each fold that runs along the row, steps over a list or
  /// a constant range, and does per-step work that does not vary along the row (a list entry, an index
  /// load and its checks, a gathered row's weight), that work runs here once per step, the warp's lanes
  /// taking the steps round robin, into shared-memory tables (a column per value the rest of the step
  /// uses). The fold's steps along the row then read the columns instead of redoing it for every vector.
  void emitStepTables();

  /// How the row's target wants lists and stores (see RowTarget). On the GPU the row's prologue runs with
  /// each warp converged on one row, so its integer-sum folds split over the lanes.
  void setRowTarget(RowTarget t) {
    onGpu = t.onGpu;
    staged = t.staged;
    compactLanes = t.compactLanes;
    streamingStores = t.streamingStores;
    outputAligned = t.outputAligned;
    outputAlignment = t.outputAlignment;
    if (onGpu && part == Part::RowPrologue) {
      Location loc = domain.op()->getLoc();
      warpLane = arith::RemUIOp::create(b, loc, gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x),
                                        arith::ConstantIndexOp::create(b, loc, kWarpSize));
    }
  }

  /// scf.if ops whose branch is known where this emitter runs (a staged row switched on a condition of
  /// the row): only that branch is emitted, inline.
  void decide(const DenseMap<Operation *, bool> &branches) { decided = branches; }

  /// A warp per point: every lane runs the point's scalar code alike.
  void splitFoldsOver(Value lane) { warpLane = lane; }

  /// GPU: the folds along the row over the list whose count is `count` (a short one: at most the unroll's
  /// entries) run `slots` steps, for the row's version whose count is at most that (see emitRow and
  /// emitShortListSteps).
  void runShortListIn(Value count, int64_t slots) { shortList = {count, slots}; }

  /// The emitted value of a value that does not vary along the row.
  Value value(Value orig) { return get(orig, false); }

  /// What the values that do not vary along the row map to so far.
  const IRMapping &scalarValues() const { return scalars; }

  /// The scalar `index` for each of the domain's indices in `indices` (the row's, then maybe h).
  void mapIndices(ValueRange indices) {
    for (auto [arg, index] : llvm::zip(domain.body().getArguments(), indices))
      scalars.map(arg, index);
  }

  /// For an accumulated row (emitRow): the value `orig` is known to be `emitted` here, and ops whose results are all
  /// known are not emitted again.
  void premap(Value orig, Value emitted) {
    map(orig, emitted);
    skipMapped = true;
  }

  /// The ops of `block` (a fold's step) that do not vary along the row and yield results: once per step,
  /// before the loop along the row.
  void emitRowInvariantOps(Block &block) {
    for (Operation &op : block.without_terminator())
      if (op.getNumResults() > 0 && llvm::none_of(op.getResults(), [&](Value r) { return analysis.isVarying(r); }))
        emitOp(op);
  }

  /// One step of `reduction` (a moe.fold, or a moe.sum: acc + term) with accumulator `acc` (premapped
  /// values kept); returns the new accumulator.
  Value emitReductionStep(Operation *reduction, Value acc) {
    Block &body = reduction->getRegion(0).front();
    if (isa<FoldOp>(reduction)) {
      premap(body.getArgument(1), acc);
      return emitBlock(body, width > 1);
    }
    skipMapped = true;
    return arith::AddFOp::create(b, reduction->getLoc(), acc, emitBlock(body, width > 1));
  }

  /// Emits the body for domain point (rows..., h) and stores the element(s).
  void emitElement(ValueRange indices) {
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

  /// A grouped row (emitGroupRow): emits the body for domain point (rows..., h) but not its write, and
  /// returns the value the write stores (a vector when vectorized).
  Value emitWrittenValue(ValueRange indices) {
    Block &body = domain.body();
    for (auto [arg, index] : llvm::zip(body.getArguments(), indices))
      scalars.map(arg, index);
    emitOps(body);
    return get(cast<WriteOp>(body.getTerminator()).getValue(), width > 1);
  }

  /// Stores `value` (from emitWrittenValue) at `indices` of the output, as the write would.
  void storeWrittenValue(Value value, ValueRange indices) { emitStore(value, indices, domain.op()->getLoc()); }

  /// A point kernel's body emitted in parts (emitPointRange): these ops are left out wherever they are.
  void skip(Operation *op) { skipped.insert(op); }
  /// Emits one op of the body (one skipped before, emitted later at the builder's point).
  void emitOpAt(Operation &op) { emitOp(op); }
  void unskip(Operation *op) { skipped.erase(op); }
  /// `orig` is known to be the scalar `emitted` here (a value restored from a pending point's slot).
  void mapScalar(Value orig, Value emitted) { scalars.map(orig, emitted); }
  /// Emits the ops of `block` (not its terminator), leaving out the skipped ones.
  void emitOpsOf(Block &block) { emitOps(block); }

  /// sum(j < n) body, reading along j, for each of `points` (emitters of the same domain and split): lanes
  /// take vectors of `split.width` elements round robin, each keeps a vector of f32 partial sums; then one
  /// horizontal add, the scalar remainder, and a shuffle tree across lanes, after which every lane holds
  /// the total. Several points (CPU point kernels, emitPointRange) run in one loop along j, their terms
  /// interleaved, so that their gathered rows stream together (one thread streaming one gathered row at a
  /// time reads at about half the machine's read bandwidth); each point's partial sums add the same terms in
  /// the same order either way. The bound must not depend on the point. A term's values that are the same
  /// for every point (a row they all read) are computed once. `actives`, when given, holds an i1 per point
  /// (null: always): a point that is not active adds no terms (its total is then meaningless); the first
  /// point must be active wherever the others are, as shared values are computed as the first's.
  static SmallVector<Value> splitSums(SumOp sum, ArrayRef<BodyEmitter *> points, ArrayRef<Value> actives = {}) {
    BodyEmitter &first = *points.front();
    OpBuilder &b = first.b;
    Location loc = sum.getLoc();
    std::optional<VaryingAnalysis> along = contiguousReduction(sum);
    assert(along && first.split.width > 0 && "a sum that splits");
    auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
    int64_t lanes = first.split.lanes;
    Value laneStart = lanes > 1 ? first.split.lane : cst(0);
    Value bound = first.get(sum.getBound(), false);
    int64_t w = first.splitWidth(bound);
    // Folded where the bound is a constant: the vector loop's step count then is one too.
    Value mainEnd = b.createOrFold<arith::MulIOp>(loc, b.createOrFold<arith::DivUIOp>(loc, bound, cst(w)), cst(w));
    SmallVector<Value> accs(points.size(), arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f)));
    Value tailBegin = laneStart;
    if (w > 1) {
      Value zeros = arith::ConstantOp::create(b, loc, b.getZeroAttr(vectorOf(b.getF32Type(), w)));
      SmallVector<Value> vectorParts =
          splitPartials(sum, *along, points, actives, arith::MulIOp::create(b, loc, laneStart, cst(w)), mainEnd,
                        lanes * w, w, SmallVector<Value>(points.size(), zeros), /*beginsInFirstStep=*/true);
      for (auto [acc, part] : llvm::zip(accs, vectorParts))
        acc = vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, part);
      tailBegin = arith::AddIOp::create(b, loc, mainEnd, laneStart);
    }
    // The elements the vectors leave, one at a time: none when the vectors divide a constant bound.
    APInt boundValue;
    bool whole = w > 1 && matchPattern(bound, m_ConstantInt(&boundValue)) && boundValue.getSExtValue() % w == 0;
    if (!whole)
      accs = splitPartials(sum, *along, points, actives, tailBegin, bound, lanes, 1, accs);
    for (Value &acc : accs)
      for (int64_t offset = lanes / 2; offset > 0; offset /= 2) {
        auto i32 = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 32); };
        Value other =
            gpu::ShuffleOp::create(b, loc, acc, i32(offset), i32(lanes), gpu::ShuffleMode::XOR).getShuffleResult();
        acc = arith::AddFOp::create(b, loc, acc, other);
      }
    return accs;
  }

  /// Unrolling replaces loops and their results, so it waits until nothing refers to them by mapping.
  void flushUnrolls() {
    for (scf::ForOp loop : pendingUnrolls)
      unrollLoop(loop);
    pendingUnrolls.clear();
  }

private:
  bool vectorized(Value v) const { return width > 1 && analysis.isVarying(v); }

  void emitStore(Value value, ValueRange indices, Location loc) {
    if (staged)
      return staged->store(b, value, scalars.lookup(analysis.innerIndex()), width);
    std::optional<OpBuilder::InsertionGuard> insertion;
    if (storeGuard) { // one lane of a warp writes what all lanes computed
      insertion.emplace(b);
      b.setInsertionPointToStart(scf::IfOp::create(b, loc, storeGuard, false).thenBlock());
    }
    if (width > 1) {
      // CPU: outputs are written once and not read back by the kernel; streaming stores skip the read for
      // ownership that a cached store of a line costs (as memcpy does for large copies). They need an
      // aligned address and pay only for a large output: where `outputAligned` is known only at run time,
      // each store branches on it (the same way every time) instead of the loop running in two copies.
      auto plainStore = [&] {
        auto store = vector::StoreOp::create(b, loc, value, domain.output(), indices);
        store.setAlignmentAttr(b.getI64IntegerAttr(vectorAccessAlignment(domain.output(), width, maxAlignment)));
      };
      if (!streamingStores)
        return plainStore();
      OpBuilder::InsertionGuard guard(b);
      if (outputAligned) {
        auto aligned = scf::IfOp::create(b, loc, outputAligned, /*withElseRegion=*/true);
        b.setInsertionPointToStart(aligned.elseBlock());
        plainStore();
        b.setInsertionPointToStart(aligned.thenBlock());
      }
      auto store = vector::StoreOp::create(b, loc, value, domain.output(), indices);
      store.setAlignmentAttr(b.getI64IntegerAttr(
          vectorAccessAlignment(domain.output(), width, std::max(maxAlignment, outputAlignment))));
      store.setNontemporal(true);
    } else {
      memref::StoreOp::create(b, loc, value, domain.output(), indices);
    }
  }

  /// A fused row assignment's element(s) j (moe.row_store), under its guard; every lane stores its own.
  void emitRowStore(RowStoreOp store) {
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
    if (!rowStores.streaming) {
      auto plain = vector::StoreOp::create(b, loc, value, output, at);
      plain.setAlignmentAttr(b.getI64IntegerAttr(vectorAccessAlignment(output, width, maxAlignment)));
      return;
    }
    // Streaming where the outputs take it (see emitStore): a branch per store, the same way every time.
    auto aligned = scf::IfOp::create(b, loc, rowStores.aligned, /*withElseRegion=*/true);
    b.setInsertionPointToStart(aligned.elseBlock());
    auto plain = vector::StoreOp::create(b, loc, value, output, at);
    plain.setAlignmentAttr(b.getI64IntegerAttr(vectorAccessAlignment(output, width, maxAlignment)));
    b.setInsertionPointToStart(aligned.thenBlock());
    auto vectorStore = vector::StoreOp::create(b, loc, value, output, at);
    vectorStore.setAlignmentAttr(
        b.getI64IntegerAttr(vectorAccessAlignment(output, width, std::max(maxAlignment, rowStores.alignment))));
    vectorStore.setNontemporal(true);
  }

public:
  /// How moe.row_store writes its vectors (see emitPointRange): with `streaming`, non-temporal where
  /// `aligned` (an i1 computed before the range) holds, plain elsewhere.
  struct RowStoreTarget {
    bool streaming = false;
    int64_t alignment = 1; // what the outputs' base pointers are aligned to where `aligned` holds
    Value aligned;
  } rowStores;

private:
  VectorType vectorOf(Type t) const { return VectorType::get({width}, t); }
  static VectorType vectorOf(Type t, int64_t n) { return VectorType::get({n}, t); }

  /// The emitted value of `orig`, broadcast to a vector when `wantVector` and it is uniform.
  Value get(Value orig, bool wantVector) {
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

  /// h, h+1, ..., h+V-1 as a vector, for bodies that compute with h itself.
  Value innerLanes() {
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

  /// Emits a block's ops (not its terminator).
  void emitOps(Block &block) {
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

  void emitOp(Operation &op) {
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

  /// Emits a moe.compute / moe.sum body and returns its yielded value.
  Value emitBlock(Block &block, bool wantVector) {
    emitOps(block);
    return get(block.getTerminator()->getOperand(0), wantVector);
  }

  void emitSum(SumOp sum) {
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

  /// The partial sums' width for a sum up to `bound`: one thread and a short constant bound get partial
  /// sums no wider than the bound (a power of two), so the vector loop is not skipped altogether.
  int64_t splitWidth(Value bound) const {
    int64_t w = split.width;
    APInt boundValue;
    if (split.lanes == 1 && matchPattern(bound, m_ConstantInt(&boundValue)))
      while (w > 1 && boundValue.getSExtValue() < w)
        w /= 2;
    return w;
  }

  /// One loop over [begin, end) step `step` along `sum`'s index: each of `points` adds its terms of width
  /// `termWidth` to its accumulator (from `inits`); returns the accumulators.
  static SmallVector<Value> splitPartials(SumOp sum, const VaryingAnalysis &along, ArrayRef<BodyEmitter *> points,
                                          ArrayRef<Value> actives, Value begin, Value end, int64_t step,
                                          int64_t termWidth, ValueRange inits, bool beginsInFirstStep = false) {
    BodyEmitter &first = *points.front();
    OpBuilder &b = first.b;
    Location loc = sum.getLoc();
    Block &body = sum.getBody().front();
    // What does not vary along j runs once, before the loop: a fused row's scale (A3's probs[t, e]).
    // Only top-level ops without regions that read at most: a load there reads proven-in-bounds indices
    // (a checked one sits in an scf.if), so it is safe even when the loop runs no step.
    SmallVector<Operation *> invariant;
    DenseSet<Operation *> hoistable;
    auto available = [&](Value v) { // computed before the loop: outside the body, or hoisted
      Operation *def = v.getDefiningOp();
      return isa<BlockArgument>(v) ? v.getParentBlock() != &body : (!sum->isAncestor(def) || hoistable.contains(def));
    };
    if (!first.staged)
      for (Operation &o : body.without_terminator())
        if (o.getNumRegions() == 0 && o.getNumResults() > 0 && (isa<memref::LoadOp>(o) || isMemoryEffectFree(&o)) &&
            llvm::none_of(o.getResults(), [&](Value r) { return along.isVarying(r); }) &&
            llvm::all_of(o.getOperands(), available)) {
          invariant.push_back(&o);
          hoistable.insert(&o);
        }
    // Per point; an op whose operands are the first point's takes the first point's results.
    SmallVector<IRMapping> hoisted;
    for (BodyEmitter *point : points) {
      BodyEmitter pre(b, first.domain, along, termWidth, first.unroll, first.maxAlignment);
      pre.scalars = point->scalars;
      for (Operation *o : invariant) {
        bool asFirst = !hoisted.empty() && llvm::all_of(o->getOperands(), [&](Value v) {
          return pre.scalars.lookupOrDefault(v) == hoisted.front().lookupOrDefault(v);
        });
        if (!asFirst) {
          pre.emitOp(*o);
          continue;
        }
        for (Value r : o->getResults())
          pre.scalars.map(r, hoisted.front().lookup(r));
      }
      hoisted.push_back(pre.scalars);
    }
    // What every point's term computes alike: loads and arithmetic whose operands are the same for all
    // points (A3: token t's gradient row, for each of its experts), computed once in the loop. An scf.if
    // qualifies too (a load under its bounds check) when everything in it takes only such values: its
    // stores (a failed check's status) then store the same values the points' would.
    SmallVector<Operation *> shared;
    if (points.size() > 1 && !first.staged) {
      DenseSet<Value> sharedValues{body.getArgument(0)};
      auto same = [&](Value v) {
        if (sharedValues.contains(v))
          return true;
        if (Operation *def = v.getDefiningOp(); (def && sum->isAncestor(def) && !hoistable.contains(def)) ||
                                                (!def && v.getParentBlock() == &body))
          return false; // a term's own value
        return llvm::all_of(hoisted, [&](IRMapping &m) { return m.lookupOrDefault(v) == hoisted[0].lookupOrDefault(v); });
      };
      auto computedAlike = [&](Operation &o) {
        bool alike = true;
        o.walk([&](Operation *inner) {
          alike &= isa<scf::IfOp, scf::YieldOp, memref::LoadOp, memref::StoreOp>(inner) ||
                   (inner->getNumRegions() == 0 && isMemoryEffectFree(inner));
          for (Value v : inner->getOperands())
            if (Operation *def = v.getDefiningOp(); !(def && o.isAncestor(def)) &&
                                                    !(isa<BlockArgument>(v) && o.isAncestor(v.getParentBlock()->getParentOp())))
              alike &= same(v);
        });
        return alike;
      };
      for (Operation &o : body.without_terminator())
        if (!hoistable.contains(&o) && o.getNumResults() > 0 && computedAlike(o)) {
          shared.push_back(&o);
          sharedValues.insert(o.getResults().begin(), o.getResults().end());
        }
    }
    auto loop = scf::ForOp::create(b, loc, begin, end, arith::ConstantIndexOp::create(b, loc, step), inits);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    BodyEmitter common(b, first.domain, along, termWidth, first.unroll, first.maxAlignment);
    common.scalars = hoisted.front();
    common.scalars.map(body.getArgument(0), loop.getInductionVar());
    for (Operation *o : shared)
      common.emitOp(*o);
    SmallVector<Value> next;
    for (auto [i, point, acc, scalars] : llvm::enumerate(points, loop.getRegionIterArgs(), hoisted)) {
      Value active = i < actives.size() ? actives[i] : Value();
      std::optional<OpBuilder::InsertionGuard> inside;
      scf::IfOp ifActive;
      if (active) { // acc + term where the point is active, acc where not
        inside.emplace(b);
        ifActive = scf::IfOp::create(b, loc, TypeRange{acc.getType()}, active, /*withElseRegion=*/true);
        b.setInsertionPointToStart(ifActive.elseBlock());
        scf::YieldOp::create(b, loc, acc);
        b.setInsertionPointToStart(ifActive.thenBlock());
      }
      BodyEmitter term(b, first.domain, along, termWidth, first.unroll, first.maxAlignment);
      term.scalars = scalars;
      term.staged = point->staged;
      term.rowStores = point->rowStores;
      for (Operation *o : invariant)
        term.skip(o);
      for (Operation *o : shared) {
        term.skip(o);
        for (Value r : o->getResults())
          common.vectorized(r) ? term.vectors.map(r, common.vectors.lookup(r)) : term.scalars.map(r, common.scalars.lookup(r));
      }
      term.scalars.map(body.getArgument(0), loop.getInductionVar());
      Value sumNow = arith::AddFOp::create(b, loc, acc, term.emitBlock(body, termWidth > 1));
      term.flushUnrolls();
      if (active) {
        scf::YieldOp::create(b, loc, sumNow);
        inside.reset();
        sumNow = ifActive.getResult(0);
      }
      next.push_back(sumNow);
    }
    common.flushUnrolls();
    scf::YieldOp::create(b, loc, next);
    if (first.split.loadsInFlight && first.split.lanes > 1 && termWidth > 1 && beginsInFirstStep)
      return unrollForLoadsInFlight(b, loop);
    return SmallVector<Value>(loop.getResults());
  }

  void emitSplitSum(SumOp sum, const VaryingAnalysis &along) {
    if (!staged)
      return map(sum.getResult(), splitSums(sum, {this}).front());
    Location loc = sum.getLoc();
    auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
    Value bound = get(sum.getBound(), false);
    int64_t w = splitWidth(bound);
    Value mainEnd = arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, bound, cst(w)), cst(w));
    auto partials = [&](Value begin, Value end, int64_t step, int64_t termWidth, Value init) {
      return splitPartials(sum, along, {this}, {}, begin, end, step, termWidth, init).front();
    };
    emitStagedSplitSum(sum, w, bound, mainEnd, partials);
  }

  /// The split sum of a staged point (Ascend point rows): the row along j a chunk at a time, each chunk's
  /// loads copied into UB buffers first. Chunks are whole multiples of the w partial sums (the plan makes
  /// them so), so every term lands in the same partial sum, in the same order, as in emitSplitSum; the last
  /// chunk is peeled, since the reduction of the partial sums comes before the tail's terms.
  template <typename Partials>
  void emitStagedSplitSum(SumOp sum, int64_t w, Value bound, Value mainEnd, Partials &&partials) {
    Location loc = sum.getLoc();
    Block &body = sum.getBody().front();
    auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
    int64_t chunk = staged->chunk(), chunks = staged->chunks();
    SmallVector<RowStoreOp> rowStores; // copied out after each chunk
    sum->walk([&](RowStoreOp store) { rowStores.push_back(store); });
    // Stages the chunk from `offset` and returns its end.
    auto stage = [&](Value offset) {
      Value length = arith::MinSIOp::create(b, loc, cst(chunk), arith::SubIOp::create(b, loc, bound, offset));
      staged->beginChunk(offset, length);
      staged->copyIn(b, body, nullptr, scalars, Value());
      return arith::AddIOp::create(b, loc, offset, length).getResult();
    };
    Type partialType = w > 1 ? Type(vectorOf(b.getF32Type(), w)) : Type(b.getF32Type());
    Value acc = arith::ConstantOp::create(b, loc, b.getZeroAttr(partialType));
    if (chunks > 1) {
      auto loop = scf::ForOp::create(b, loc, cst(0), cst(chunks - 1), cst(1), ValueRange{acc});
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value offset = arith::MulIOp::create(b, loc, loop.getInductionVar(), cst(chunk));
      Value end = stage(offset);
      Value next = partials(offset, end, w, w, loop.getRegionIterArgs()[0]);
      staged->copyOutRows(b, rowStores, scalars);
      scf::YieldOp::create(b, loc, ValueRange{next});
      acc = loop.getResult(0);
    }
    Value last = cst((chunks - 1) * chunk);
    Value end = stage(last);
    if (w > 1) {
      acc = vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, partials(last, mainEnd, w, w, acc));
      last = mainEnd;
    }
    map(sum.getResult(), partials(last, end, 1, 1, acc));
    staged->copyOutRows(b, rowStores, scalars);
  }

  void emitFold(FoldOp fold) {
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

  /// A fold over the short list of runShortListIn in its `slots` steps: step j reads the list (and its step
  /// table) at min(j, count - 1), so that it reads only what a live step reads, and adds its term only where
  /// j < count. The loop unrolls fully, and moe-guard-loads makes each step's gather a predicated load: the
  /// steps' gathers issue together, and a row with fewer live steps runs fewer of them.
  void emitShortListSteps(FoldOp fold, bool vec) {
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

  /// An integer-sum fold that every lane of a converged warp would compute alike: lane l folds steps l,
  /// l + 32, ... from 0, a shuffle tree adds the 32 partial sums (as two 32-bit halves), and the init is
  /// added last. 32 times fewer steps per lane, the same total.
  void emitLaneSplitFold(FoldOp fold) {
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
    for (int64_t offset = 16; offset > 0; offset /= 2) {
      auto shuffled = [&](Value half) {
        return gpu::ShuffleOp::create(b, loc, half, c32(offset), c32(32), gpu::ShuffleMode::XOR).getShuffleResult();
      };
      Value lo = shuffled(arith::TruncIOp::create(b, loc, i32, total));
      Value hi = shuffled(arith::TruncIOp::create(b, loc, i32, arith::ShRUIOp::create(b, loc, total, shift)));
      Value other = arith::OrIOp::create(b, loc, arith::ShLIOp::create(b, loc, arith::ExtUIOp::create(b, loc, i64, hi), shift),
                                         arith::ExtUIOp::create(b, loc, i64, lo));
      total = arith::AddIOp::create(b, loc, total, other);
    }
    Value sum = type.isIndex() ? Value(arith::IndexCastOp::create(b, loc, type, total))
                               : Value(arith::TruncIOp::create(b, loc, type, total));
    if (type.isSignlessInteger(64))
      sum = total;
    map(fold.getResult(), arith::AddIOp::create(b, loc, get(fold.getInit(), false), sum));
  }

  /// The CPU list: a stack array; a branch-free loop stores every index at the list's end and moves the
  /// end past the live ones (the end never passes the index, so it stays inside the array).
  void emitCompact(CompactOp compact);

  /// CPU, RowTarget::compactLanes: the loop over [0, bound) tests `compactLanes` entries at a time, the
  /// predicate as vectors, and stores the live indices of each step compressed to the list's end (a
  /// register compress and one vector store; the end never passes the step's first index, so the store
  /// stays inside the array). Returns the loop over the whole steps (its upper bound is where the entries
  /// left for one at a time begin, its result the count so far), or null where the predicate does not
  /// vectorize along its index.
  scf::ForOp emitVectorCompact(CompactOp compact, Value list, Value bound);

  /// A fold's per-step values, computed in the row's prologue (emitStepTables): the step's ops that do not
  /// vary along the row, and a shared-memory column (this warp's from `base`) per value the rest uses.
  struct StepTable {
    DenseSet<Operation *> invariant;
    SmallVector<std::pair<Value, Value>> columns; // (value in the step, its column)
    SmallVector<Value> allTrue;                   // per column: i1 ones, whether it is true at every step
    Value base;
  };

  /// Where this warp's part of a workgroup buffer of `length` entries per warp starts.
  Value warpBase(Location loc, int64_t length);

  /// Whether `op` (a top-level op of a fold's step) neither varies along the row nor reads the accumulator.
  bool stepInvariant(Operation &op) const;

  /// The most steps `fold` runs: a constant bound, or the length of the list whose count bounds it.
  static int64_t mostSteps(FoldOp fold);

  static constexpr int64_t kStepTableBytes = 32768; // per domain, in the block's shared memory
  int64_t stepTableBytes = 0;                        // the tables' so far

  /// See emitStepTables.
  void emitStepTable(FoldOp fold);

  /// A step table's loop: the per-step work `taken` inside the branches of `ifOp`, under its condition; the
  /// columns among its values come out of the branch taken (zero from the other).
  void emitBranchWork(scf::IfOp ifOp, const DenseSet<Operation *> &taken, const SetVector<Value> &columns);

  /// In a fold step with a step table: its invariant ops are left out, and the values the rest uses are
  /// read from the table's columns at step `j`.
  void readStepTable(const StepTable &table, Value j, Location loc);

  /// The GPU list: each warp's in shared memory (a workgroup buffer of one list per warp of the block).
  /// 32 indices at a time, each lane tests one; a ballot of the results and the population count of the
  /// lanes below give every live index its place, in order. A warp barrier then makes the list visible to
  /// all lanes. Runs in the row's prologue, where a warp's lanes are converged.
  void emitWarpCompact(CompactOp compact);

  /// The GPU list of at most 32 entries: one ballot, lane k testing entry k, no loop and no block barrier.
  /// Each lane's entry, whether it is live and its place stay known (laneLists): the lanes then write a
  /// fold's step table for their own entries (emitStepTable), with the values the test computed, instead of
  /// reading the list back and loading them again (C2 at Mixtral: a token's row index of each of 8 experts).
  void emitLaneCompact(CompactOp compact);

  /// The GPU list of a row that a whole block runs (several warps, one row per block): one list per block,
  /// built by all its warps. Each warp takes every W-th run of 32 indices and records the run's ballot; after
  /// a barrier each places its runs' live indices after those of the runs before, in order; a second barrier
  /// makes the list visible to the block. The row's index loads run once per block, not once per warp (C2 at
  /// DeepSeek-V3: 1 KiB of its rowmap per token, read by each of 8 warps), and the runs in parallel.
  void emitBlockCompact(CompactOp compact);

  /// Lane k's step of `compact`'s range: whether it is below `bound` and live, and the warp's ballot of that.
  std::pair<Value, Value> ballotOfSteps(CompactOp compact, Value k, Value bound);

  /// list[i] of a warp's shared-memory list.
  void emitSharedListLoad(memref::LoadOp load);

  OpBuilder atFunctionEntry() { return builderAtFunctionEntry(b); }

  /// A shared-memory buffer of the kernel this code is in: `size` elements of `element`, 16-byte aligned. LLVM
  /// reads consecutive entries of a buffer as one vector where it assumes that alignment; declared at 4 bytes,
  /// a buffer after one of an odd number of words would then be read at an address the vector faults on.
  Value sharedBuffer(int64_t size, Type element, Location loc);

  /// Fully unrolls short reductions (K <= unroll), else unrolls by the schedule's factor; either only
  /// while the unrolled body stays under kMaxUnrolledOps. Inner loops are unrolled first, so the budget
  /// bounds the code of nested reductions (sum(k < 2) sum(j < 2) ...) linearly, not 2^depth.
  /// The bound is read from the loop (0 to bound step 1), not kept: unrolling an earlier loop (a
  /// moe.compact's, whose result is this one's bound) replaces the value.
  void unrollLoop(scf::ForOp loop) {
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
  static constexpr int64_t kMaxUnrolledOps = 4096;

  /// GPU: a warp's loop along a split sum's row (a warp per point, or per batch of points) waits for its
  /// loads once per step, and one warp covers the whole row: with few warps per SM (a small batch of
  /// tokens, or a kernel whose registers allow few) that chain of waits, not the bandwidth, bounds it.
  /// Unrolled by the largest power of two that keeps at most kLoadsInFlight vector loads per lane in one
  /// step and divides its steps, the steps' loads issue together (a step of at most kMaxUnrolledStepLoads). The adds
  /// still run in order, so each partial sum is the same. Only where every lane runs the same number of steps (the loop
  /// starts within its first step and a constant end is a whole number of steps): there the loop runs from 0, each
  /// lane's offset added in its body, so that the count is a constant and no lane runs a remainder loop
  /// that the others skip.
  static SmallVector<Value> unrollForLoadsInFlight(OpBuilder &b, scf::ForOp loop) {
    APInt end, step;
    if (!matchPattern(loop.getUpperBound(), m_ConstantInt(&end)) || !matchPattern(loop.getStep(), m_ConstantInt(&step)))
      return SmallVector<Value>(loop.getResults());
    int64_t steps = step.getSExtValue() > 0 && end.getSExtValue() % step.getSExtValue() == 0
                        ? end.getSExtValue() / step.getSExtValue()
                        : 0;
    int64_t loads = 0, bodyOps = 0;
    loop.getBody()->walk([&](Operation *o) {
      loads += isa<vector::LoadOp>(o);
      ++bodyOps;
    });
    int64_t factor = 1;
    // At least two unrolled steps stay: the loop is kept (its results are the sums), never promoted away.
    while (loads > 0 && loads <= kMaxUnrolledStepLoads && steps > 0 && 2 * factor * loads <= kLoadsInFlight &&
           steps % (2 * factor) == 0 && steps / (2 * factor) >= 2)
      factor *= 2;
    if (factor == 1 || bodyOps * factor > kMaxUnrolledOps)
      return SmallVector<Value>(loop.getResults());
    startLaneLoopAtZero(b, loop);
    (void)loopUnrollByFactor(loop, factor); // a whole number of unrolled steps: no remainder loop
    return SmallVector<Value>(loop.getResults());
  }

  /// 32 vector loads of 16 bytes per lane, 128 registers of data in flight: a batch of 2 points (2 rows and
  /// the row they share, 3 loads a step) takes 8 steps at once, 96 registers, fewer than the batch of 8
  /// that sets the kernel's count (A3 probs at Mixtral, 1024 tokens: 85.8 % of copy in the emulator's bound
  /// with 4 steps, 88.4 % with 8). A step of more loads than kMaxUnrolledStepLoads (the batch of 8, 9 loads)
  /// stays as it is: its registers already set the count (unrolled by 2, ptxas spilled 84 bytes at
  /// DeepSeek-V3).
  static constexpr int64_t kLoadsInFlight = 32, kMaxUnrolledStepLoads = 4;

  void emitIf(scf::IfOp ifOp) {
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

  /// A load along h becomes a vector.load; an elementwise arith op gets vector operands and results.
  void emitVectorOp(Operation &op) {
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

  /// The byte alignment a vector access along the last dim of `memref` can promise, given a base pointer
  /// aligned to `maxAlignment`: h is a multiple of V, but a row starts only at a multiple of its stride.
  int64_t accessAlignment(Value memref) const { return vectorAccessAlignment(memref, width, maxAlignment); }

  void map(Value orig, Value emitted) {
    if (vectorized(orig))
      vectors.map(orig, emitted);
    else
      scalars.map(orig, emitted);
  }

  OpBuilder &b;
  DomainOp domain;
  const VaryingAnalysis &analysis;
  int64_t width, unroll, maxAlignment;
  ReductionSplit split;
  Value storeGuard;
  Part part;
  bool onGpu = false, streamingStores = false;
  Value outputAligned; // streamingStores: an i1 that the streaming stores need (see RowTarget)
  StagedRow *staged = nullptr;
  bool skipMapped = false; // set by premap()
  int64_t outputAlignment = 0; // what the output's base pointer is known to be aligned to (a versioned loop)
  int64_t compactLanes = 0;    // see RowTarget
  Value warpLane; // set where the warp's 32 lanes run this code converged and alike: folds split over them
  IRMapping scalars, vectors;
  DenseMap<Value, std::pair<Value, Value>> sharedLists; // a moe.compact list -> (buffer, this warp's base)
  struct LaneList {
    Value entry, live, place; // the lane's entry (index), whether it is live, its place in the list
  };
  DenseMap<Value, LaneList> laneLists; // a list built by emitLaneCompact
  DenseMap<Value, Value> laneEntries;  // while a lane writes a step table's row for its entry: list -> entry
  DenseMap<Operation *, StepTable> stepTables;
  DenseMap<Operation *, bool> decided; // see decide()
  DenseSet<Operation *> skipped;       // see skip()
  Value laneIndices; // h, h+1, ..., h+V-1
  SmallVector<scf::ForOp> pendingUnrolls;
  struct {
    Value count; // the list's count in the domain's body
    int64_t slots = 0;
  } shortList; // see runShortListIn
};

/// Splits a flattened row index into the index of each leading dim (row-major).
inline SmallVector<Value> unflattenRow(OpBuilder &b, Location loc, Value row, ValueRange rowBounds) {
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

#endif // MOEC_COMPILER_TRANSFORMS_BODYEMITTER_H
