//===- LowerToAscend.cpp - Ascend: planned domains as per-core loop nests through the UB ---===//
//
// 1. Each kernel gains three trailing arguments: its core's runtime (ascend:runtime), the core's index
//    (ascend:core) and the number of cores launched (ascend:cores, the plan's blockDim).
// 2. Each moe.compute / moe.scatter with a #moe.ascend_plan: the core takes rows [begin, end) of the
//    plan's split (floor(rows / cores) each, the first rows % cores one more), with the plan's buffers
//    placed in the UB in the plan's order, each aligned.
// 3. Each row runs through BodyLowering's emitRow with a StagedRow (UbStaging below): the row-invariant
//    prologue, then chunk by chunk, copy-in (a DataCopy per gathered row, under the conditions the body
//    reads it under), compute over the UB buffers, copy-out; then moe.row_done. A point row's fused row
//    stores (moe.row_store, A3's scaled grad row stored as probs_grad's dot product reads it) go to a
//    `row.` buffer, copied out after each chunk of the dot product.
// Loads that do not run along the row (indices, probs, an element gathered by h) are scalar reads of
// global memory. A domain of point rows (a dot product along H per point) runs point by point, its
// reduction a chunk at a time (emitStagedPoint), its value copied out one element per point.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

#include <map>

#define DEBUG_TYPE "moe-lower-to-ascend"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOELOWERTOASCEND
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// A plan's buffer by its role and tensor (#moe.ub_buffer's), as the lowering looks one up.
using BufferKey = std::pair<UbRole, std::string>;

/// The buffer's name, "<role>.<tensor>", for moe.ub_alloc and the messages.
std::string bufferName(const BufferKey &key) { return (stringifyUbRole(key.first) + "." + key.second).str(); }

/// Whether this lowering places a buffer of `role` in the UB: it reads row-invariant values (idx) as scalars
/// and casts in registers, so the plan counts those buffers' bytes but they are never allocated.
bool placedInUb(UbRole role) { return role != UbRole::Index && role != UbRole::Cast; }

/// A buffer of the plan, placed: `copies x chunk` elements (a 1-D chunk when there is one copy), or
/// `copies x rowLength` for a kept input that holds whole rows.
struct PlacedBuffer {
  Value memref;
  int64_t copies = 1;
  Value raw;             // the placed bytes
  SmallVector<Value> keptRows; // a kept input, per copy: the flat index of the GM row it holds (-1: none)
  bool wholeRow = false;       // indexed by the position along the row, not within the chunk
};

/// The StagedRow of one domain: the plan's buffers, and which gathered rows the current loop reads from
/// which buffer copy. The first problem it meets is reported on the domain and fails the pass.
class UbStaging : public StagedRow {
public:
  /// A row of a domain runs along its last index; a point row along the index of its contiguous
  /// reduction (a dot product over H).
  UbStaging(DomainOp domain, AscendPlanAttr plan, Value runtime, Value core, std::map<BufferKey, PlacedBuffer> buffers)
      : domain(domain), plan(plan), runtime(runtime), core(core), buffers(std::move(buffers)) {
    if (!plan.getPointRows()) {
      along = valuesAlongRow(domain);
      inner = domain.body().getArguments().back();
      return;
    }
    SumOp sum = contiguousReductionOf(domain);
    inner = sum.getBody().front().getArgument(0);
    SetVector<Operation *> slice;
    getForwardSlice(inner, &slice);
    along.insert(inner);
    for (Operation *op : slice)
      for (Value r : op->getResults())
        along.insert(r);
  }

  bool failed() const { return problem; }

  int64_t chunk() const override { return plan.getChunk(); }
  int64_t chunks() const override { return plan.getChunks(); }
  void beginChunk(Value chunkOffset, Value chunkLength) override {
    offset = chunkOffset;
    length = chunkLength;
  }

  void copyIn(OpBuilder &b, Block &block, Operation *skip, const IRMapping &scalars, Value step) override {
    std::map<std::string, int64_t> perTensor; // gathered rows of each tensor in this loop
    // Loads inside a nested sum, fold or compact run per step of it: not staged (see load()).
    std::function<void(Block &)> visit = [&](Block &inside) {
      for (Operation &op : inside) {
        if (&op == skip || isa<SumOp, FoldOp, CompactOp>(op))
          continue;
        if (auto load = dyn_cast<memref::LoadOp>(op); load && readsAlongRow(load))
          stage(b, load, block, scalars, step, perTensor[viewedTensorName(load.getMemRef())]++);
        for (Region &region : op.getRegions())
          for (Block &nested : region)
            visit(nested);
      }
    };
    visit(block);
  }

