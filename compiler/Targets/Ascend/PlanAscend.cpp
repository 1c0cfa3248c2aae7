//===- PlanAscend.cpp - Each domain's Ascend tiling, read off the IR ------===//
//
// What one vector core holds in its Unified Buffer to run a row of a domain follows from the body:
//   * a load whose index runs along the row streams that tensor through an `in.` buffer, one row (or
//     chunk) at a time; when its other indices are the domain's own row indices, consecutive rows are
//     consecutive in GM and a pass of several rows is one DataCopy, else every gathered row is one, as
//     many per row as the constant bounds of the folds around the load;
//   * the output goes out through an `out.` buffer (a scatter's rows one DataCopy each), and a point
//     row's fused row stores through a `row.` buffer each;
//   * a reduction along the row keeps an f32 accumulator, and a T other than f32 needs an f32 cast buffer;
//   * loads that do not run along the row (indices, probs) are copied once per pass into `idx.` buffers.
// The chunk is then the largest multiple of the granule (32 B / the narrowest element) that fits the UB
// and the copy limit, balanced over the chunks the row needs. An input kept across the rows that share
// its GM row holds the whole row when the row needs several chunks and the others still fit as many.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Dialect/MoeDialect.h"
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"
#include "moec/contracts/ascend/Tiling.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"

#include <limits>
#include <map>

#define DEBUG_TYPE "moe-plan-ascend"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEPLANASCEND
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

int64_t elementBytes(Value memref) {
  return std::max<int64_t>(1, cast<MemRefType>(memref.getType()).getElementTypeBitWidth() / 8);
}

/// Whether `indices` (all but the last) are the domain's own row indices, in order.
bool indexesOwnRow(ValueRange indices, Block &body) {
  if (indices.size() != body.getNumArguments())
    return false;
  for (auto [index, arg] : llvm::zip(indices.drop_back(), body.getArguments().drop_back()))
    if (index != arg)
      return false;
  return true;
}

/// Whether `load` runs under an scf.if that decides for the whole row: one not inside a sum, fold or
/// compact of the row (a per-gather test, as B2's dropped rows) other than `along`.
bool underRowCondition(Operation *load, Operation *stop, Operation *along) {
  bool condition = false;
  for (Operation *p = load->getParentOp(); p && p != stop; p = p->getParentOp()) {
    if (isa<scf::IfOp>(p))
      condition = true;
    else if (isa<SumOp, FoldOp, CompactOp>(p) && p != along)
      condition = false; // a condition inside a loop of the row is per step, not per row
  }
  return condition;
}

struct Stream {
  int64_t elementBytes = 0;
  bool own = false; // rows consecutive in GM
  int64_t gathers = 0;
  int64_t reuseDims = -1; // trailing row dims its rows do not depend on (-1: no load seen yet)
};

/// How many of the domain's innermost row indices (`rowArgs`, outermost first) the row a load reads
/// (its indices but the last) does not depend on: consecutive rows then read the same GM row, which the
/// UB keeps instead of copying it again (A3 reads token t's gradient once for its K slots).
int64_t trailingIgnoredRowDims(memref::LoadOp load, ArrayRef<BlockArgument> rowArgs) {
  SetVector<Operation *> slice;
  llvm::DenseSet<Value> reached;
  for (Value index : load.getIndices().drop_back()) {
    reached.insert(index);
    if (failed(getBackwardSlice(index, &slice)))
      return 0; // not known: assume the row depends on every index
  }
  for (Operation *op : slice)
    for (Value operand : op->getOperands())
      reached.insert(operand);
  int64_t ignored = 0;
  for (BlockArgument arg : llvm::reverse(rowArgs)) {
    if (reached.contains(arg))
      break;
    ++ignored;
  }
  return ignored == int64_t(rowArgs.size()) ? 0 : ignored; // a row read by every row is a row-invariant
}

struct PlanAscendPass : impl::MoePlanAscendBase<PlanAscendPass> {
  using Base::Base;

  void runOnOperation() override {
    if (ubAlignment <= 0 || (ubAlignment & (ubAlignment - 1)) || ubBytes < ubAlignment || maxCopyBytes < ubAlignment) {
      getOperation()->emitError("moe-plan-ascend: bad chip numbers (ub-bytes ")
          << int64_t(ubBytes) << ", ub-alignment " << int64_t(ubAlignment) << ", max-copy-bytes "
          << int64_t(maxCopyBytes) << ")";
      return signalPassFailure();
    }
    for (DomainOp domain : collectDomainOps(getOperation()))
      if (failed(plan(domain)))
        return signalPassFailure();
  }

