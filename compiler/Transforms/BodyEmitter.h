//===- BodyEmitter.h - Cloning a domain body into loops (private to Transforms) ---===//
//
// What the lowerings of domain bodies share (BodyLowering.cpp and AccumulatedRows.cpp: rows;
// GroupRowLowering.cpp: GPU row groups; PointLowering.cpp, InterleavedPoints.cpp and WarpPointRows.cpp: point
// kernels): VaryingAnalysis, which values vary along the contiguous index, and BodyEmitter, which clones a
// body for one position along it (see BodyLowering.cpp's file comment).
//===----------------------------------------------------------------------===//
#ifndef MOEC_COMPILER_TRANSFORMS_BODYEMITTER_H
#define MOEC_COMPILER_TRANSFORMS_BODYEMITTER_H

#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/contracts/Schedule.h"

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

/// The values of a compute body that depend on its contiguous index.
class VaryingAnalysis {
public:
  explicit VaryingAnalysis(DomainOp domain) : VaryingAnalysis(domain.body().getArguments().back(), domain.body()) {}

  /// Values of `block` that depend on `seed` (the domain's last index, or a reduction's index).
  VaryingAnalysis(mlir::Value seed, mlir::Block &block);

  bool isVarying(mlir::Value v) const { return varying.contains(v); }
  const llvm::DenseSet<mlir::Value> &varyingValues() const { return varying; }
  mlir::Value innerIndex() const { return inner; }

  /// Why the body cannot be vectorized, or null.
  mlir::Operation *blocker() const { return firstBlocker; }

private:
  void visit(mlir::Block &block);

  /// The accumulator varies if the init does or if one step makes it vary: visit the body assuming it
  /// does not, and again assuming it does when the first visit yields a varying value.
  void visitFold(FoldOp fold);

  bool yieldsVarying(mlir::scf::YieldOp yield);

  void checkAllowed(mlir::Operation &op, bool anyVarying);

  mlir::Value inner;
  llvm::DenseSet<mlir::Value> varying;
  mlir::Operation *firstBlocker = nullptr;
};

/// A moe.sum whose body reads along its own index (x[row, j] for sum over j): it can run as vector
/// partial sums, split over lanes, and be combined at the end. Summation order changes; the spec allows
/// that for these dot products (f32 accumulation, tolerance of §5.6).
std::optional<VaryingAnalysis> contiguousReduction(SumOp sum);

/// How moe.sum reductions along their own index are split: vectors of `width` f32 partial sums, over
/// `lanes` threads whose id is `lane` (GPU warp), combined with shuffles. width 0: not at all.
struct ReductionSplit {
  int64_t width = 0;
  int64_t lanes = 1;
  mlir::Value lane;
};

/// Which of the body's top-level ops an emitter clones: all of them, only the row-invariant ones (the
/// row's prologue), or all but those (the loop along the row, after a prologue).
enum class Part { All, RowPrologue, AfterPrologue };

/// The byte alignment a vector access of `width` elements along the last dim of `memref` can promise, given
/// a base pointer aligned to `baseAlignment`: h is a multiple of the width, but a row starts only at a
/// multiple of its stride.
int64_t vectorAccessAlignment(mlir::Value memref, int64_t width, int64_t baseAlignment);

/// CPU: marks a vector store of a kernel output (written once, never read back) with kStreamableAttr, the
/// alignment it has where the output's base pointer is aligned to kMaxNontemporalAlignment, when that is
/// enough for a non-temporal store (moe-streaming-stores decides).
void markStreamable(mlir::vector::StoreOp store);

/// ceil(n / length): the runs of up to `length` consecutive indices of a dim of n (a row group's members, a
/// one-dim row of points).
mlir::Value emitRunCount(mlir::OpBuilder &b, mlir::Location loc, mlir::Value n, int64_t length);

/// A builder at the start of the function `b` inserts into (for stack arrays allocated once per call).
mlir::OpBuilder builderAtFunctionEntry(mlir::OpBuilder &b);

