//===- BodyLowering.h - Domain bodies to loops, shared by targets -*- C++ -*-===//
//
// moe.compute and moe.scatter both run a body over an index domain: rows (all dims but the last,
// flattened) and a contiguous last dim. The loop lowerings (CPU: moe-lower-to-loops, GPU:
// moe-lower-to-gpu) differ only in where a row and a lane come from; this file emits the rest.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/compiler/Dialect/MoeDialect.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

#include <optional>

namespace moec::moe {

/// A moe.compute or moe.scatter, seen through what the lowerings need.
class DomainOp {
public:
  /// Null unless `op` is a moe.compute or moe.scatter.
  static DomainOp dyn(mlir::Operation *op);

  mlir::Operation *op() const { return operation; }
  explicit operator bool() const { return operation != nullptr; }
  mlir::Value output() const { return operation->getOperand(0); }
  mlir::OperandRange bounds() const { return operation->getOperands().drop_front(); }
  mlir::Block &body() const { return operation->getRegion(0).front(); }
  ScheduleAttr schedule() const;
  void setSchedule(ScheduleAttr schedule);
  bool isScatter() const { return mlir::isa<ScatterOp>(operation); }

private:
  mlir::Operation *operation = nullptr;
};

/// Every moe.compute / moe.scatter under `root`, in order.
llvm::SmallVector<DomainOp> collectDomainOps(mlir::Operation *root);

/// Fails, with an error on the op, unless every op has a #moe.schedule.
mlir::LogicalResult requireSchedules(llvm::ArrayRef<DomainOp> ops);

/// Whether the body can run `vector` contiguous elements at a time: values that depend on the last
/// domain index may only feed elementwise arith/math ops, loads and stores only through that index itself
/// as their last subscript (a contiguous access). Conditions, guards and reduction bounds must not
/// depend on it.
bool isVectorizable(DomainOp op);

/// Set by moe-hoist-row-invariants on the top-level ops of a domain body that do not depend on the
/// contiguous index (kRowInvariantAttr), and on a moe.write whose guard does not (kRowGuardAttr). emitRow
/// computes the first once per row, before the loop along the row, and skips the whole row when the second
/// is false.
constexpr llvm::StringLiteral kRowInvariantAttr = MoeDialect::RowInvariantAttrHelper::getNameStr();
constexpr llvm::StringLiteral kRowGuardAttr = MoeDialect::RowGuardAttrHelper::getNameStr();

/// Set by moe-compact-predicated-points on a point domain whose dead points only write a constant: the
/// moe.compact of a row's live points (kLiveListAttr), the prefix count that is a live point's position in
/// that list (kLiveRankAttr), and, on the domain, the constant (kDeadValueAttr). See emitPointRange.
constexpr llvm::StringLiteral kLiveListAttr = MoeDialect::LiveListAttrHelper::getNameStr();
constexpr llvm::StringLiteral kLiveRankAttr = MoeDialect::LiveRankAttrHelper::getNameStr();
constexpr llvm::StringLiteral kDeadValueAttr = MoeDialect::DeadValueAttrHelper::getNameStr();

/// Set by moe-lower-to-gpu on a loop along a row from a lane's offset, below its step, to a constant end that is a
/// whole number of steps: every lane runs it the same number of times. moe-unroll-row-loops unrolls it.
constexpr llvm::StringLiteral kLaneLoopAttr = MoeDialect::LaneLoopAttrHelper::getNameStr();
/// Set by moe-lower-to-gpu on a split sum's loop along the row (a dot product a warp computes along a whole
/// row; its results are the lanes' partial sums) that every lane runs the same constant number of times from
/// its offset below the step: moe-unroll-lane-sums unrolls it.
constexpr llvm::StringLiteral kLaneSumAttr = MoeDialect::LaneSumAttrHelper::getNameStr();

/// Such a loop runs from 0 instead, the lane's offset added in its body: its count is then a constant, and no
/// lane runs a remainder loop that the others skip when it unrolls.
void startLaneLoopAtZero(mlir::OpBuilder &b, mlir::scf::ForOp loop);

/// Set by moe-group-rows (GPU) on a scatter whose rows that differ only in their last row index (the
/// members) write values that depend on that index at most through a few row-invariant values, the keys
/// (kGroupKeyAttr on the ops that compute them): moe-lower-to-gpu runs a block per group of up to
/// kRowGroupMembers consecutive members (emitGroupRow), and the launch covers groups.
constexpr llvm::StringLiteral kRowGroupAttr = MoeDialect::RowGroupAttrHelper::getNameStr();
constexpr llvm::StringLiteral kGroupKeyAttr = MoeDialect::GroupKeyAttrHelper::getNameStr();

/// Set by moe-group-points (GPU) on a point kernel whose dot products read a row that does not depend on
/// the point's last index (A3: token t's gradient row, for each of its experts e): moe-lower-to-gpu runs a
/// row of points per warp (emitWarpPointRow), and the launch covers rows.
constexpr llvm::StringLiteral kPointRowsAttr = MoeDialect::PointRowsAttrHelper::getNameStr();

/// Set by moe-lane-point-access (GPU) on a prefix count of a row of points (its bound the point's last
/// index, each step adding a constant or nothing: countingFoldIncrement): emitWarpPointRow, which runs 32
/// points at once, a lane each, counts for the 32 with a ballot, continued from the 32 before.
constexpr llvm::StringLiteral kLaneScanAttr = MoeDialect::LaneScanAttrHelper::getNameStr();

/// Whether each step of `fold` is `acc + x` or `p ? acc + x : acc` (either way round) on integers (index,
/// i32, i64), with nothing else reading the accumulator: a sum, which any split of the steps computes
/// exactly (integer addition is associative, also when it wraps). A prefix count is one.
bool isIntegerSumFold(FoldOp fold);

/// For an integer-sum fold whose x is a constant c (a count: each step adds c or nothing), c.
std::optional<int64_t> countingFoldIncrement(FoldOp fold);

/// The top-level ops of the body (in order) that can be computed once per row: nothing in them, nested
/// regions included, depends on the contiguous index, and their operands come from outside the body or
/// from such ops.
llvm::SmallVector<mlir::Operation *> rowInvariantOps(DomainOp op);

/// Whether `op` is a scatter whose moe.write guard depends on the row only (`invariant`: rowInvariantOps).
bool hasRowInvariantGuard(DomainOp op, llvm::ArrayRef<mlir::Operation *> invariant);

/// The values of the body that depend on the contiguous (last) index, the block argument included.
llvm::DenseSet<mlir::Value> valuesAlongRow(DomainOp op);

/// The tensor a memref views (a moe.view of the kernel argument #moe.arg<tensor, "grad_expanded_x"> gives
/// "grad_expanded_x"), or "" for a kernel-local one (a compacted list).
std::string viewedTensorName(mlir::Value memref);

/// CPU: dot products along a row run as this many f32 partial sums (four AVX2 registers, four independent
/// chains of additions). The Ascend lowering keeps the same partial sums, so its results match bit for bit.
constexpr int64_t kCpuReductionWidth = 32;

/// When `next` adds a term to the f32 `acc`, the op of it that reads `acc`, else null: `acc + x` (either
/// way round) or fma(x, w, acc), or either rounded to f16 or bf16 and widened back, as an accumulation in
/// T carried as f32 does (moe-widen-rounded-folds). Where `acc` is itself the f16 or bf16 accumulator
/// (the GPU keeps it in T), `T(f32(acc) + x)` or `T(fma(x, w, f32(acc)))`, and the widening reads it.
mlir::Operation *termAdditionReader(mlir::Value next, mlir::Value acc);

/// A fold step `p ? acc : f(acc)` or a sum term `p ? 0.0 : f`: the scf.if, and whether f is its then
/// branch (see moe-compact-predicated-folds, which runs such a reduction over its live steps only).
struct PredicatedStep {
  mlir::scf::IfOp branch;
  bool liveIsThen = false;
};

/// The predicated step of a moe.fold or moe.sum, if its step is one.
std::optional<PredicatedStep> predicatedStep(mlir::Operation *reduction);

/// Whether the domain's points are its units of work rather than its rows: it does not vectorize along its
/// last dim, but a moe.sum in it reads along its own index (a dot product over H per point). The GPU runs
/// a point per warp (GpuMapping::WarpPerPoint); the CPU splits the points, not the rows, over threads.
bool runsPerPoint(DomainOp op);

/// CPU point kernels: emits the points [begin, end) of the domain (all dims flattened), in order, their
/// dot products as `reductionWidth`-wide partial sums. In a domain marked kInterleavedPointsAttr
/// (moe-interleave-reductions) the dot products of that many live points run together in one loop along the
/// row (see splitSums in BodyEmitter.h); each point's result is the same either way. The vector stores of
/// its moe.row_stores are marked kStreamableAttr (moe-streaming-stores).
/// A domain marked by moe-compact-predicated-points visits, in each row, only the points its list holds,
/// after storing the dead value to the row's elements in the range.
void emitPointRange(mlir::OpBuilder &b, DomainOp op, mlir::Value begin, mlir::Value end, int64_t reductionWidth);

/// CPU point kernels interleave only dot products over rows of at least a page: shorter ones gain nothing
/// from waiting in slots, which costs (H = 64: 1.7x the time of the plain point loop, A3 at DeepSeek-V3's E).
constexpr int64_t kInterleavedRowBytes = 4096;
/// moe-interleave-reductions: a CPU point domain whose live points' dot products run together, this many
/// at a time (the attribute's value; see MoeDialect.td).
constexpr llvm::StringLiteral kInterleavedPointsAttr = MoeDialect::InterleavedPointsAttrHelper::getNameStr();
/// moe-accumulate-rows: the CPU row's reduction whose steps run over the whole row (see MoeDialect.td).
constexpr llvm::StringLiteral kAccumulatedRowAttr = MoeDialect::AccumulatedRowAttrHelper::getNameStr();
/// moe-compress-lists: a moe.compact that tests the attribute's count of entries at a time (CPU).
constexpr llvm::StringLiteral kCompressLanesAttr = MoeDialect::CompressLanesAttrHelper::getNameStr();
/// Whether a moe.compact's predicate vectorizes along its index: what moe-compress-lists needs.
bool compactVectorizes(CompactOp compact);

/// The widest non-temporal vector store (AVX-512: a whole 64-byte line; AVX2 splits it in two).
constexpr int64_t kMaxNontemporalAlignment = 64;
/// CPU: on a vector store of a kernel output, the alignment it has where the output's base pointer is
/// aligned (moe-lower-to-loops marks it, moe-streaming-stores reads it; see MoeDialect.td).
constexpr llvm::StringLiteral kStreamableAttr = MoeDialect::StreamableAttrHelper::getNameStr();

/// How a GPU kernel maps a domain to threads.
///   Rows:         a row per (block, thread.y); threads.x split the last dim, in vectors.
///   WarpPerPoint: a domain point per warp (block, thread.y); the 32 lanes split the point's reduction
///                 along a contiguous dim (a dot product over H) and combine it with shuffles.
///   WarpPerPointRow: a row of points per warp (a domain marked kPointRowsAttr), their dot products
///                 split over the lanes as WarpPerPoint's, several at a time.
/// WarpPerPoint is chosen when the domain does not vectorize along its last dim but a moe.sum in it
/// reads along its own index.
enum class GpuMapping { Rows, WarpPerPoint, WarpPerPointRow };
GpuMapping gpuMapping(DomainOp op);

/// The length (0: not static) and widest element (bytes) of the first moe.sum that reads along its own
/// index; {0, 0} when there is none.
struct ReductionShape {
  int64_t length = 0;
  int64_t elemBytes = 0;
};
ReductionShape reductionShape(DomainOp op);

/// The number of rows of the domain (all dims but the last, flattened; 1 for rank 1) and of points (all
/// dims), at the builder's insertion point.
mlir::Value emitRowCount(mlir::OpBuilder &b, DomainOp op);
mlir::Value emitPointCount(mlir::OpBuilder &b, DomainOp op);

/// Emits, at the builder's insertion point, the points of flattened row `row` whose last index h is
/// laneStart*V, laneStart*V + laneStride*V, ... as vectors of V = schedule.vector, then the remainder
/// (h not covered because V does not divide the dim) one element at a time with the same lane split.
/// CPU: laneStart 0, laneStride 1. GPU: laneStart thread_id.x, laneStride block_dim.x.
/// `vectorAlignment` is the alignment of tensor base pointers; each vector access promises what that
/// implies for its rows (the largest power of two dividing the row stride, at most V elements).
/// A moe.sum that reads along its own index runs as `reductionWidth`-wide vector partial sums (0: plain).
/// Ascend (moe-lower-to-ascend): the row runs a chunk at a time, its loads along the row read UB buffers
/// that DataCopy filled before each loop along the chunk, and its values go to a UB buffer that is copied
/// out after. emitRow drives it; the implementation owns the buffers. Values that do not vary along the
/// row are passed as `scalars`, the mapping from the body's values to what the row emitted so far.
class StagedRow {
public:
  virtual ~StagedRow() = default;
  /// Elements of the row per chunk, and chunks per row.
  virtual int64_t chunk() const = 0;
  virtual int64_t chunks() const = 0;
  /// The chunk of elements [offset, offset + length) of the row starts.
  virtual void beginChunk(mlir::Value offset, mlir::Value length) = 0;
  /// Before a loop along the chunk that runs `block` (the body, but `skip`; or the step `step` of a
  /// reduction, when `step` is set): copies in the rows its loads read along the row, under the
  /// conditions they are read under.
  virtual void copyIn(mlir::OpBuilder &b, mlir::Block &block, mlir::Operation *skip, const mlir::IRMapping &scalars,
                      mlir::Value step) = 0;
  /// The value of `load` at element `h` of the row (`width` of them from h) from its UB buffer, or null
  /// when it was not staged: a scalar read of global memory, which it may mark. `h` is null for a load
  /// that does not vary along the row.
  virtual mlir::Value load(mlir::OpBuilder &b, mlir::memref::LoadOp load, mlir::Value h, int64_t width) = 0;
  /// The chunk's accumulators, of the reduction's `element` type (its steps run over the whole chunk, see
  /// emitRow).
  virtual mlir::Value accumulators(mlir::Type element) = 0;
  /// Stores the row's value(s) at element h into the output buffer.
  virtual void store(mlir::OpBuilder &b, mlir::Value value, mlir::Value h, int64_t width) = 0;
  /// After the chunk's loops: copies the output buffer to the output's row (a scatter's under its guard).
  virtual void copyOut(mlir::OpBuilder &b, const mlir::IRMapping &scalars) = 0;
  /// A point row's fused row store (moe.row_store, element j of another output's row as the dot product
  /// adds term j): stores `value` (`width` elements from j) into that output's UB buffer.
  virtual void storeRow(mlir::OpBuilder &b, RowStoreOp store, mlir::Value value, mlir::Value j, int64_t width) = 0;
  /// After a chunk of a point row's dot product: copies the buffer of each of `stores` (the fused row
  /// stores in that dot product's body) to its row of the chunk, under the store's guard.
  virtual void copyOutRows(mlir::OpBuilder &b, llvm::ArrayRef<RowStoreOp> stores, const mlir::IRMapping &scalars) = 0;
};

/// A domain whose rows are copies of one streamed input row (CopiedRow.cpp): what it writes (or yields)
/// is a load along the row of a tensor of the output's element type, the only load of that tensor along
/// the row, or scf.if results that yield it from their then branches, where the write's guard implies the
/// condition or the else branch yields a constant. Ascend stages the output in that input's UB buffer.
struct CopiedRow {
  mlir::memref::LoadOp load; // null: the rows are not copies
  bool overwrites = false;   // some rows write a constant instead (over the staged input row)
};
CopiedRow copiedRow(DomainOp op);

/// `rowTarget` says where the row runs.
struct RowTarget {
  bool onGpu = false;            // whole warps of a gpu.func: moe.compact lists go to shared memory, and a
                                 // loop along the row of a constant count per lane is marked kLaneLoopAttr
  bool streamableStores = false; // CPU: the output's vector stores are marked kStreamableAttr (markStreamable)
  StagedRow *staged = nullptr; // Ascend: the row runs in chunks through UB buffers
};

/// moe-step-tables (GPU): a fold of a domain's body whose steps' row-invariant work emitRow does once per
/// step in the row's prologue, into shared-memory tables (BodyEmitter::emitStepTables; see MoeDialect.td).
constexpr llvm::StringLiteral kStepTableAttr = MoeDialect::StepTableAttrHelper::getNameStr();
/// The most steps `fold` runs: a constant bound, or the length of the list whose count bounds it; 0 where
/// neither is known.
int64_t mostFoldSteps(FoldOp fold);
/// A step table has a row per step, at most this many.
constexpr int64_t kMaxStepTableSteps = 4096;

void emitRow(mlir::OpBuilder &b, DomainOp op, mlir::Value row, mlir::Value laneStart, int64_t laneStride,
             int64_t vectorAlignment, int64_t reductionWidth, RowTarget rowTarget);

/// GPU, a scatter marked kRowGroupAttr: emits group `group` (the domain's dims but the last two, then the
/// runs of kRowGroupMembers members of the second-last dim, flattened) on `warps` warps, this one `warp`,
/// whose lane is `lane`; the warps split the row. Each lane computes one member's row-invariant values
/// (every warp computes them); along the row a warp computes the written value once per vector and stores
/// it to each live member's row, broadcast from its lane by shuffles. With keys, it computes the value
/// again for a member whose keys differ from the member before's.
void emitGroupRow(mlir::OpBuilder &b, DomainOp op, mlir::Value group, mlir::Value lane, mlir::Value warp,
                  int64_t warps, int64_t vectorAlignment);

/// GPU: the members [first, end) that a warp takes of a domain dim of `members`, where the launch gave it the
/// run [start, start + length), moved to begin where a run of equal keys begins (A3's drop-and-pad slots, a
/// token's slots consecutive: fixed runs split most tokens over two warps, each reading the token's row).
/// The warp takes the key runs that start in the first `window` members of its run (min(length, 15)), else
/// starts after them, and ends where the next run starts, found the same way: the warps' members still
/// partition the dim, each run once, and a key run splits only where it is longer than the run. Lane l
/// probes member start - 1 + l's keys (`outer`: the domain's indices before the dim), then a ballot of the
/// lanes whose keys differ from the lane's before. Nothing where a key is not an integer computed by loads
/// of read-only tensors and arithmetic at the top of the body (a probe must have no effect).
struct KeyAlignedRun {
  mlir::Value first, end;
};
std::optional<KeyAlignedRun> emitKeyAlignedRun(mlir::OpBuilder &b, DomainOp op, mlir::ValueRange outer,
                                               mlir::Value start, mlir::Value members, int64_t length, mlir::Value lane,
                                               llvm::ArrayRef<mlir::Value> keys, int64_t vectorAlignment);
/// emitKeyAlignedRun's run from keys the lanes have computed already: `laneKeys` (integers) are those of the
/// lane's `member`, start - 1 + lane, where `probed` (the member exists, and the lane is one of the
/// 1 + 2 min(length, 15) that probe).
KeyAlignedRun emitKeyRunBounds(mlir::OpBuilder &b, mlir::Location loc, mlir::Value start, mlir::Value members,
                               int64_t length, mlir::Value member, mlir::Value probed, mlir::ValueRange laneKeys);

/// The number of groups of a scatter marked kRowGroupAttr, at the builder's insertion point.
mlir::Value emitGroupCount(mlir::OpBuilder &b, DomainOp op);

/// Ascend point rows: emits domain point `point` (all dims flattened) with its moe.sum along a contiguous
/// dim split into `reductionWidth` partial sums, as the CPU lowering does, run a chunk at a time through
/// `staged`; the point's value goes to the output buffer and is copied out.
void emitStagedPoint(mlir::OpBuilder &b, DomainOp op, mlir::Value point, int64_t reductionWidth, StagedRow &staged);

/// How many times `op` runs per row: the product of the constant bounds of the sums, folds and compacts
/// around it up to `stop`, but for `along` (the reduction a row streams; may be null). A bound known only
/// at run time (a compacted list's length) counts once. A predicated reduction (predicatedStep) counts at
/// most `liveSteps` steps when that is above 0.
int64_t stepsPerRow(mlir::Operation *op, mlir::Operation *stop, mlir::Operation *along, int64_t liveSteps = 0);

/// The live steps that streamedBytesPerRow assumes of a predicated reduction over more steps: routing
/// reductions are sparse (a token's top-K experts of E, K <= 8 in the production models of spec 8.1), and
/// how many are live is known only from the data.
constexpr int64_t kAssumedLiveSteps = 8;

/// The bytes one row of `op` moves along its contiguous dim of `inner` elements: each load indexed by the
/// row's last index, times the steps it runs per row (at most kAssumedLiveSteps of a predicated
/// reduction's, before moe-compact-predicated-folds makes it a list of those), and the output. Values that
/// do not run along the row (indices, probs) are left out: a few bytes a row.
int64_t streamedBytesPerRow(DomainOp op, int64_t inner);

/// The first moe.sum of `op` that reads along its own index (a dot product over H), or null.
SumOp contiguousReductionOf(DomainOp op);

/// GpuMapping::WarpPerPoint: emits domain point `point` (all dims flattened) on a warp whose lane id is
/// `lane` of `lanes`: reductions along a contiguous dim are split over the lanes in vectors of
/// schedule.vector elements; lane 0 stores. The loop along the row is marked kLaneSumAttr where every lane
/// runs it equally often.
void emitWarpPoint(mlir::OpBuilder &b, DomainOp op, mlir::Value point, mlir::Value lane, int64_t lanes,
                   int64_t vectorAlignment);

/// Whether a point kernel's body has the shape whose live points' dot products can wait and run together
/// (its dot product alone, or first in the then-block of an scf.if that says the point is live; only
/// arithmetic after it). CPU point ranges interleave only rows of at least `minRowBytes`.
bool pointsCanInterleave(DomainOp op, int64_t minRowBytes);

/// GPU, a point kernel marked kPointRowsAttr: a row per warp (`lane` its lane id; the same lane split as
/// emitWarpPoint's), or for a one-dim domain a run of kPointRunLength points. The warp runs its points in
/// order; a live point's dot product waits until the mark's batch of them have (or the row ends, or a live
/// point's keys, the ops marked kGroupKeyAttr, differ), and they run together, each loaded value their
/// terms share (the row they all read) loaded once; a batch of at most 2 points runs a loop with 2 slots
/// (a top-2 token's batch would otherwise pay for 8). Where the row's points fit one warp (a run, or a
/// constant row of at most 32), waiting points keep their values in their lanes, not in slots. Each
/// point's sum adds the same terms in the same order as a warp per point: results are bit-identical.
void emitWarpPointRow(mlir::OpBuilder &b, DomainOp op, mlir::Value row, mlir::Value lane, int64_t vectorAlignment);

/// The number of warps of a point kernel marked kPointRowsAttr: its rows, or for a one-dim domain its runs
/// of kPointRunLength points.
mlir::Value emitPointRowCount(mlir::OpBuilder &b, DomainOp op);

} // namespace moec::moe