  /// The row a domain streams: its contiguous dim, or, for a domain that reduces along a contiguous dim
  /// instead, that reduction (every domain point is then a row).
  struct RowShape {
    bool pointRows = false;
    int64_t length = 0;
    llvm::DenseSet<Value> along; // the values that vary along the row
    Operation *alongSum = nullptr; // the reduction, for point rows
  };

  FailureOr<RowShape> rowShape(DomainOp domain) {
    RowShape shape;
    ReductionShape reduction = reductionShape(domain);
    shape.pointRows = !isVectorizable(domain) && reduction.length > 0;
    if (!shape.pointRows) {
      APInt value;
      if (!matchPattern(domain.bounds().back(), m_ConstantInt(&value)))
        return domain.op()->emitOpError("moe-plan-ascend: the contiguous dim must be static on Ascend");
      shape.length = value.getSExtValue();
      shape.along = valuesAlongRow(domain);
      return shape;
    }
    shape.length = reduction.length;
    // The first sum whose own index reaches a load: everything that index reaches runs along the row.
    domain.op()->walk([&](SumOp sum) {
      if (shape.alongSum)
        return WalkResult::interrupt();
      SetVector<Operation *> slice;
      getForwardSlice(sum.getBody().front().getArgument(0), &slice);
      if (llvm::any_of(slice, [](Operation *s) { return isa<memref::LoadOp>(s); })) {
        shape.alongSum = sum;
        for (Operation *s : slice)
          for (Value r : s->getResults())
            shape.along.insert(r);
      }
      return WalkResult::advance();
    });
    return shape;
  }

  /// What a row reads from GM: the tensors it streams along the row and its row-invariant values.
  struct RowReads {
    std::map<std::string, Stream> streams, rowValues;
    bool castsToF32 = false, accumulates = false;
    bool guardedRows = false; // the row's streaming work depends on a condition of the row
    // Elements gathered by an index that varies along the row (x[t, e(k)]): scalar reads, each of them.
    int64_t elementReads = 0, elementReadBytes = 0;
  };

  RowReads readsOf(DomainOp domain, const RowShape &shape) {
    Operation *op = domain.op();
    Block &body = domain.body();
    RowReads r;
    r.accumulates = shape.pointRows;
    // A row guard on the write, or a stream read under a row-level scf.if (a dot product behind
    // `row >= 0 ? ... : 0`).
    r.guardedRows = hasRowInvariantGuard(domain, rowInvariantOps(domain));
    op->walk([&](Operation *inner) {
      if (isa<arith::ExtFOp>(inner))
        r.castsToF32 = true;
      if (auto sum = dyn_cast<SumOp>(inner); sum && shape.along.contains(sum.getResult()))
        r.accumulates = true;
      // A fold of the row along the row (C2's combine, in f32 or in T; maybe in a branch of a condition of
      // the row) runs step by step into the accumulators too (f32-sized: room for any float type).
      auto topLevel = [&](Operation *o) {
        Operation *parent = o->getParentOp();
        return parent == op || (isa<scf::IfOp>(parent) && parent->getParentOp() == op);
      };
      if (auto fold = dyn_cast<FoldOp>(inner);
          fold && topLevel(fold) && isa<FloatType>(fold.getType()) && shape.along.contains(fold.getResult()))
        r.accumulates = true;
      auto load = dyn_cast<memref::LoadOp>(inner);
      std::string name = load ? viewedTensorName(load.getMemRef()) : "";
      if (name.empty())
        return;
      bool isStream = shape.along.contains(load.getResult());
      Value rowIndex = shape.pointRows ? shape.alongSum->getRegion(0).front().getArgument(0) : body.getArguments().back();
      if (isStream && load.getIndices().back() != rowIndex) {
        int64_t reads = stepsPerRow(load, op, shape.alongSum) * shape.length;
        r.elementReads += reads;
        r.elementReadBytes += reads * elementBytes(load.getMemRef());
        return;
      }
      if (isStream && underRowCondition(load, op, shape.alongSum))
        r.guardedRows = true;
      Stream &s = (isStream ? r.streams : r.rowValues)[name];
      s.elementBytes = elementBytes(load.getMemRef());
      bool own = !shape.pointRows && indexesOwnRow(load.getIndices(), body);
      s.own = isStream && (s.gathers == 0 ? own : s.own && own);
      s.gathers += stepsPerRow(load, op, shape.alongSum);
      if (isStream) {
        ArrayRef<BlockArgument> rowArgs = body.getArguments();
        if (!shape.pointRows)
          rowArgs = rowArgs.drop_back();
        int64_t ignored = trailingIgnoredRowDims(load, rowArgs);
        s.reuseDims = s.reuseDims < 0 ? ignored : std::min(s.reuseDims, ignored);
      }
    });
    return r;
  }

