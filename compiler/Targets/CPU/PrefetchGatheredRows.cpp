//===- PrefetchGatheredRows.cpp - CPU: software prefetch of gathered rows ---===//
//
// A CPU loop along a row that reads a gathered row (x[idx[n], h], the row chosen by data) waits on memory
// at every new row: the hardware prefetchers learn a stream only after a few misses, and they stop at each
// 4 KiB page. One thread then reads at about half a memcpy's bandwidth (B2 over rows in random order, 1
// thread: 0.5 of a memcpy for the best hand-written loop; with both prefetches below, 0.7).
//   1. In the loop along the row, each gathered vector load also prefetches the same row kPrefetchBytes
//      further on (clamped to the row's last element).
//   2. Where that loop runs in a loop over rows and the gathered row's index is computed from the row loop's
//      index by pure ops and loads of tensors the function never writes, the next row's index is computed
//      ahead (its loads clamped into their tensors) and the first kPrefetchBytes of its gathered row are
//      prefetched before the current row's loop starts.
// Whether the prefetches pay depends on the machine as much as on the rows. Where the hardware already
// streams them (each expert's rows read in order, as B2 and C2 read them at Mixtral's 8 experts), a 2-core
// EPYC lost half of C2's speed to them and a 2-core Xeon gained a third (bench/cpu/RESULTS.md, stop 46). So
// each loop along a row runs its prefetches at one of two distances, kPrefetchBytes ahead or none (the
// line its load reads anyway), and measures which is faster as it runs (chooseDistanceOnCycles): a few rows
// at each, alternating, timed by the cycle counter, then the faster for the next rows, measured again every
// kProbePeriod rows. The distance is a value of the row, not a copy of the loop: two copies of every loop
// along a row doubled the CPU kernels and their compile time. The next row's prefetch (2.) skips a
// row the hardware streams or that is in cache: a table of recently gathered rows (recordRow) classes it.
// The pass runs after moe-version-row-loops, so each version's loop measures only its own rows.
// Prefetches change no result; every address they compute lies inside its tensor.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/SetVector.h"

#include <optional>
#include <set>

#define DEBUG_TYPE "moe-prefetch-gathered-rows"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEPREFETCHGATHEREDROWS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {
/// How far ahead along a row to prefetch (a hand-written probe on a 2-core EPYC: 512 B to 1 KiB best).
constexpr int64_t kPrefetchBytes = 768;
constexpr int64_t kLineBytes = 64;
/// Into every cache level (prefetcht0): on the same machine, the L2 only lost the gain.
constexpr uint32_t kLocality = 3;
/// Slots of the table of recently gathered rows (a power of two; 64 measured, below).
constexpr int64_t kRecentRows = 64;
/// Each copy of a loop along a row runs kProbeRows rows (alternating with the other's) at the start of every
/// kProbePeriod rows it runs; the other rows run the copy that took fewer cycles. A row of B2 at DeepSeek-V3
/// takes some 20000 cycles, far above the cycle counter's cost and resolution. With 8 rows in 512, and the
/// counter read at every row, C2 at DeepSeek-V3 and Qwen3 lost 0.01-0.03 of a memcpy against prefetching
/// always; with 8 in 1024, the counter read by the probing rows only, nothing beyond the noise.
constexpr int64_t kProbeRows = 4;
constexpr int64_t kProbePeriod = 1024; // a power of two

/// How the next row was read before it, in the table of recent rows: whether the row before it (by its
/// linear number in the gathered tensor) is among the recent rows read from that tensor (the hardware
/// prefetchers then already stream it), and whether the row itself is (read again: in cache). The recent
/// rows are a direct-mapped table of kRecentRows linear row numbers (the slot is the number's low bits), so
/// a row stays recent until another row takes its slot: with K rows gathered per token, for about
/// kRecentRows / K tokens.
struct RowClass {
  Value streamed, recent;
};

