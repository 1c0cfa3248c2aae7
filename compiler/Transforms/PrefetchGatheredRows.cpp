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
// Where the hardware already streams the rows (each expert's rows read in order, as B2 and C2 read them at
// Mixtral's 8 experts), software prefetches only cost (B2 there: 1.2 of a memcpy without, 0.9 with). So
// each gathered row whose index is known before its loop is classed by a table of recently gathered rows
// (classAndRecordRow: streamed when the row before it is recent), and the classes vote in a saturating
// count (countStreamed): while most recent rows were streamed, the loop runs a copy without prefetches.
// The decision is per launch and routing, not per row: prefetching each scattered row but not each
// streamed one lost more than it won (bench/cpu/RESULTS.md, "2026-12-04, evening"). The pass runs after
// moe-version-row-loops, so each version's loop classes only the rows it reads.
// Prefetches change no result; every address they compute lies inside its tensor.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/MapVector.h"
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
/// The count of streamed rows saturates at +-kStreamVotes: it follows a change of routing within as many rows.
constexpr int64_t kStreamVotes = 16;

/// How a gathered row was read before it: whether the row before it (by its linear number in the gathered
/// tensor) is among the recent rows read from that tensor, and whether the row itself is.
///   - Streamed: the hardware prefetchers then already stream this row, and a software prefetch only costs
///     (B2 at Mixtral's E = 8, whose rows come from 8 sequential streams: 1.2 of a memcpy without, 0.7 with).
///   - Recent: the row is read again (A3's token row, once for each of the token's slots) and is in cache; it
///     says nothing of how the next rows will come, and votes neither way. (As streamed, A3's token row
///     outvoted its slots' scattered rows, and they went unprefetched: 0.77 of a memcpy against 0.89.)
/// The recent rows are a direct-mapped table of kRecentRows linear row numbers (the slot is the number's low
/// bits), so a row stays recent until another row takes its slot: with K rows gathered per token, for about
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
    counter = {};
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
    // A loop whose every gathered row is classed counts the classes, and runs without prefetches while most
    // rows have been streamed.
    llvm::MapVector<Operation *, SmallVector<RowClass>> classes;
    DenseSet<Operation *> unclassed;
    for (auto [g, gather] : llvm::enumerate(gathers)) {
      auto [load, along] = gather;
      std::optional<RowClass> rowClass;
      OpBuilder b(along);
      ValueRange indices = load.getIndices().drop_back();
      // Indices defined around the loop (they dominate it) are the row itself; else the slice computes them.
      if (llvm::all_of(indices,
                       [&](Value index) { return index.getParentRegion()->isAncestor(along->getParentRegion()); }))
        rowClass = classAndRecordRow(b, load, SmallVector<Value>(indices));
      else if (slices[g])
        rowClass = classAndRecordRow(b, load, cloneRowIndices(b, load, *slices[g], slices[g]->rows.getInductionVar()));
      if (rowClass)
        classes[along].push_back(*rowClass);
      else
        unclassed.insert(along);
    }
    for (auto [g, gather] : llvm::enumerate(gathers)) {
      prefetchAlongRow(gather.first, gather.second);
      if (slices[g])
        prefetchNextRow(gather.first, gather.second, *slices[g]);
    }
    for (auto &[along, rows] : classes)
      if (!unclassed.contains(along))
        versionOnStreamed(cast<scf::ForOp>(along), countStreamed(cast<scf::ForOp>(along), rows));
  }

  /// Adds each row's vote (+1 streamed, -1 scattered, none when recently read) to the function's saturating
  /// count of streamed rows; returns whether the count is then at least 0 (most recent rows streamed).
  Value countStreamed(scf::ForOp along, ArrayRef<RowClass> rows) {
    OpBuilder b(along);
    Location loc = along.getLoc();
    Value slot = streamCounter(along->getParentOfType<func::FuncOp>());
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value count = memref::LoadOp::create(b, loc, slot, ValueRange{zero});
    Value up = arith::ConstantIndexOp::create(b, loc, 1), down = arith::ConstantIndexOp::create(b, loc, -1);
    Value high = arith::ConstantIndexOp::create(b, loc, kStreamVotes);
    Value low = arith::ConstantIndexOp::create(b, loc, -kStreamVotes);
    Value none = arith::ConstantIndexOp::create(b, loc, 0);
    for (const RowClass &row : rows) {
      Value vote = arith::SelectOp::create(b, loc, row.streamed, up, down);
      count = arith::AddIOp::create(b, loc, count, arith::SelectOp::create(b, loc, row.recent, none, vote));
      count = arith::MinSIOp::create(b, loc, arith::MaxSIOp::create(b, loc, count, low), high);
    }
    memref::StoreOp::create(b, loc, count, slot, ValueRange{zero});
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, count, zero);
  }

  /// The count of streamed rows: a stack slot at the function's entry, 0 at first.
  Value streamCounter(func::FuncOp func) {
    if (counter)
      return counter;
    OpBuilder b(&func.getBody().front(), func.getBody().front().begin());
    Location loc = func.getLoc();
    counter = memref::AllocaOp::create(b, loc, MemRefType::get({1}, b.getIndexType()));
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    memref::StoreOp::create(b, loc, zero, counter, ValueRange{zero});
    return counter;
  }

  /// `if (mostlyStreamed) { along without its prefetches } else { along }`.
  void versionOnStreamed(scf::ForOp along, Value mostlyStreamed) {
    OpBuilder b(along);
    Location loc = along.getLoc();
    auto branches = scf::IfOp::create(b, loc, along.getResultTypes(), mostlyStreamed, /*withElseRegion=*/true);
    along->replaceAllUsesWith(branches.getResults());
    b.setInsertionPointToStart(branches.thenBlock());
    auto plain = cast<scf::ForOp>(b.clone(*along));
    plain.walk([](memref::PrefetchOp prefetch) { prefetch.erase(); });
    if (!branches.thenBlock()->empty() && branches.thenBlock()->back().hasTrait<OpTrait::IsTerminator>())
      branches.thenBlock()->back().erase();
    b.setInsertionPointToEnd(branches.thenBlock());
    scf::YieldOp::create(b, loc, plain.getResults());
    if (!branches.elseBlock()->empty() && branches.elseBlock()->back().hasTrait<OpTrait::IsTerminator>())
      branches.elseBlock()->back().erase();
    along->moveBefore(branches.elseBlock(), branches.elseBlock()->end());
    b.setInsertionPointToEnd(branches.elseBlock());
    scf::YieldOp::create(b, loc, along.getResults());
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

  /// The class of `row`, which is then added to the table of recent rows.
  RowClass classAndRecordRow(OpBuilder &b, vector::LoadOp load, ArrayRef<Value> row) {
    Location loc = load.getLoc();
    Value number = rowNumber(b, load, row);
    RowClass rowClass = classOf(b, load, number);
    memref::StoreOp::create(b, loc, number, recentRows(load.getBase()), ValueRange{slotOf(b, loc, number)});
    return rowClass;
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

  /// 1. x[i, h + kPrefetchBytes], clamped to the row, before the load of x[i, h].
  void prefetchAlongRow(vector::LoadOp load, scf::ForOp along) {
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
  /// The function's count of streamed rows.
  Value counter;
};
} // namespace
} // namespace moec::moe