/// Element h of row accumulators (f32 on the CPU; a staged row's reduction type on Ascend), or the w
/// elements from h.
mlir::Value loadAccumulators(mlir::OpBuilder &b, mlir::Location loc, mlir::Value accumulators, mlir::Value h,
                             int64_t w);

void storeAccumulators(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v, mlir::Value accumulators, mlir::Value h,
                       int64_t w);

/// GPU: `v` (an index, or an integer or float of at most 64 bits) as a warp shuffle of `mode` with `arg` (an
/// i32) moves it: IDX from lane `arg`, UP from lane l - arg (lane l itself below arg). Wider than 32 bits, in
/// two words.
mlir::Value shuffleWarp(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v, mlir::Value arg,
                        mlir::gpu::ShuffleMode mode);

/// Clones a compute body for one (row, h) position, vectorized when width > 1.
class BodyEmitter {
public:
  BodyEmitter(mlir::OpBuilder &b, DomainOp domain, const VaryingAnalysis &analysis, int64_t width,
              int64_t unroll, int64_t maxAlignment, ReductionSplit split = {}, mlir::Value storeGuard = {},
              Part part = Part::All);

  /// Part::RowPrologue: emits the row-invariant ops for row indices `rowIndices` and returns the values
  /// they map to, for the emitters of the loop along the row to start from. Its loops are unrolled by
  /// flushUnrolls() once those emitters are done: unrolling replaces the values the mapping holds.
  const mlir::IRMapping &emitRowPrologue(mlir::ValueRange rowIndices);

  /// Starts from values a row prologue already computed.
  void startFrom(const BodyEmitter &prologue);

  /// GPU, a row's prologue (after its guard): for each fold marked moe.step_table (moe-step-tables) that runs
  /// along the row, steps over a list or a constant range, and does per-step work that does not vary along
  /// the row (a list entry, an index load and its checks, a gathered row's weight), that work runs here once
  /// per step, the warp's lanes taking the steps round robin, into shared-memory tables (a column per value
  /// the rest of the step uses). The fold's steps along the row then read the columns instead of redoing it
  /// for every vector.
  void emitStepTables();

  /// How the row's target wants lists and stores (see RowTarget). On the GPU the row's prologue runs with
  /// each warp converged on one row, so its integer-sum folds split over the lanes.
  void setRowTarget(RowTarget t);

  /// scf.if ops whose branch is known where this emitter runs (a staged row switched on a condition of
  /// the row): only that branch is emitted, inline.
  void decide(const llvm::DenseMap<mlir::Operation *, bool> &branches) { decided = branches; }

  /// A warp per point: every lane runs the point's scalar code alike.
  void splitFoldsOver(mlir::Value lane) { warpLane = lane; }

  /// GPU: the folds along the row over the list whose count is `count` (a short one: at most the unroll's
  /// entries) run `slots` steps, for the row's version whose count is at most that (see emitRow and
  /// emitShortListSteps).
  void runShortListIn(mlir::Value count, int64_t slots) { shortList = {count, slots}; }

  /// The emitted value of a value that does not vary along the row.
  mlir::Value value(mlir::Value orig) { return get(orig, false); }

  /// What the values that do not vary along the row map to so far.
  const mlir::IRMapping &scalarValues() const { return scalars; }

  /// The scalar `index` for each of the domain's indices in `indices` (the row's, then maybe h).
  void mapIndices(mlir::ValueRange indices);

  /// For an accumulated row (emitRow): the value `orig` is known to be `emitted` here, and ops whose results are all
  /// known are not emitted again.
  void premap(mlir::Value orig, mlir::Value emitted);

  /// The ops of `block` (a fold's step) that do not vary along the row and yield results: once per step,
  /// before the loop along the row.
  void emitRowInvariantOps(mlir::Block &block);