  Value load(OpBuilder &b, memref::LoadOp load, Value h, int64_t width) override {
    auto it = h ? staged.find(load) : staged.end();
    if (it == staged.end()) {
      if (h && readsAlongRow(load))
        fail(load, "reads along the row inside a reduction that does not run over the chunk: it cannot be staged "
                   "through the UB");
      if (!viewedTensorName(load.getMemRef()).empty()) { // a scalar read of global memory (not a local list)
        int64_t bytes = std::max<int64_t>(1, load.getType().getIntOrFloatBitWidth() / 8);
        ScalarReadOp::create(b, load.getLoc(), runtime, core, bytes);
      }
      return Value();
    }
    auto [buffer, slot] = it->second;
    Location loc = load.getLoc();
    Value local = wholeRows.contains(buffer) ? h : Value(arith::SubIOp::create(b, loc, h, offset));
    if (width == 1)
      return memref::LoadOp::create(b, loc, buffer, ValueRange{slot, local});
    return vector::LoadOp::create(b, loc, VectorType::get({width}, load.getType()), buffer, ValueRange{slot, local});
  }

  Value accumulators(Type element) override {
    auto it = buffers.find({UbRole::Accumulator, "f32"});
    if (it == buffers.end() || !it->second.raw || element.getIntOrFloatBitWidth() > 32) {
      fail(domain.op(), "the plan has no acc.f32 buffer to hold the reduction along the row");
      OpBuilder b(domain.op());
      return memref::AllocaOp::create(b, domain.op()->getLoc(), MemRefType::get({plan.getChunk()}, element));
    }
    Value &view = accumulatorViews[element];
    if (!view) { // the accumulators' bytes, viewed with the reduction's type, next to their placement
      Value raw = it->second.raw;
      OpBuilder b(raw.getContext());
      b.setInsertionPointAfterValue(raw);
      Location loc = raw.getLoc();
      auto type = MemRefType::get({plan.getChunk()}, element, MemRefLayoutAttrInterface(), UbSpaceAttr::get(b.getContext()));
      view = memref::ViewOp::create(b, loc, type, raw, arith::ConstantIndexOp::create(b, loc, 0), ValueRange{});
    }
    return view;
  }

  void store(OpBuilder &b, Value value, Value h, int64_t width) override {
    Location loc = domain.op()->getLoc();
    Value buffer = outputBuffer().memref;
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    Value local = plan.getPointRows() ? c0 : Value(arith::SubIOp::create(b, loc, h, offset)); // a point: one value
    if (width == 1)
      memref::StoreOp::create(b, loc, value, buffer, ValueRange{c0, local});
    else
      vector::StoreOp::create(b, loc, value, buffer, ValueRange{c0, local});
  }

  void copyOut(OpBuilder &b, const IRMapping &scalars) override {
    Location loc = domain.op()->getLoc();
    IRMapping values = scalars;
    OpBuilder::InsertionGuard guard(b);
    SmallVector<Value> at;
    auto write = dyn_cast<WriteOp>(domain.body().getTerminator());
    if (write) {
      // A guard of the row (kRowGuardAttr) already wraps the row; any other one guards the copy.
      if (write.getGuard() && !write->hasAttr(kRowGuardAttr)) {
        Value live = materialize(b, write.getGuard(), values);
        if (!live)
          return fail(write, "writes under a condition that varies along the row: not lowered to Ascend");
        b.setInsertionPointToStart(scf::IfOp::create(b, loc, live, false).thenBlock());
      }
      if (!plan.getPointRows() && write.getIndices().back() != inner)
        return fail(write, "does not write along the row: not lowered to Ascend");
      if (!materializeRow(b, plan.getPointRows() ? write.getIndices() : write.getIndices().drop_back(), values, write,
                          "writes", at))
        return;
    } else {
      for (BlockArgument arg : domain.body().getArguments())
        at.push_back(values.lookup(arg));
      if (!plan.getPointRows())
        at.pop_back();
    }
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    Value count = length;
    if (plan.getPointRows()) { // the point's one value
      count = arith::ConstantIndexOp::create(b, loc, 1);
    } else {
      at.push_back(offset);
    }
    DataCopyOp::create(b, loc, runtime, core, outputBuffer().memref, ValueRange{c0, c0}, domain.output(), at, count);
  }