  LogicalResult plan(DomainOp domain) {
    Operation *op = domain.op();
    Block &body = domain.body();
    FailureOr<RowShape> shape = rowShape(domain);
    if (failed(shape))
      return failure();
    bool pointRows = shape->pointRows;
    int64_t rowLength = shape->length;
    RowReads reads = readsOf(domain, *shape);
    const std::map<std::string, Stream> &streams = reads.streams, &rowValues = reads.rowValues;
    bool castsToF32 = reads.castsToF32, accumulates = reads.accumulates, guardedRows = reads.guardedRows;
    int64_t rowScalars = reads.elementReads, rowBytes = reads.elementReadBytes;

    // Buffers, per element of a chunk (streams and output) or per row (row-invariant values).
    SmallVector<Attribute> buffers;
    MLIRContext *ctx = &getContext();
    int64_t rowCopies = 0, passCopiesPerChunk = 0, passCopies = 0;
    struct ElementBuffer {
      UbRole role;
      std::string tensor; // the element type for the accumulators and the cast buffer
      int64_t bytes;
      bool queued; // a copy-in/copy-out queue: double-buffered when pipelined
      bool perRowOfPass;
      int64_t copies = 1;
      int64_t reuseDims = 0, copiesPerChunk = 0; // a stream kept across rows that share its row
      bool wholeRow = false;                     // such a stream holding its whole row, every chunk
    };
    SmallVector<ElementBuffer> elementBuffers;
    for (const auto &[name, s] : streams) {
      bool reused = !s.own && s.reuseDims > 0; // copied once per group of rows that share it
      elementBuffers.push_back(
          {UbRole::Input, name, s.elementBytes, true, s.own, 1, reused ? s.reuseDims : 0, reused ? s.gathers : 0});
      if (reused)
        continue;
      (s.own ? passCopiesPerChunk : rowCopies) += s.own ? 1 : s.gathers;
      rowBytes += s.gathers * rowLength * s.elementBytes;
    }
    std::string output = viewedTensorName(domain.output());
    int64_t outputBytes = elementBytes(domain.output());
    bool outputOwnRow = !domain.isScatter() ||
                        indexesOwnRow(cast<WriteOp>(body.getTerminator()).getIndices(), body);
    int64_t fixedBytesPerRow = 0;
    std::string outputSource; // the tensor of the input buffer the output row goes out from, if any
    if (pointRows) {
      fixedBytesPerRow += outputBytes; // one value per point
      passCopies += 1;
      rowBytes += outputBytes;
    } else {
      // A row that is an input row unchanged goes out from that input's buffer (copiedRow), when the
      // buffer holds as many rows of a pass as the output's would, and is not kept for later rows where
      // a row may store a constant over it.
      CopiedRow copied = accumulates ? CopiedRow() : copiedRow(domain);
      auto source = copied.load ? streams.find(viewedTensorName(copied.load.getMemRef())) : streams.end();
      bool fromInput = source != streams.end() && (!outputOwnRow || source->second.own) &&
                       !(copied.overwrites && !source->second.own && source->second.reuseDims > 0);
      if (!fromInput)
        elementBuffers.push_back({UbRole::Output, output, outputBytes, true, outputOwnRow, 1});
      else
        outputSource = source->first;
      (outputOwnRow ? passCopiesPerChunk : rowCopies) += 1;
      rowBytes += rowLength * outputBytes;
    }
    // A point row's fused row stores (moe.row_store): the row goes out through a `row.` buffer, one
    // DataCopy per chunk.
    if (pointRows) {
      std::map<std::string, int64_t> stored;
      op->walk([&](RowStoreOp store) { stored[viewedTensorName(store.getOutput())] = elementBytes(store.getOutput()); });
      for (const auto &[name, bytes] : stored) {
        elementBuffers.push_back({UbRole::RowStore, name, bytes, false, false, 1});
        rowCopies += 1;
        rowBytes += rowLength * bytes;
      }
    }
    if (accumulates)
      elementBuffers.push_back({UbRole::Accumulator, "f32", 4, false, false, 1});
    if (castsToF32 && llvm::any_of(elementBuffers, [](const ElementBuffer &b) { return b.bytes != 4; }))
      elementBuffers.push_back({UbRole::Cast, "f32", 4, false, false, 1});

    // The chunk: the largest granule multiple whose buffers, with the row-invariant ones, fit the UB.
    auto align = [&](int64_t v) { return (v + ubAlignment - 1) / ubAlignment * ubAlignment; };
    for (const auto &[name, s] : rowValues) {
      fixedBytesPerRow += s.gathers * s.elementBytes;
      rowScalars += s.gathers;
      passCopies += 1;
      rowBytes += s.gathers * s.elementBytes;
    }
    int64_t fixed = align(fixedBytesPerRow);

    // Two layouts. Pipelined: every copy-in and copy-out queue double-buffered, so moves overlap compute.
    // In place, single-buffered, as CANN's grad kernels do: a narrow input lands in the back half of an
    // f32-sized buffer and is cast forward in place, and the output is staged in the accumulator. The
    // second holds longer chunks; it is used only when the first would need more of them.
    SmallVector<ElementBuffer> pipelined = elementBuffers, inPlace;
    for (ElementBuffer &b : pipelined)
      b.copies = b.queued ? 2 : 1;
    bool outputInAccumulator = false;
    for (ElementBuffer b : elementBuffers) {
      if (b.role == UbRole::Cast)
        continue;
      if (accumulates && b.role == UbRole::Output) {
        outputInAccumulator = true;
        continue;
      }
      if (castsToF32 && b.role == UbRole::Input)
        b.bytes = std::max<int64_t>(b.bytes, 4);
      inPlace.push_back(b);
    }
    auto largestChunk = [&](ArrayRef<ElementBuffer> layout) -> std::pair<int64_t, int64_t> {
      int64_t perElement = 0, narrowest = 8, widest = 1, wholeRows = 0;
      for (const ElementBuffer &b : layout) {
        if (b.wholeRow)
          wholeRows += b.copies * align(b.bytes * rowLength);
        else
          perElement += b.bytes * b.copies;
        narrowest = std::min(narrowest, b.bytes);
        widest = std::max(widest, b.bytes);
      }
      int64_t granule = std::max<int64_t>(1, ubAlignment / narrowest);
      int64_t chunk =
          std::max<int64_t>(0, ubBytes - fixed - wholeRows) / std::max<int64_t>(perElement, 1) / granule * granule;
      return {std::min(chunk, maxCopyBytes / widest / granule * granule), granule};
    };
    auto chunksFor = [&](int64_t chunk) { return chunk <= 0 ? INT64_MAX : (rowLength + chunk - 1) / chunk; };
    // A row's streaming cost in `chunks` chunks under the chip's cost model (ascend::coreCostNs, for a core
    // of many passes): its DataCopy set-ups and its bytes, overlapped when double-buffered, added when not.
    ascend::Chip costs;
    costs.dataCopyNs = dataCopyNs;
    costs.gmGBpsPerCore = gmGbpsPerCore;
    auto rowCostNs = [&](int64_t chunks, bool doubleBuffered) {
      ascend::CoreWork row;
      double copies = double(chunks) * double(rowCopies + passCopiesPerChunk) + double(passCopies);
      row.dataCopies = int64_t(std::min(copies, 1e18)); // no int64 overflow for absurd gathers
      row.gmBytes = rowBytes;
      row.passes = std::numeric_limits<int64_t>::max();
      row.bufferCount = doubleBuffered ? 2 : 1;
      return ascend::coreCostNs(costs, row);
    };
    int64_t inPlaceChunks = chunksFor(largestChunk(inPlace).first);
    int64_t pipelinedChunks = chunksFor(largestChunk(pipelined).first);
    bool useInPlace = inPlaceChunks < pipelinedChunks; // without the chip's costs: the fewer chunks
    if (useInPlace && dataCopyNs > 0 && gmGbpsPerCore > 0 && pipelinedChunks != INT64_MAX)
      useInPlace = rowCostNs(inPlaceChunks, false) < rowCostNs(pipelinedChunks, true);
    if (bufferCount.getValue())
      useInPlace = bufferCount.getValue() == 1;
    elementBuffers = useInPlace ? inPlace : pipelined;
    int64_t bufferCopies = useInPlace ? 1 : 2;
    if (useInPlace && outputInAccumulator && outputOwnRow) { // staged a row at a time: one copy-out per row
      passCopiesPerChunk -= 1;
      rowCopies += 1;
    }
    // The largest chunk of a layout, within a tuned cap, and its granule.
    auto chunkOf = [&](ArrayRef<ElementBuffer> layout) -> std::pair<int64_t, int64_t> {
      auto [fits, granule] = largestChunk(layout);
      int64_t largest = fits;
      if (maxChunk > 0) // a tuned cap: whole granules, at least one
        largest = std::min(largest, std::max(granule, maxChunk / granule * granule));
      // A point row's dot product keeps kCpuReductionWidth partial sums: when the row needs several
      // chunks, whole multiples of them per chunk put every term in the same partial sum as one pass does.
      if (pointRows && chunksFor(largest) > 1) {
        granule = std::max(granule, kCpuReductionWidth);
        largest = std::max(largest / granule, std::min<int64_t>(1, fits / granule)) * granule;
      }
      return {largest, granule};
    };
    auto [largest, granule] = chunkOf(elementBuffers);
    // A kept input of a row that needs several chunks would be copied again for every row that shares it
    // (each row's chunks replace the last); holding its whole row, single, copies it once per group. Taken
    // when the other buffers still need no more chunks (A3's token row, shared by its experts' dot
    // products over H = 16384 in f32). Not for the buffer the output row goes out from.
    if (largest >= granule && chunksFor(largest) > 1) {
      SmallVector<ElementBuffer> whole = elementBuffers;
      bool holds = false;
      for (ElementBuffer &b : whole)
        if (b.reuseDims > 0 && !(b.role == UbRole::Input && b.tensor == outputSource)) {
          b.wholeRow = holds = true;
          b.copies = 1;
        }
      auto [wholeLargest, wholeGranule] = chunkOf(whole);
      if (holds && wholeLargest >= wholeGranule && chunksFor(wholeLargest) <= chunksFor(largest)) {
        elementBuffers = whole;
        largest = wholeLargest;
        granule = wholeGranule;
      }
    }
    if (largest < granule)
      return op->emitOpError("moe-plan-ascend: a chunk of ")
             << granule << " elements with " << fixedBytesPerRow << " B of row-invariant values does not fit the "
             << int64_t(ubBytes) << " B UB of chip '" << std::string(chip) << "'";
    int64_t chunks = chunksFor(largest);
    int64_t chunk = ((rowLength + chunks - 1) / chunks + granule - 1) / granule * granule;

    for (const ElementBuffer &b : elementBuffers)
      buffers.push_back(UbBufferAttr::get(ctx, b.role, b.tensor, b.bytes, b.copies, b.perRowOfPass, 0, b.reuseDims,
                                          b.copiesPerChunk, b.wholeRow));
    for (const auto &[name, s] : rowValues)
      buffers.push_back(
          UbBufferAttr::get(ctx, UbRole::Index, name, 0, 1, true, s.gathers * s.elementBytes, 0, 0, false));
    if (pointRows)
      buffers.push_back(UbBufferAttr::get(ctx, UbRole::Output, output, 0, 1, true, outputBytes, 0, 0, false));

    // Rows per pass: only worth it when something moves a pass at a time. A chunked row shares its pass's
    // row-invariant values with the pass's other rows as well (A3's dot products over H = 16384 in two
    // chunks, most of their points dead: a DataCopy of the pass's indices, not scalar reads per point);
    // a buffer per row of the pass holds each row's chunk.
    int64_t rowsPerPass = 1;
    bool batches = passCopies > 0 || llvm::any_of(elementBuffers, [](const ElementBuffer &b) { return b.perRowOfPass; });
    if (batches) {
      int64_t perRow = fixedBytesPerRow, shared = 0;
      for (const ElementBuffer &b : elementBuffers)
        (b.perRowOfPass ? perRow : shared) += b.copies * align(b.bytes * (b.wholeRow ? rowLength : chunk));
      // Each buffer that grows with the rows may round up by one alignment unit.
      int64_t slack = ubAlignment * int64_t(rowValues.size() + 1 + elementBuffers.size());
      rowsPerPass = std::clamp<int64_t>((ubBytes - shared - slack) / std::max<int64_t>(perRow, 1), 1, 65535);
      if (maxRowsPerPass > 0)
        rowsPerPass = std::min<int64_t>(rowsPerPass, maxRowsPerPass);
    }
    op->setAttr("ascend_plan",
                AscendPlanAttr::get(ctx, chip, rowLength, chunk, chunks, bufferCopies, rowsPerPass, pointRows, guardedRows,
                                    rowCopies, passCopiesPerChunk, passCopies, rowScalars, rowBytes,
                                    ArrayAttr::get(ctx, buffers)));
    return success();
  }
};

} // namespace
} // namespace moec::moe
