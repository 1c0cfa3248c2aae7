//===- FillUncoveredRows.cpp - Fill only the rows no scatter writes -------===//
//
// A3 zero-fills its R x H output, then scatters the routed rows over it: at DeepSeek-V3 shapes it writes
// 470 MB of zeros and then overwrites nearly all of them. When a kernel
//   - computes a whole output O (a moe.compute over all of O) from read-only inputs, and
//   - later kernels write O only through moe.scatters of whole rows (the write's row indices and guard
//     do not vary along the row, and the scatter's last extent is O's),
// this pass
//   - gives every kernel a `workspace` pointer argument, after the last pointer argument; the runtime
//     passes a zeroed buffer holding, for each such O in order, one byte per row of O at a 64-byte
//     aligned offset (the module's `moe.workspace` attribute names the outputs);
//   - has each of those scatters mark the rows it writes (`covered[row] = 1` under the write's guard, once
//     per row after moe-hoist-row-invariants);
//   - moves the fill after the last of them and makes it a scatter that writes only unmarked rows.
// Every element of O is still written with the value it ends up with before, once instead of twice.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"
#include "moec/dsl/KernelPlan.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define DEBUG_TYPE "moe-fill-uncovered-rows"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEFILLUNCOVEREDROWS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

using dsl::kWorkspaceAlignment;

/// A kernel that computes all of a tensor output, and the scatters of later kernels that write it.
struct Candidate {
  func::FuncOp fill;
  ComputeOp compute;
  ViewOp view;    // the fill's view of the output
  unsigned arg;   // the output's argument number
  std::string tensor;
  SmallVector<Operation *> writers; // moe.scatters and moe.row_stores (fused rows) of whole rows
};

/// Whether `size` is a function argument or a constant: something every kernel of the module can rebuild.
bool rebuildable(Value size) {
  return isa<BlockArgument>(size) || getConstantIntValue(size).has_value();
}

/// Whether two extents are the same value in two kernels with the same arguments.
bool sameExtent(Value a, Value b) {
  if (auto argA = dyn_cast<BlockArgument>(a))
    if (auto argB = dyn_cast<BlockArgument>(b))
      return argA.getArgNumber() == argB.getArgNumber();
  std::optional<int64_t> ca = getConstantIntValue(a), cb = getConstantIntValue(b);
  return ca && cb && *ca == *cb;
}

bool sameExtents(ValueRange a, ValueRange b) {
  return a.size() == b.size() && llvm::all_of(llvm::zip(a, b), [](auto p) {
           return sameExtent(std::get<0>(p), std::get<1>(p));
         });
}

/// `extent` (an argument or a constant of some kernel) in `func`, at the builder's insertion point.
Value rebuildExtent(OpBuilder &b, func::FuncOp func, Value extent) {
  if (auto arg = dyn_cast<BlockArgument>(extent))
    return func.getArgument(arg.getArgNumber());
  return arith::ConstantIndexOp::create(b, extent.getLoc(), *getConstantIntValue(extent));
}

/// Whether `memref` is a view of a read-only argument of `func`.
bool readsInput(func::FuncOp func, Value memref) {
  auto view = memref.getDefiningOp<ViewOp>();
  auto arg = view ? dyn_cast<BlockArgument>(view.getPtr()) : BlockArgument();
  return arg && arg.getOwner() == &func.getBody().front() &&
         func.getArgAttr(arg.getArgNumber(), "llvm.readonly") != nullptr;
}

/// Whether the body's value at a point can be computed later with the same result: it only reads inputs.
bool readsOnlyInputs(func::FuncOp func, Block &body) {
  bool ok = true;
  body.walk([&](Operation *op) {
    if (auto load = dyn_cast<memref::LoadOp>(op))
      ok &= readsInput(func, load.getMemRef());
    else if (auto effects = dyn_cast<MemoryEffectOpInterface>(op))
      ok &= effects.hasNoEffect();
    else
      ok &= op->hasTrait<OpTrait::HasRecursiveMemoryEffects>();
  });
  return ok;
}

std::optional<Candidate> asFill(func::FuncOp func) {
  SmallVector<DomainOp> domains = collectDomainOps(func);
  if (domains.size() != 1 || domains[0].isScatter())
    return std::nullopt;
  auto compute = cast<ComputeOp>(domains[0].op());
  auto view = compute.getOutput().getDefiningOp<ViewOp>();
  auto arg = view ? dyn_cast<BlockArgument>(view.getPtr()) : BlockArgument();
  if (!arg || arg.getOwner() != &func.getBody().front() || view.getSizes().size() < 2 ||
      !sameExtents(view.getSizes(), compute.getBounds()) || !llvm::all_of(view.getSizes(), rebuildable) ||
      !readsOnlyInputs(func, compute.getBody().front()))
    return std::nullopt;
  ArgAttr role = argRole(func, arg.getArgNumber());
  if (!role || role.getRole() != ArgRole::Tensor)
    return std::nullopt;
  return Candidate{func, compute, view, arg.getArgNumber(), role.getName().str(), {}};
}