  void storeRow(OpBuilder &b, RowStoreOp store, Value value, Value j, int64_t width) override {
    Location loc = store.getLoc();
    BufferKey key{UbRole::RowStore, viewedTensorName(store.getOutput())};
    auto it = buffers.find(key);
    if (it == buffers.end())
      return fail(store, "stores a row, but the plan has no buffer '" + bufferName(key) + "'");
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    Value local = arith::SubIOp::create(b, loc, j, offset);
    if (width == 1)
      memref::StoreOp::create(b, loc, value, it->second.memref, ValueRange{c0, local});
    else
      vector::StoreOp::create(b, loc, value, it->second.memref, ValueRange{c0, local});
  }

  void copyOutRows(OpBuilder &b, ArrayRef<RowStoreOp> stores, const IRMapping &scalars) override {
    for (RowStoreOp store : stores) {
      Location loc = store.getLoc();
      IRMapping values = scalars;
      OpBuilder::InsertionGuard guard(b);
      if (store.getGuard()) {
        Value live = materialize(b, store.getGuard(), values);
        if (!live)
          return fail(store, "stores a row under a condition that varies along it: not lowered to Ascend");
        b.setInsertionPointToStart(scf::IfOp::create(b, loc, live, false).thenBlock());
      }
      SmallVector<Value> at;
      if (!materializeRow(b, store.getIndices().drop_back(), values, store, "stores", at))
        return;
      at.push_back(offset);
      Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
      auto buffer = buffers.find({UbRole::RowStore, viewedTensorName(store.getOutput())});
      if (buffer == buffers.end())
        return; // storeRow reported it
      DataCopyOp::create(b, loc, runtime, core, buffer->second.memref, ValueRange{c0, c0}, store.getOutput(), at,
                         length);
    }
  }

private:
  /// A load whose last index is the row's own (a contiguous read along the row).
  bool readsAlongRow(memref::LoadOp load) const {
    return !load.getIndices().empty() && load.getIndices().back() == inner;
  }