  /// One step of `reduction` (a moe.fold, or a moe.sum: acc + term) with accumulator `acc` (premapped
  /// values kept); returns the new accumulator.
  mlir::Value emitReductionStep(mlir::Operation *reduction, mlir::Value acc);

  /// Emits the body for domain point (rows..., h) and stores the element(s).
  void emitElement(mlir::ValueRange indices);

  /// A grouped row (emitGroupRow): emits the body for domain point (rows..., h) but not its write, and
  /// returns the value the write stores (a vector when vectorized).
  mlir::Value emitWrittenValue(mlir::ValueRange indices);

  /// Stores `value` (from emitWrittenValue) at `indices` of the output, as the write would.
  void storeWrittenValue(mlir::Value value, mlir::ValueRange indices) {
    emitStore(value, indices, domain.op()->getLoc());
  }

  /// A point kernel's body emitted in parts (emitPointRange): these ops are left out wherever they are.
  void skip(mlir::Operation *op) { skipped.insert(op); }
  /// Emits one op of the body (one skipped before, emitted later at the builder's point).
  void emitOpAt(mlir::Operation &op) { emitOp(op); }
  void unskip(mlir::Operation *op) { skipped.erase(op); }
  /// `orig` is known to be the scalar `emitted` here (a value restored from a pending point's slot).
  void mapScalar(mlir::Value orig, mlir::Value emitted) { scalars.map(orig, emitted); }
  /// Emits the ops of `block` (not its terminator), leaving out the skipped ones.
  void emitOpsOf(mlir::Block &block) { emitOps(block); }

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
  static llvm::SmallVector<mlir::Value> splitSums(SumOp sum, llvm::ArrayRef<BodyEmitter *> points,
                                                  llvm::ArrayRef<mlir::Value> actives = {});

  /// Unrolling replaces loops and their results, so it waits until nothing refers to them by mapping.
  void flushUnrolls();

private:
  bool vectorized(mlir::Value v) const { return width > 1 && analysis.isVarying(v); }

  void emitStore(mlir::Value value, mlir::ValueRange indices, mlir::Location loc);

  /// A fused row assignment's element(s) j (moe.row_store), under its guard; every lane stores its own.
  void emitRowStore(RowStoreOp store);

public:
  /// CPU: the output's vector stores, and moe.row_store's, are marked for moe-streaming-stores
  /// (markStreamable). A row's emitters get it from their RowTarget; a point range's are told.
  void markStreamableStores() { streamableStores = true; }

private:
  mlir::VectorType vectorOf(mlir::Type t) const { return mlir::VectorType::get({width}, t); }
  static mlir::VectorType vectorOf(mlir::Type t, int64_t n) { return mlir::VectorType::get({n}, t); }

  /// The emitted value of `orig`, broadcast to a vector when `wantVector` and it is uniform.
  mlir::Value get(mlir::Value orig, bool wantVector);

  /// h, h+1, ..., h+V-1 as a vector, for bodies that compute with h itself.
  mlir::Value innerLanes();

  /// Emits a block's ops (not its terminator).
  void emitOps(mlir::Block &block);

  void emitOp(mlir::Operation &op);

  /// Emits a moe.compute / moe.sum body and returns its yielded value.
  mlir::Value emitBlock(mlir::Block &block, bool wantVector);

  void emitSum(SumOp sum);

  /// The partial sums' width for a sum up to `bound`: one thread and a short constant bound get partial
  /// sums no wider than the bound (a power of two), so the vector loop is not skipped altogether.
  int64_t splitWidth(mlir::Value bound) const;

  /// One loop over [begin, end) step `step` along `sum`'s index: each of `points` adds its terms of width
  /// `termWidth` to its accumulator (from `inits`); returns the accumulators.
  static llvm::SmallVector<mlir::Value> splitPartials(SumOp sum, const VaryingAnalysis &along,
                                                      llvm::ArrayRef<BodyEmitter *> points,
                                                      llvm::ArrayRef<mlir::Value> actives, mlir::Value begin,
                                                      mlir::Value end, int64_t step, int64_t termWidth,
                                                      mlir::ValueRange inits, bool beginsInFirstStep = false);