/// Whether `v` is computed from a load (a row chosen by data: a gather), looking through pure ops and
/// into the regions of the ops that yield it.
bool dependsOnLoad(Value v, DenseSet<Value> &seen) {
  if (!seen.insert(v).second)
    return false;
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  bool loads = false;
  def->walk([&](memref::LoadOp) { loads = true; });
  if (loads)
    return true;
  return llvm::any_of(def->getOperands(), [&](Value operand) { return dependsOnLoad(operand, seen); });
}

/// Adds to `slice` the ops inside `rows` that `v` is computed from; false when one of them is not a pure
/// op without regions or a load of a memref in `readOnly`, sits elsewhere than at the top of the two
/// loops' bodies (it would not run for every row), or uses a block argument other than the row index.
bool addRowSlice(Value v, scf::ForOp rows, scf::ForOp along, const DenseSet<Value> &readOnly,
                 SetVector<Operation *> &slice) {
  SmallVector<Value> work{v};
  while (!work.empty()) {
    Value value = work.pop_back_val();
    Operation *def = value.getDefiningOp();
    if (!def) {
      if (rows->isAncestor(cast<BlockArgument>(value).getOwner()->getParentOp()) &&
          value != rows.getInductionVar())
        return false;
      continue;
    }
    if (!rows->isAncestor(def) || slice.contains(def))
      continue;
    if ((def->getBlock() != rows.getBody() && def->getBlock() != along.getBody()) || def->getNumRegions() > 0)
      return false;
    auto load = dyn_cast<memref::LoadOp>(def);
    if (load ? !readOnly.contains(load.getMemRef()) : !isMemoryEffectFree(def))
      return false;
    slice.insert(def);
    for (Value operand : def->getOperands())
      work.push_back(operand);
  }
  return true;
}

/// Whether `index` lies in [0, size).
Value isInside(OpBuilder &b, Location loc, Value index, Value size) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  return arith::AndIOp::create(b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, index, zero),
                               arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, index, size));
}

/// `index` if it lies in [0, size), else 0.
Value clampIndex(OpBuilder &b, Location loc, Value index, Value size) {
  return arith::SelectOp::create(b, loc, isInside(b, loc, index, size), index, arith::ConstantIndexOp::create(b, loc, 0));
}

/// Dim `d` of `memref` (a constant where the type has it).
Value dimOf(OpBuilder &b, Location loc, Value memref, int64_t d) {
  return b.createOrFold<memref::DimOp>(loc, memref, d);
}