  /// Emits the DataCopy of the row `load` reads in this chunk, into copy `index` of its tensor's buffer
  /// (alternating with the steps of a reduction), under the conditions of the scf.if ops around it in `block`.
  void stage(OpBuilder &b, memref::LoadOp load, Block &block, const IRMapping &scalars, Value step, int64_t index) {
    BufferKey key{UbRole::Input, viewedTensorName(load.getMemRef())};
    auto found = buffers.find(key);
    if (found == buffers.end())
      return fail(load, "reads along the row, but the plan has no buffer '" + bufferName(key) + "'");
    PlacedBuffer buffer = found->second;
    if (index >= buffer.copies)
      return fail(load, "needs more copies of '" + bufferName(key) + "' than the plan's " +
                            std::to_string(buffer.copies));
    Location loc = load.getLoc();
    OpBuilder::InsertionGuard guard(b);
    auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
    Value slot = cst(index);
    if (step && buffer.copies > 1) // a double-buffered queue: the steps alternate between the copies
      slot = arith::RemUIOp::create(b, loc, arith::AddIOp::create(b, loc, step, slot), cst(buffer.copies));
    staged[load] = {buffer.memref, slot};
    if (buffer.wholeRow)
      wholeRows.insert(buffer.memref);
    // A kept input (its GM row does not depend on the innermost row indices: A3 reads token t's gradient
    // for each of its K slots) is copied only when the row it needs is not the one the buffer holds. With
    // one chunk per row, or a buffer that holds whole rows, it still holds it from the row before; a whole
    // row is held once its last chunk is in.
    Value keptRow;
    if (!buffer.keptRows.empty() && (plan.getChunks() == 1 || buffer.wholeRow) && !step)
      keptRow = buffer.keptRows[size_t(index)];

    SmallVector<std::pair<scf::IfOp, bool>> conditions; // outermost first; true: the then branch
    for (Operation *child = load; child->getParentOp() != block.getParentOp(); child = child->getParentOp()) {
      auto ifOp = dyn_cast<scf::IfOp>(child->getParentOp());
      if (!ifOp)
        return fail(load, "reads along the row under a " + child->getParentOp()->getName().getStringRef().str() +
                              ": not lowered to Ascend");
      conditions.insert(conditions.begin(), {ifOp, child->getParentRegion() == &ifOp.getThenRegion()});
    }
    IRMapping values = scalars;
    for (auto [ifOp, inThen] : conditions) {
      Value holds = materialize(b, ifOp.getCondition(), values);
      if (!holds)
        return fail(load, "reads along the row under a condition that varies along it: not lowered to Ascend");
      if (!inThen)
        holds = arith::XOrIOp::create(b, loc, holds, arith::ConstantIntOp::create(b, loc, 1, 1));
      b.setInsertionPointToStart(scf::IfOp::create(b, loc, holds, false).thenBlock());
    }
    SmallVector<Value> at;
    if (!materializeRow(b, load.getIndices().drop_back(), values, load, "reads", at))
      return;
    if (keptRow) { // the row's flat index in the tensor: copy only a row the buffer does not hold
      Value flat = cst(0);
      for (auto [d, index] : llvm::enumerate(at))
        flat = arith::AddIOp::create(
            b, loc, arith::MulIOp::create(b, loc, flat, memref::DimOp::create(b, loc, load.getMemRef(), d)), index);
      Value held = memref::LoadOp::create(b, loc, keptRow, ValueRange{cst(0)});
      Value fresh = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, flat, held);
      b.setInsertionPointToStart(scf::IfOp::create(b, loc, fresh, false).thenBlock());
      if (!buffer.wholeRow) {
        memref::StoreOp::create(b, loc, flat, keptRow, ValueRange{cst(0)});
      } else {
        Value last = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                                           arith::AddIOp::create(b, loc, offset, length), cst(plan.getRowLength()));
        OpBuilder::InsertionGuard lastGuard(b);
        b.setInsertionPointToStart(scf::IfOp::create(b, loc, last, false).thenBlock());
        memref::StoreOp::create(b, loc, flat, keptRow, ValueRange{cst(0)});
      }
    }
    at.push_back(offset);
    DataCopyOp::create(b, loc, runtime, core, load.getMemRef(), at, buffer.memref,
                       ValueRange{slot, buffer.wholeRow ? offset : cst(0)}, length);
  }

  /// Appends the emitted values of a row's `indices` to `at`; fails `op` ("<verb> a row that varies along
  /// the row") and returns false when one of them varies along the row.
  bool materializeRow(OpBuilder &b, ValueRange indices, IRMapping &values, Operation *op, StringRef verb,
                      SmallVector<Value> &at) {
    for (Value index : indices) {
      Value v = materialize(b, index, values);
      if (!v) {
        fail(op, verb.str() + " a row that varies along the row: not lowered to Ascend");
        return false;
      }
      at.push_back(v);
    }
    return true;
  }

  /// The emitted value of `v`, a value that does not vary along the row: from `values`, or by cloning the
  /// region-free ops that compute it (the conditions inside an scf.if's branches). Null when it cannot.
  Value materialize(OpBuilder &b, Value v, IRMapping &values) {
    if (Value known = values.lookupOrNull(v))
      return known;
    if (along.contains(v))
      return Value();
    Operation *def = v.getDefiningOp();
    Operation *owner = def ? def : cast<BlockArgument>(v).getOwner()->getParentOp();
    if (!domain.op()->isAncestor(owner))
      return v; // defined before the domain (a view, a dim)
    if (!def || def->getNumRegions() > 0)
      return Value();
    for (Value operand : def->getOperands())
      if (!materialize(b, operand, values))
        return Value();
    b.clone(*def, values);
    return values.lookup(v);
  }

  PlacedBuffer outputBuffer() {
    BufferKey key{UbRole::Output, viewedTensorName(domain.output())};
    auto it = buffers.find(key);
    if (it == buffers.end()) {
      fail(domain.op(), "the plan has no buffer for the output '" + bufferName(key) + "'");
      it = buffers.emplace(key, PlacedBuffer{placeholder(domain.output()), 1}).first;
    }
    return it->second;
  }

  /// A stand-in buffer after a failure, so emission can finish before the pass fails.
  Value placeholder(Value like) {
    auto type = cast<MemRefType>(like.getType());
    OpBuilder b(domain.op());
    return memref::AllocaOp::create(b, domain.op()->getLoc(),
                                    MemRefType::get({1, plan.getChunk()}, type.getElementType()));
  }

  void fail(Operation *op, const std::string &why) {
    if (!problem)
      op->emitOpError("moe-lower-to-ascend: ") << why;
    problem = true;
  }

  DomainOp domain;
  AscendPlanAttr plan;
  Value runtime, core;
  std::map<BufferKey, PlacedBuffer> buffers;
  llvm::DenseSet<Value> along;
  Value inner;
  Value offset, length;
  DenseMap<Operation *, std::pair<Value, Value>> staged; // a load -> (buffer, copy)
  llvm::DenseSet<Value> wholeRows;                       // the staged buffers that hold whole rows
  DenseMap<Type, Value> accumulatorViews;
  bool problem = false;
};