  void emitSplitSum(SumOp sum, const VaryingAnalysis &along);

  /// The split sum of a staged point (Ascend point rows): the row along j a chunk at a time, each chunk's
  /// loads copied into UB buffers first. Chunks are whole multiples of the w partial sums (the plan makes
  /// them so), so every term lands in the same partial sum, in the same order, as in emitSplitSum; the last
  /// chunk is peeled, since the reduction of the partial sums comes before the tail's terms.
  template <typename Partials>
  void emitStagedSplitSum(SumOp sum, int64_t w, mlir::Value bound, mlir::Value mainEnd, Partials &&partials);

  void emitFold(FoldOp fold);

  /// A fold over the short list of runShortListIn in its `slots` steps: step j reads the list (and its step
  /// table) at min(j, count - 1), so that it reads only what a live step reads, and adds its term only where
  /// j < count. The loop unrolls fully, and moe-guard-loads makes each step's gather a predicated load: the
  /// steps' gathers issue together, and a row with fewer live steps runs fewer of them.
  void emitShortListSteps(FoldOp fold, bool vec);

  /// An integer-sum fold that every lane of a converged warp would compute alike: lane l folds steps l,
  /// l + 32, ... from 0, a shuffle tree adds the 32 partial sums (as two 32-bit halves), and the init is
  /// added last. 32 times fewer steps per lane, the same total.
  void emitLaneSplitFold(FoldOp fold);

  /// The CPU list: a stack array; a branch-free loop stores every index at the list's end and moves the
  /// end past the live ones (the end never passes the index, so it stays inside the array).
  void emitCompact(CompactOp compact);

  /// CPU, a moe.compact marked kCompressLanesAttr: the loop over [0, bound) tests `w` entries at a time, the
  /// predicate as vectors, and stores the live indices of each step compressed to the list's end (a
  /// register compress and one vector store; the end never passes the step's first index, so the store
  /// stays inside the array). Returns the loop over the whole steps (its upper bound is where the entries
  /// left for one at a time begin, its result the count so far), or null where the predicate does not
  /// vectorize along its index.
  mlir::scf::ForOp emitVectorCompact(CompactOp compact, mlir::Value list, mlir::Value bound, int64_t w);

  /// A fold's per-step values, computed in the row's prologue (emitStepTables): the step's ops that do not
  /// vary along the row, and a shared-memory column (this warp's from `base`) per value the rest uses.
  struct StepTable {
    llvm::DenseSet<mlir::Operation *> invariant;
    llvm::SmallVector<std::pair<mlir::Value, mlir::Value>> columns; // (value in the step, its column)
    llvm::SmallVector<mlir::Value> allTrue; // per column: i1 ones, whether it is true at every step
    mlir::Value base;
  };

  /// Where this warp's part of a workgroup buffer of `length` entries per warp starts.
  mlir::Value warpBase(mlir::Location loc, int64_t length);

  /// Whether `op` (a top-level op of a fold's step) neither varies along the row nor reads the accumulator.
  bool stepInvariant(mlir::Operation &op) const;

  static constexpr int64_t kStepTableBytes = 32768; // per domain, in the block's shared memory
  int64_t stepTableBytes = 0;                        // the tables' so far

  /// See emitStepTables.
  void emitStepTable(FoldOp fold);

  /// A step table's loop: the per-step work `taken` inside the branches of `ifOp`, under its condition; the
  /// columns among its values come out of the branch taken (zero from the other).
  void emitBranchWork(mlir::scf::IfOp ifOp, const llvm::DenseSet<mlir::Operation *> &taken,
                      const llvm::SetVector<mlir::Value> &columns);