/// The scatter writing through `view` when it writes whole rows of the view, else null.
ScatterOp wholeRowScatter(ViewOp view, Candidate &fill) {
  if (!view->hasOneUse() || !sameExtents(view.getSizes(), fill.view.getSizes()))
    return nullptr;
  auto scatter = dyn_cast<ScatterOp>(*view->getUsers().begin());
  if (!scatter || scatter.getOutput() != view.getResult() || scatter.getBounds().empty() ||
      !sameExtent(scatter.getBounds().back(), view.getSizes().back()))
    return nullptr;
  Block &body = scatter.getBody().front();
  auto write = cast<WriteOp>(body.getTerminator());
  if (write.getIndices().size() != view.getSizes().size() || write.getIndices().back() != body.getArguments().back())
    return nullptr;
  DenseSet<Value> alongRow = valuesAlongRow(DomainOp::dyn(scatter));
  for (Value index : write.getIndices().drop_back())
    if (alongRow.contains(index))
      return nullptr;
  if (write.getGuard() && alongRow.contains(write.getGuard()))
    return nullptr;
  return scatter;
}

/// The fused row store (moe.row_store in a moe.sum) writing through `view` when it writes whole rows of
/// the view: its last index is the sum's own, over the view's last extent, and nothing else of it depends
/// on the sum's index (the frontend computes the row and the guard before the sum).
RowStoreOp wholeRowStore(ViewOp view, Candidate &fill) {
  if (!view->hasOneUse() || !sameExtents(view.getSizes(), fill.view.getSizes()))
    return nullptr;
  auto store = dyn_cast<RowStoreOp>(*view->getUsers().begin());
  if (!store || store.getOutput() != view.getResult())
    return nullptr;
  auto sum = cast<SumOp>(store->getParentOp());
  Value j = sum.getBody().front().getArgument(0);
  auto outsideSum = [&](Value v) { return !sum->isAncestor(v.getParentBlock()->getParentOp()); };
  if (store.getIndices().size() != view.getSizes().size() || store.getIndices().back() != j ||
      !sameExtent(sum.getBound(), view.getSizes().back()) ||
      !llvm::all_of(store.getIndices().drop_back(), outsideSum) || (store.getGuard() && !outsideSum(store.getGuard())))
    return nullptr;
  return store;
}

/// Finds the scatters and fused row stores that write `c`'s output after it; fails if a later kernel uses
/// the output otherwise.
bool collectWriters(ArrayRef<func::FuncOp> later, Candidate &c) {
  for (func::FuncOp func : later) {
    for (Operation *user : func.getArgument(c.arg).getUsers()) {
      auto view = dyn_cast<ViewOp>(user);
      Operation *writer = nullptr;
      if (view && !(writer = wholeRowScatter(view, c)))
        writer = wholeRowStore(view, c);
      if (!writer)
        return false;
      c.writers.push_back(writer);
    }
  }
  return !c.writers.empty();
}

/// `indices` (all but a domain's last) flattened over `sizes`.
Value flatten(OpBuilder &b, Location loc, ValueRange indices, ValueRange sizes) {
  Value flat = indices.front();
  for (auto [index, size] : llvm::zip(indices.drop_front(), sizes.drop_front()))
    flat = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, flat, size), index);
  return flat;
}

/// Output `k`'s covered-row bytes in the workspace, as a memref<?xi8> built at the start of `func`.
Value coveredRows(OpBuilder &b, func::FuncOp func, MutableArrayRef<Candidate> outputs, size_t k,
                  BlockArgument workspace) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&func.getBody().front());
  Location loc = func.getLoc();
  Value offset = arith::ConstantIndexOp::create(b, loc, 0);
  Value rows;
  for (size_t j = 0; j <= k; ++j) {
    ValueRange sizes = outputs[j].view.getSizes().drop_back();
    rows = rebuildExtent(b, func, sizes.front());
    for (Value size : sizes.drop_front())
      rows = arith::MulIOp::create(b, loc, rows, rebuildExtent(b, func, size));
    if (j < k) { // the next buffer starts at the next aligned offset
      Value align = arith::ConstantIndexOp::create(b, loc, kWorkspaceAlignment);
      Value end = arith::AddIOp::create(b, loc, offset, rows);
      Value up = arith::AddIOp::create(b, loc, end, arith::ConstantIndexOp::create(b, loc, kWorkspaceAlignment - 1));
      offset = arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, up, align), align);
    }
  }
  Value offset64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), offset);
  Value base = LLVM::GEPOp::create(b, loc, workspace.getType(), b.getI8Type(), workspace, ValueRange{offset64});
  auto type = MemRefType::get({ShapedType::kDynamic}, b.getI8Type());
  return ViewOp::create(b, loc, type, base, ValueRange{rows});
}