struct LowerToAscendPass : impl::MoeLowerToAscendBase<LowerToAscendPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto func : llvm::make_early_inc_range(getOperation().getOps<func::FuncOp>())) {
      SmallVector<DomainOp> domains = collectDomainOps(func);
      if (domains.empty())
        continue;
      if (failed(requireSchedules(domains)) || failed(lowerKernel(func, domains)))
        return signalPassFailure();
    }
    getOperation().walk([](Operation *op) { op->removeAttr(kRowInvariantAttr); });
  }

  /// The element type each tensor of the kernel is viewed with.
  static std::map<std::string, Type> elementTypes(func::FuncOp func) {
    std::map<std::string, Type> types;
    func.walk([&](ViewOp view) {
      if (std::string name = viewedTensorName(view.getResult()); !name.empty())
        types[name] = view.getType().getElementType();
    });
    return types;
  }

  /// Places the plan's chunk buffers in its order, each at the next multiple of the alignment, as raw
  /// bytes viewed with the element type they hold (`copies x chunk`; the accumulators as one chunk).
  /// Buffers of row-invariant values (idx.) and the f32 cast buffer are not placed: this lowering reads
  /// the first as scalars and casts in registers. In the in-place layout (no out. buffer) the output is
  /// staged in the accumulators' bytes: element h of the output is written after element h of the
  /// accumulators is read, and is never wider, so it only overwrites accumulators already consumed.
  FailureOr<std::map<BufferKey, PlacedBuffer>> placeBuffers(OpBuilder &b, DomainOp domain, AscendPlanAttr plan,
                                                              Value runtime, Value core,
                                                              const std::map<std::string, Type> &types) {
    Location loc = domain.op()->getLoc();
    auto ub = UbSpaceAttr::get(b.getContext());
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    auto view = [&](Value raw, ArrayRef<int64_t> shape, Type element) -> Value {
      auto type = MemRefType::get(shape, element, MemRefLayoutAttrInterface(), ub);
      return memref::ViewOp::create(b, loc, type, raw, c0, ValueRange{});
    };
    std::map<BufferKey, PlacedBuffer> placed;
    Value accumulatorsRaw;
    int64_t offset = 0;
    for (auto buffer : plan.getBuffers().getAsRange<UbBufferAttr>()) {
      if (!placedInUb(buffer.getRole()))
        continue;
      bool accumulators = buffer.getRole() == UbRole::Accumulator;
      std::string name = buffer.fullName();
      bool onePerPoint = buffer.getElementBytes() == 0; // a point row's value
      Type element = b.getF32Type();
      if (!accumulators) {
        auto it = types.find(buffer.getTensor().str());
        if (it == types.end())
          return domain.op()->emitOpError("moe-lower-to-ascend: no tensor for the plan's buffer '") << name << "'";
        element = it->second;
      }
      int64_t copies = buffer.getCopies();
      int64_t elements = onePerPoint ? 1 : buffer.getWholeRow() ? plan.getRowLength() : plan.getChunk();
      int64_t bytes = onePerPoint ? buffer.getFixedBytesPerRow() : buffer.getElementBytes() * elements * copies;
      auto rawType = MemRefType::get({bytes}, b.getI8Type(), MemRefLayoutAttrInterface(), ub);
      Value raw = UbAllocOp::create(b, loc, rawType, runtime, core, name, offset);
      if (accumulators)
        accumulatorsRaw = raw;
      SmallVector<int64_t> shape{elements};
      if (!accumulators)
        shape.insert(shape.begin(), copies);
      PlacedBuffer &placedBuffer = placed[{buffer.getRole(), buffer.getTensor().str()}];
      placedBuffer = {view(raw, shape, element), copies, raw, {}, buffer.getWholeRow()};
      for (int64_t copy = 0; buffer.getReuseDims() > 0 && copy < copies; ++copy) { // scalars of the core
        Value held = memref::AllocaOp::create(b, loc, MemRefType::get({1}, b.getIndexType()));
        memref::StoreOp::create(b, loc, arith::ConstantIndexOp::create(b, loc, -1), held, ValueRange{c0});
        placedBuffer.keptRows.push_back(held);
      }
      offset += (bytes + ubAlignment - 1) / ubAlignment * ubAlignment;
    }
    BufferKey output{UbRole::Output, viewedTensorName(domain.output())};
    if (!plan.getPointRows() && !placed.count(output) && accumulatorsRaw)
      placed[output] = {view(accumulatorsRaw, {1, plan.getChunk()},
                             cast<MemRefType>(domain.output().getType()).getElementType()),
                        1, accumulatorsRaw};
    // A row copied unchanged from an input goes out from the input's buffer, from the copy it was staged
    // in (the first: the only load of that tensor along the row).
    if (CopiedRow copied = copiedRow(domain); copied.load && !plan.getPointRows() && !placed.count(output)) {
      auto input = placed.find({UbRole::Input, viewedTensorName(copied.load.getMemRef())});
      if (input != placed.end())
        placed[output] = input->second;
    }
    return placed;
  }

  LogicalResult lowerKernel(func::FuncOp func, ArrayRef<DomainOp> domains) {
    OpBuilder b(func);
    unsigned n = func.getNumArguments();
    auto attrs = [&](ArgRole role) { return argRoleDictionary(b.getContext(), role); };
    Location loc = func.getLoc();
    if (failed(func.insertArguments({n, n, n}, {LLVM::LLVMPointerType::get(b.getContext()), b.getIndexType(), b.getIndexType()},
                                    {attrs(ArgRole::AscendRuntime), attrs(ArgRole::AscendCore), attrs(ArgRole::AscendCores)},
                                    {loc, loc, loc})))
      return func.emitError("cannot add the Ascend core arguments");
    Value runtime = func.getArgument(n), core = func.getArgument(n + 1), cores = func.getArgument(n + 2);
    std::map<std::string, Type> types = elementTypes(func);

    for (DomainOp domain : domains) {
      auto plan = domain.op()->getAttrOfType<AscendPlanAttr>("ascend_plan");
      if (!plan)
        return domain.op()->emitOpError("moe-lower-to-ascend: no #moe.ascend_plan (run moe-plan-ascend first)");
      loc = domain.op()->getLoc();
      b.setInsertionPoint(domain.op());
      auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
      FailureOr<std::map<BufferKey, PlacedBuffer>> buffers = placeBuffers(b, domain, plan, runtime, core, types);
      if (failed(buffers))
        return failure();
      // The core's rows: floor(rows / cores) each, and one more for each of the first rows % cores.
      Value rows = plan.getPointRows() ? emitPointCount(b, domain) : emitRowCount(b, domain);
      Value base = arith::DivUIOp::create(b, loc, rows, cores);
      Value extra = arith::RemUIOp::create(b, loc, rows, cores);
      Value begin = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, core, base),
                                          arith::MinUIOp::create(b, loc, core, extra));
      Value takesOneMore = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, core, extra);
      Value count = arith::AddIOp::create(b, loc, base, arith::SelectOp::create(b, loc, takesOneMore, cst(1), cst(0)));
      auto rowLoop = scf::ForOp::create(b, loc, begin, arith::AddIOp::create(b, loc, begin, count), cst(1));
      UbStaging staging(domain, plan, runtime, core, std::move(*buffers));
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(rowLoop.getBody());
        if (plan.getPointRows()) {
          emitStagedPoint(b, domain, rowLoop.getInductionVar(), kCpuReductionWidth, staging);
        } else {
          RowTarget target;
          target.staged = &staging;
          emitRow(b, domain, rowLoop.getInductionVar(), cst(0), 1, /*vectorAlignment=*/1, /*reductionWidth=*/0, target);
        }
        auto done = RowDoneOp::create(b, loc, runtime, core, rowLoop.getInductionVar());
        done->setAttr("ascend_plan", plan); // the plan stays visible in the tiled IR
      }
      if (staging.failed())
        return failure();
      b.setInsertionPointAfter(rowLoop);
      for (auto buffer : plan.getBuffers().getAsRange<UbBufferAttr>())
        if (placedInUb(buffer.getRole()))
          UbFreeOp::create(b, loc, runtime, core, buffer.fullName());
      domain.op()->erase();
    }
    return success();
  }
};

} // namespace
} // namespace moec::moe