  /// In a fold step with a step table: its invariant ops are left out, and the values the rest uses are
  /// read from the table's columns at step `j`.
  void readStepTable(const StepTable &table, mlir::Value j, mlir::Location loc);

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
  std::pair<mlir::Value, mlir::Value> ballotOfSteps(CompactOp compact, mlir::Value k, mlir::Value bound);

  /// list[i] of a warp's shared-memory list.
  void emitSharedListLoad(mlir::memref::LoadOp load);

  mlir::OpBuilder atFunctionEntry() { return builderAtFunctionEntry(b); }

  /// A shared-memory buffer of the kernel this code is in: `size` elements of `element`, 16-byte aligned. LLVM
  /// reads consecutive entries of a buffer as one vector where it assumes that alignment; declared at 4 bytes,
  /// a buffer after one of an odd number of words would then be read at an address the vector faults on.
  mlir::Value sharedBuffer(int64_t size, mlir::Type element, mlir::Location loc);

  /// Fully unrolls short reductions (K <= unroll), else unrolls by the schedule's factor; either only
  /// while the unrolled body stays under kMaxUnrolledOps. Inner loops are unrolled first, so the budget
  /// bounds the code of nested reductions (sum(k < 2) sum(j < 2) ...) linearly, not 2^depth.
  /// The bound is read from the loop (0 to bound step 1), not kept: unrolling an earlier loop (a
  /// moe.compact's, whose result is this one's bound) replaces the value.
  void unrollLoop(mlir::scf::ForOp loop);

  void emitIf(mlir::scf::IfOp ifOp);

  /// A load along h becomes a vector.load; an elementwise arith op gets vector operands and results.
  void emitVectorOp(mlir::Operation &op);

  /// The byte alignment a vector access along the last dim of `memref` can promise, given a base pointer
  /// aligned to `maxAlignment`: h is a multiple of V, but a row starts only at a multiple of its stride.
  int64_t accessAlignment(mlir::Value memref) const { return vectorAccessAlignment(memref, width, maxAlignment); }

  void map(mlir::Value orig, mlir::Value emitted);

  mlir::OpBuilder &b;
  DomainOp domain;
  const VaryingAnalysis &analysis;
  int64_t width, unroll, maxAlignment;
  ReductionSplit split;
  mlir::Value storeGuard;
  Part part;
  bool onGpu = false, streamableStores = false; // see RowTarget
  StagedRow *staged = nullptr;
  bool skipMapped = false; // set by premap()
  mlir::Value warpLane; // set where the warp's 32 lanes run this code converged and alike: folds split over them
  mlir::IRMapping scalars, vectors;
  // a moe.compact list -> (buffer, this warp's base)
  llvm::DenseMap<mlir::Value, std::pair<mlir::Value, mlir::Value>> sharedLists;
  struct LaneList {
    mlir::Value entry, live, place; // the lane's entry (index), whether it is live, its place in the list
  };
  llvm::DenseMap<mlir::Value, LaneList> laneLists; // a list built by emitLaneCompact
  // while a lane writes a step table's row for its entry: list -> entry
  llvm::DenseMap<mlir::Value, mlir::Value> laneEntries;
  llvm::DenseMap<mlir::Operation *, StepTable> stepTables;
  llvm::DenseMap<mlir::Operation *, bool> decided; // see decide()
  llvm::DenseSet<mlir::Operation *> skipped;       // see skip()
  mlir::Value laneIndices; // h, h+1, ..., h+V-1
  llvm::SmallVector<mlir::scf::ForOp> pendingUnrolls;
  struct {
    mlir::Value count; // the list's count in the domain's body
    int64_t slots = 0;
  } shortList; // see runShortListIn
};

/// Splits a flattened row index into the index of each leading dim (row-major).
llvm::SmallVector<mlir::Value> unflattenRow(mlir::OpBuilder &b, mlir::Location loc, mlir::Value row,
                                            mlir::ValueRange rowBounds);


} // namespace moec::moe

#endif // MOEC_COMPILER_TRANSFORMS_BODYEMITTER_H