/// `covered[row] = 1` when the writer writes the row and the row is inside the output: before a scatter's
/// write, or before the op of the point's body that holds a fused row store's sum (its row and guard are
/// known there, and where the guard holds the sum runs).
void markCoveredRows(OpBuilder &b, Operation *writer, Value covered) {
  ValueRange indices;
  Value live, output;
  if (auto scatter = dyn_cast<ScatterOp>(writer)) {
    auto write = cast<WriteOp>(scatter.getBody().front().getTerminator());
    b.setInsertionPoint(write);
    indices = write.getIndices();
    live = write.getGuard();
    output = scatter.getOutput();
  } else {
    auto store = cast<RowStoreOp>(writer);
    indices = store.getIndices();
    live = store.getGuard();
    output = store.getOutput();
    Block *block = (live ? live : indices.front()).getParentBlock();
    for (Value index : indices.drop_back()) // the innermost block where the row and the guard are all known
      if (block->getParentOp()->isProperAncestor(index.getParentBlock()->getParentOp()))
        block = index.getParentBlock();
    b.setInsertionPoint(block->findAncestorOpInBlock(*store));
  }
  auto view = output.getDefiningOp<ViewOp>();
  Location loc = writer->getLoc();
  ValueRange rowIndices = indices.drop_back();
  ValueRange rowSizes = view.getSizes().drop_back();
  for (auto [index, size] : llvm::zip(rowIndices, rowSizes)) {
    Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, index, size);
    live = live ? arith::AndIOp::create(b, loc, live, inside).getResult() : inside;
  }
  auto mark = scf::IfOp::create(b, loc, live, /*withElseRegion=*/false);
  b.setInsertionPointToStart(mark.thenBlock());
  Value one = arith::ConstantIntOp::create(b, loc, 1, 8);
  memref::StoreOp::create(b, loc, one, covered, flatten(b, loc, rowIndices, rowSizes));
}

/// Replaces the fill's moe.compute by a scatter over the same domain that writes unmarked rows only.
void fillUncoveredRows(OpBuilder &b, const Candidate &c, Value covered) {
  ComputeOp compute = c.compute;
  Location loc = compute.getLoc();
  b.setInsertionPoint(compute);
  auto scatter = ScatterOp::create(b, loc, compute.getOutput(), compute.getBounds(), compute.getScheduleAttr());
  Block &from = compute.getBody().front();
  Block *body = b.createBlock(&scatter.getBody());
  IRMapping map;
  for (BlockArgument arg : from.getArguments())
    map.map(arg, body->addArgument(arg.getType(), arg.getLoc()));
  for (Operation &op : from.without_terminator())
    b.clone(op, map);
  Value value = map.lookupOrDefault(cast<YieldOp>(from.getTerminator()).getValue());
  ValueRange indices = body->getArguments();
  Value row = flatten(b, loc, indices.drop_back(), compute.getBounds().drop_back());
  Value mark = memref::LoadOp::create(b, loc, covered, ValueRange{row});
  Value zero = arith::ConstantIntOp::create(b, loc, 0, 8);
  Value uncovered = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, mark, zero);
  WriteOp::create(b, loc, value, indices, uncovered);
  compute.erase();
}

struct FillUncoveredRowsPass : impl::MoeFillUncoveredRowsBase<FillUncoveredRowsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
    SmallVector<Candidate> outputs;
    for (auto [i, func] : llvm::enumerate(funcs)) {
      std::optional<Candidate> c = asFill(func);
      if (!c || !collectWriters(ArrayRef(funcs).drop_front(i + 1), *c))
        continue;
      // Each output once; a second fill of it keeps its plain form.
      if (llvm::none_of(outputs, [&](const Candidate &o) { return o.arg == c->arg; }))
        outputs.push_back(std::move(*c));
    }
    if (outputs.empty() || module->hasAttr(MoeDialect::WorkspaceAttrHelper::getNameStr()))
      return;

    // Every kernel takes the workspace, so that all kernels of an op share one argument list.
    unsigned position = 0;
    for (BlockArgument arg : funcs.front().getArguments())
      if (isa<LLVM::LLVMPointerType>(arg.getType()))
        position = arg.getArgNumber() + 1;
    OpBuilder b(module.getContext());
    auto pointer = LLVM::LLVMPointerType::get(module.getContext());
    for (func::FuncOp func : funcs) {
      DictionaryAttr attrs = b.getDictionaryAttr(
          {b.getNamedAttr("llvm.noalias", b.getUnitAttr()),
           b.getNamedAttr(kArgRoleAttrName, ArgAttr::get(b.getContext(), ArgRole::Workspace, ""))});
      if (failed(func.insertArgument(position, pointer, attrs, func.getLoc())))
        return signalPassFailure();
    }
    for (Candidate &c : outputs)
      if (c.arg >= position)
        ++c.arg;

    SmallVector<Attribute> names;
    for (auto [k, c] : llvm::enumerate(outputs)) {
      for (Operation *writer : c.writers) {
        auto func = writer->getParentOfType<func::FuncOp>();
        markCoveredRows(b, writer, coveredRows(b, func, outputs, k, func.getArgument(position)));
      }
      fillUncoveredRows(b, c, coveredRows(b, c.fill, outputs, k, c.fill.getArgument(position)));
      c.fill->moveAfter(c.writers.back()->getParentOfType<func::FuncOp>());
      names.push_back(b.getStringAttr(c.tensor));
    }
    module->setAttr(MoeDialect::WorkspaceAttrHelper::getNameStr(), b.getArrayAttr(names));
  }
};

} // namespace
} // namespace moec::moe