struct PrefetchGatheredRowsPass : impl::MoePrefetchGatheredRowsBase<PrefetchGatheredRowsPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) { runOn(func); });
  }

  void runOn(func::FuncOp func) {
    // Tensors the function never writes: their loads can run ahead.
    DenseSet<Value> written, readOnly;
    func.walk([&](Operation *op) {
      if (auto store = dyn_cast<memref::StoreOp>(op))
        written.insert(store.getMemRef());
      else if (auto store = dyn_cast<vector::StoreOp>(op))
        written.insert(store.getBase());
      else if (!isa<memref::LoadOp, vector::LoadOp>(op) && !isMemoryEffectFree(op) && op->getNumRegions() == 0)
        for (Value operand : op->getOperands())
          if (isa<MemRefType>(operand.getType()))
            written.insert(operand); // anything else that may write through it
    });
    auto notWritten = [&](Value v) {
      if (isa<MemRefType>(v.getType()) && !written.contains(v))
        readOnly.insert(v);
    };
    llvm::for_each(func.getArguments(), notWritten);
    func.walk([&](Operation *op) { llvm::for_each(op->getResults(), notWritten); });
    // One prefetch per gathered row a loop along the row reads (its memref and row indices).
    SmallVector<std::pair<vector::LoadOp, scf::ForOp>> gathers;
    std::set<std::pair<Operation *, SmallVector<void *>>> seen;
    func.walk([&](vector::LoadOp load) {
      auto along = load->getParentOfType<scf::ForOp>();
      if (!along || load.getIndices().size() < 2 || load.getIndices().back() != along.getInductionVar())
        return;
      DenseSet<Value> visited;
      ValueRange row = load.getIndices().drop_back();
      if (!llvm::any_of(row, [&](Value index) { return dependsOnLoad(index, visited); }))
        return;
      SmallVector<void *> key{load.getBase().getAsOpaquePointer()};
      for (Value index : row)
        key.push_back(index.getAsOpaquePointer());
      if (seen.insert({along, key}).second)
        gathers.push_back({load, along});
    });
    // Per gather: where it can, the current row's index, checked against and then added to the table of
    // recent rows (all of them before any next row is checked); then the prefetches.
    SmallVector<std::optional<RowSlice>> slices;
    for (auto [load, along] : gathers)
      slices.push_back(rowSlice(load, along, readOnly));
    // Each gathered row whose indices are known before its loop is added to the table of recent rows, which
    // tells the next row's prefetch (2.) which rows not to prefetch.
    SetVector<Operation *> alongLoops;
    for (auto [g, gather] : llvm::enumerate(gathers)) {
      auto [load, along] = gather;
      alongLoops.insert(along);
      OpBuilder b(along);
      ValueRange indices = load.getIndices().drop_back();
      // Indices defined around the loop (they dominate it) are the row itself; else the slice computes them.
      if (llvm::all_of(indices,
                       [&](Value index) { return index.getParentRegion()->isAncestor(along->getParentRegion()); }))
        recordRow(b, load, SmallVector<Value>(indices));
      else if (slices[g])
        recordRow(b, load, cloneRowIndices(b, load, *slices[g], slices[g]->rows.getInductionVar()));
    }
    DenseMap<Operation *, SmallVector<Value>> distances; // each loop along a row's prefetch distances
    for (auto [g, gather] : llvm::enumerate(gathers)) {
      distances[gather.second].push_back(prefetchAlongRow(gather.first, gather.second));
      if (slices[g])
        prefetchNextRow(gather.first, gather.second, *slices[g]);
    }
    for (Operation *along : alongLoops)
      chooseDistanceOnCycles(cast<scf::ForOp>(along), distances[along]);
  }

  /// Each of `distances` (constants before `along`) becomes `near ? 0 : distance`, where `near` is decided
  /// by measuring: the first 2 kProbeRows rows of every kProbePeriod that this loop runs alternate the two
  /// distances and add up their cycles (llvm.readcyclecounter, in a stack array of the function: rows run,
  /// cycles near, cycles ahead); the other rows run at the distance that took fewer. Whether software
  /// prefetches pay depends on the machine as much as on the rows: where the hardware streams the rows (B2
  /// and C2 at Mixtral's 8 experts), the EPYC lost half of C2's speed to them and the Xeon gained a third.
  /// A prefetch at distance 0 asks for the line its load reads next: it fetches nothing more.
  void chooseDistanceOnCycles(scf::ForOp along, ArrayRef<Value> distances) {
    OpBuilder b(along);
    Location loc = along.getLoc();
    Value state = cycleCounts(along->getParentOfType<func::FuncOp>());
    auto constant = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v).getResult(); };
    auto load = [&](int64_t i) { return memref::LoadOp::create(b, loc, state, ValueRange{constant(i)}).getResult(); };
    Value rowsRun = load(0);
    Value phase = arith::AndIOp::create(b, loc, rowsRun, constant(kProbePeriod - 1));
    Value probing = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, phase, constant(2 * kProbeRows));
    Value evenRow = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          arith::AndIOp::create(b, loc, phase, constant(1)), constant(0));
    // A new probe starts from no cycles.
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, phase, constant(0));
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(scf::IfOp::create(b, loc, first, /*withElseRegion=*/false).thenBlock());
      for (int64_t i : {1, 2})
        memref::StoreOp::create(b, loc, constant(0), state, ValueRange{constant(i)});
    }
    Value nearFaster = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, load(1), load(2));
    Value near = arith::SelectOp::create(b, loc, probing, evenRow, nearFaster);
    // The cycle counter is read only by the rows that probe (22 ns a read in a VM).
    auto startIf = scf::IfOp::create(b, loc, TypeRange{b.getI64Type()}, probing, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(startIf.thenBlock());
      scf::YieldOp::create(b, loc, readCycles(b, loc));
      b.setInsertionPointToStart(startIf.elseBlock());
      scf::YieldOp::create(b, loc, arith::ConstantIntOp::create(b, loc, 0, 64).getResult());
    }
    for (Value distance : distances) {
      Value chosen = arith::SelectOp::create(b, loc, near, constant(0), distance);
      distance.replaceUsesWithIf(chosen, [&](OpOperand &use) { return along->isAncestor(use.getOwner()); });
    }
    b.setInsertionPointAfter(along);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(scf::IfOp::create(b, loc, probing, /*withElseRegion=*/false).thenBlock());
      Value cycles = arith::IndexCastOp::create(
          b, loc, b.getIndexType(), arith::SubIOp::create(b, loc, readCycles(b, loc), startIf.getResult(0)));
      Value slot = arith::SelectOp::create(b, loc, near, constant(1), constant(2));
      Value sum = arith::AddIOp::create(b, loc, memref::LoadOp::create(b, loc, state, ValueRange{slot}), cycles);
      memref::StoreOp::create(b, loc, sum, state, ValueRange{slot});
    }
    memref::StoreOp::create(b, loc, arith::AddIOp::create(b, loc, rowsRun, constant(1)), state,
                            ValueRange{constant(0)});
  }

  static Value readCycles(OpBuilder &b, Location loc) {
    return LLVM::CallIntrinsicOp::create(b, loc, b.getI64Type(), b.getStringAttr("llvm.readcyclecounter"), ValueRange{})
        .getResult(0);
  }

  /// A loop's measurements: a stack array at the function's entry, zeroed.
  Value cycleCounts(func::FuncOp func) {
    OpBuilder b(&func.getBody().front(), func.getBody().front().begin());
    Location loc = func.getLoc();
    Value state = memref::AllocaOp::create(b, loc, MemRefType::get({3}, b.getIndexType()));
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    for (int64_t i = 0; i < 3; ++i)
      memref::StoreOp::create(b, loc, zero, state, ValueRange{arith::ConstantIndexOp::create(b, loc, i)});
    return state;
  }

  /// The row loop around a loop along the row and the ops (in an order they can be cloned in) that compute
  /// a gathered load's row indices from the row loop's index.
  struct RowSlice {
    mutable scf::ForOp rows; // mutable: an op handle's accessors are not const
    SmallVector<Operation *> ops;
  };

  /// The row slice of `load` in `along`, if the loop along the row runs in a loop over rows (through
  /// `scf.if`s only) and the row indices are computed at the top of the two loops' bodies from the row
  /// loop's index, by pure ops and loads of `readOnly` tensors.
  std::optional<RowSlice> rowSlice(vector::LoadOp load, scf::ForOp along, const DenseSet<Value> &readOnly) {
    Operation *parent = along->getParentOp();
    while (isa_and_nonnull<scf::IfOp>(parent))
      parent = parent->getParentOp();
    auto rows = dyn_cast_or_null<scf::ForOp>(parent);
    if (!rows || rows.getNumRegionIterArgs() != 0)
      return std::nullopt;
    SetVector<Operation *> slice;
    for (Value index : load.getIndices().drop_back())
      if (!addRowSlice(index, rows, along, readOnly, slice))
        return std::nullopt;
    // The row loop's body first, then the loop along the row's.
    RowSlice result{rows, SmallVector<Operation *>(slice.begin(), slice.end())};
    llvm::sort(result.ops, [&](Operation *x, Operation *y) {
      bool xRow = x->getBlock() == rows.getBody(), yRow = y->getBlock() == rows.getBody();
      return xRow != yRow ? xRow : x->isBeforeInBlock(y);
    });
    return result;
  }

  /// The row indices of `load` for row `row` of the slice's row loop, computed at `b`'s point; each load
  /// of the slice has its indices clamped into its tensor and yields 0 when the tensor has no elements.
  SmallVector<Value> cloneRowIndices(OpBuilder &b, vector::LoadOp load, const RowSlice &slice, Value row) {
    Location loc = load.getLoc();
    IRMapping mapping;
    mapping.map(slice.rows.getInductionVar(), row);
    for (Operation *op : slice.ops) {
      auto sliceLoad = dyn_cast<memref::LoadOp>(op);
      if (!sliceLoad) {
        b.clone(*op, mapping);
        continue;
      }
      SmallVector<Value> indices;
      Value nonEmpty;
      for (auto [d, index] : llvm::enumerate(sliceLoad.getIndices())) {
        Value size = dimOf(b, loc, sliceLoad.getMemRef(), d);
        Value some = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, size, arith::ConstantIndexOp::create(b, loc, 0));
        nonEmpty = nonEmpty ? Value(arith::AndIOp::create(b, loc, nonEmpty, some)) : some;
        indices.push_back(clampIndex(b, loc, mapping.lookupOrDefault(index), size));
      }
      if (!nonEmpty) { // a 0-d tensor always has its element
        mapping.map(sliceLoad.getResult(), memref::LoadOp::create(b, loc, sliceLoad.getMemRef(), indices).getResult());
        continue;
      }
      Type type = sliceLoad.getType();
      auto ifNonEmpty = scf::IfOp::create(b, loc, TypeRange{type}, nonEmpty, /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifNonEmpty.thenBlock());
        scf::YieldOp::create(b, loc, memref::LoadOp::create(b, loc, sliceLoad.getMemRef(), indices).getResult());
        b.setInsertionPointToStart(ifNonEmpty.elseBlock());
        scf::YieldOp::create(b, loc, arith::ConstantOp::create(b, loc, cast<TypedAttr>(b.getZeroAttr(type))).getResult());
      }
      mapping.map(sliceLoad.getResult(), ifNonEmpty.getResult(0));
    }
    SmallVector<Value> rowIndices;
    for (Value index : load.getIndices().drop_back())
      rowIndices.push_back(mapping.lookupOrDefault(index));
    return rowIndices;
  }

  /// Adds `row` to the table of recent rows.
  void recordRow(OpBuilder &b, vector::LoadOp load, ArrayRef<Value> row) {
    Value number = rowNumber(b, load, row);
    memref::StoreOp::create(b, load.getLoc(), number, recentRows(load.getBase()),
                            ValueRange{slotOf(b, load.getLoc(), number)});
  }

  RowClass classOf(OpBuilder &b, vector::LoadOp load, Value number) {
    Location loc = load.getLoc();
    Value table = recentRows(load.getBase());
    auto isRecent = [&](Value n) {
      Value seen = memref::LoadOp::create(b, loc, table, ValueRange{slotOf(b, loc, n)});
      return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, seen, n).getResult();
    };
    Value previous = arith::SubIOp::create(b, loc, number, arith::ConstantIndexOp::create(b, loc, 1));
    return {isRecent(previous), isRecent(number)};
  }

  /// The row's linear number in the gathered tensor (row-major; it wraps harmlessly for rows outside it).
  Value rowNumber(OpBuilder &b, vector::LoadOp load, ArrayRef<Value> row) {
    Location loc = load.getLoc();
    Value number;
    for (auto [d, index] : llvm::enumerate(row))
      number = number ? Value(arith::AddIOp::create(
                            b, loc, arith::MulIOp::create(b, loc, number, dimOf(b, loc, load.getBase(), d)), index))
                      : index;
    return number;
  }

  Value slotOf(OpBuilder &b, Location loc, Value number) {
    return arith::AndIOp::create(b, loc, number, arith::ConstantIndexOp::create(b, loc, kRecentRows - 1));
  }

  /// The table of recent rows of `tensor`: a stack array at the function's entry, filled with -2 (no row's
  /// predecessor: row numbers are at least 0).
  Value recentRows(Value tensor) {
    Value &table = tables[tensor];
    if (table)
      return table;
    auto func = tensor.getParentRegion()->getParentOfType<func::FuncOp>();
    OpBuilder b(&func.getBody().front(), func.getBody().front().begin());
    Location loc = func.getLoc();
    table = memref::AllocaOp::create(b, loc, MemRefType::get({kRecentRows}, b.getIndexType()));
    Value none = arith::ConstantIndexOp::create(b, loc, -2);
    auto fill = scf::ForOp::create(b, loc, arith::ConstantIndexOp::create(b, loc, 0),
                                   arith::ConstantIndexOp::create(b, loc, kRecentRows),
                                   arith::ConstantIndexOp::create(b, loc, 1));
    b.setInsertionPointToStart(fill.getBody());
    memref::StoreOp::create(b, loc, none, table, ValueRange{fill.getInductionVar()});
    return table;
  }

  /// 1. x[i, h + kPrefetchBytes], clamped to the row, before the load of x[i, h]. Returns the distance (a
  /// constant before the loop, in elements).
  Value prefetchAlongRow(vector::LoadOp load, scf::ForOp along) {
    auto type = cast<MemRefType>(load.getBase().getType());
    int64_t elemBytes = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
    OpBuilder before(along);
    Value distance = arith::ConstantIndexOp::create(before, load.getLoc(), kPrefetchBytes / elemBytes);
    OpBuilder b(load);
    Location loc = load.getLoc();
    SmallVector<Value> indices(load.getIndices());
    Value last = arith::SubIOp::create(b, loc, dimOf(b, loc, load.getBase(), type.getRank() - 1),
                                       arith::ConstantIndexOp::create(b, loc, 1));
    Value ahead = arith::AddIOp::create(b, loc, indices.back(), distance);
    indices.back() = arith::MinUIOp::create(b, loc, ahead, last);
    memref::PrefetchOp::create(b, loc, load.getBase(), indices, /*isWrite=*/false, /*localityHint=*/kLocality,
                               /*isDataCache=*/true);
    return distance;
  }

  /// 2. The next row's x[i', 0 .. kPrefetchBytes), before the loop along this row, when there is a next row
  /// in this range, its index lies inside x (-1, "no row", prefetches nothing) and the row is neither streamed
  /// nor recent.
  void prefetchNextRow(vector::LoadOp load, scf::ForOp along, const RowSlice &slice) {
    OpBuilder b(along);
    Location loc = load.getLoc();
    Value next = arith::AddIOp::create(b, loc, slice.rows.getInductionVar(), slice.rows.getStep());
    Value more = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, next, slice.rows.getUpperBound());
    b.setInsertionPointToStart(scf::IfOp::create(b, loc, more, /*withElseRegion=*/false).thenBlock());
    SmallVector<Value> rowIndices = cloneRowIndices(b, load, slice, next);
    RowClass rowClass = classOf(b, load, rowNumber(b, load, rowIndices));
    Value wanted = arith::XOrIOp::create(b, loc, arith::OrIOp::create(b, loc, rowClass.streamed, rowClass.recent),
                                         arith::ConstantIntOp::create(b, loc, 1, 1));
    for (auto [d, index] : llvm::enumerate(rowIndices))
      wanted = arith::AndIOp::create(b, loc, wanted, isInside(b, loc, index, dimOf(b, loc, load.getBase(), d)));
    b.setInsertionPointToStart(scf::IfOp::create(b, loc, wanted, /*withElseRegion=*/false).thenBlock());
    auto type = cast<MemRefType>(load.getBase().getType());
    int64_t elemBytes = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
    int64_t rowLength = type.isDynamicDim(type.getRank() - 1) ? 0 : type.getDimSize(type.getRank() - 1);
    int64_t bytes = rowLength ? std::min(kPrefetchBytes, rowLength * elemBytes) : 0;
    for (int64_t offset = 0; offset < bytes; offset += kLineBytes) {
      SmallVector<Value> indices(rowIndices);
      indices.push_back(arith::ConstantIndexOp::create(b, loc, offset / elemBytes));
      memref::PrefetchOp::create(b, loc, load.getBase(), indices, false, kLocality, true);
    }
  }

  /// The recent-rows table of each gathered tensor.
  DenseMap<Value, Value> tables;
};
} // namespace
} // namespace moec::moe
