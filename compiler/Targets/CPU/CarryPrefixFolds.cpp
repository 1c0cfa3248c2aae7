//===- CarryPrefixFolds.cpp - CPU: a prefix fold continues from the row before ===//
//
// A3 with a routing map numbers each (token, expert) row's slot by counting the experts before it:
//   k = fold(j < e, n = 0) (routing_map[t, j] ? n + 1 : n)
// Computed afresh for every row that is E / 2 dependent steps on average: at E = 256 it cost more than
// the rows' data. On the CPU one thread runs a range of rows in order, so row (t, e) can start from the
// fold's value at row (t, e - 1) and run one step. For a row-invariant moe.fold (marked by
// moe-hoist-row-invariants) whose bound is the domain's last row index and whose init and steps depend on
// neither that index nor the contiguous one, this pass keeps the last row's outer indices, its last row
// index and the fold's value in a stack cell of the kernel function, and folds
//   steps [e - 1, e) from the kept value  when the row before ran last (same outer indices, index e - 1),
//   steps [0, e) from init                 otherwise (the first row of a range).
// The same holds along a row that runs one element at a time (vector width 1): A3's probs_grad is a row
// per token over e < E, and a fold over j < e there continues from element e - 1.
// The steps run in the same order on the same values: results are bit-identical. On the GPU rows run in
// parallel (a row of points computes such a fold as a warp-wide scan: moe-lane-point-access).
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"

#define DEBUG_TYPE "moe-carry-prefix-folds"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOECARRYPREFIXFOLDS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// Whether anything in `op` (operands, nested ops) uses one of `values`.
bool usesAny(Operation *op, const DenseSet<Value> &values) {
  bool found = false;
  op->walk([&](Operation *nested) {
    for (Value v : nested->getOperands())
      found |= values.contains(v);
  });
  return found;
}

/// A fold to carry, and the domain index its bound is: the last row index, or the contiguous one when the
/// row runs one element at a time (then the elements of a row run in order too).
struct Carriable {
  FoldOp fold;
  unsigned position;
};

/// The folds of `domain` this pass can carry from one row (or element) to the next.
SmallVector<Carriable> carriableFolds(DomainOp domain) {
  Block &body = domain.body();
  SmallVector<Carriable> folds;
  unsigned contiguous = body.getNumArguments() - 1;
  SmallVector<unsigned> positions;
  if (contiguous > 0)
    positions.push_back(contiguous - 1);
  if (domain.schedule() && domain.schedule().getVector() == 1)
    positions.push_back(contiguous);
  for (unsigned position : positions) {
    Value index = body.getArgument(position);
    // Values that change with the position index or along the row.
    DenseSet<Value> varying = valuesAlongRow(domain);
    varying.insert(index);
    for (Operation &op : body.without_terminator()) {
      bool depends = usesAny(&op, varying);
      auto fold = dyn_cast<FoldOp>(&op);
      bool rowInvariant = fold && fold->hasAttr(kRowInvariantAttr);
      // A count that a list of live points gives (moe-compact-predicated-points) is not computed at all.
      if (fold && fold.getBound() == index && (position == contiguous || rowInvariant) &&
          !fold->hasAttr(kLiveRankAttr) && !varying.contains(fold.getInit())) {
        // Its steps may use the fold's own index and accumulator, nothing that varies with the position.
        bool steps = llvm::any_of(fold.getBody().front().getOperations(),
                                  [&](Operation &step) { return usesAny(&step, varying); });
        if (!steps)
          folds.push_back({fold, position});
      }
      if (depends)
        for (Value result : op.getResults())
          varying.insert(result);
    }
  }
  return folds;
}

/// Rewrites `fold` to continue from the previous point's value when that point was (outer..., e - 1), e
/// the index at `position`.
void carry(OpBuilder &b, func::FuncOp func, DomainOp domain, FoldOp fold, unsigned position) {
  Location loc = fold.getLoc();
  Block &body = domain.body();
  unsigned keptDims = position + 1; // the indices kept: the domain's up to the position
  Type type = fold.getType();
  // The cell, per call of the kernel (so per thread's range of rows): the last row's indices, then the
  // fold's value there. Index -1 matches no row.
  Value rows, value;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&func.getBody().front());
    rows = memref::AllocaOp::create(b, loc, MemRefType::get({int64_t(keptDims)}, b.getIndexType()));
    value = memref::AllocaOp::create(b, loc, MemRefType::get({1}, type));
    Value none = arith::ConstantIndexOp::create(b, loc, -1);
    for (unsigned d = 0; d < keptDims; ++d)
      memref::StoreOp::create(b, loc, none, rows, ValueRange{arith::ConstantIndexOp::create(b, loc, d)});
  }

  b.setInsertionPoint(fold);
  SmallVector<Operation *> added;
  auto mark = [&](Value v) {
    added.push_back(v.getDefiningOp());
    return v;
  };
  auto cst = [&](int64_t v) { return mark(arith::ConstantIndexOp::create(b, loc, v)); };
  Value e = body.getArgument(keptDims - 1);
  Value previous = mark(arith::SubIOp::create(b, loc, e, cst(1)));
  Value continues = mark(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, e, cst(0)));
  for (unsigned d = 0; d < keptDims; ++d) {
    Value kept = mark(memref::LoadOp::create(b, loc, rows, ValueRange{cst(d)}));
    Value expected = d + 1 == keptDims ? previous : body.getArgument(d);
    Value same = mark(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, kept, expected));
    continues = mark(arith::AndIOp::create(b, loc, continues, same));
  }
  Value keptValue = mark(memref::LoadOp::create(b, loc, value, ValueRange{cst(0)}));
  // The row before ran last: its one step, j = e - 1, inline (no loop to enter); otherwise every step.
  auto carried = scf::IfOp::create(b, loc, TypeRange{type}, continues, /*withElseRegion=*/true);
  added.push_back(carried);
  Block &from = fold.getBody().front();
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(carried.thenBlock());
    IRMapping step;
    step.map(from.getArgument(0), previous);
    step.map(from.getArgument(1), keptValue);
    for (Operation &op : from.without_terminator())
      b.clone(op, step);
    scf::YieldOp::create(b, loc, step.lookupOrDefault(from.getTerminator()->getOperand(0)));
    b.setInsertionPointToStart(carried.elseBlock());
    Operation *whole = b.clone(*fold);
    whole->removeAttr(kRowInvariantAttr);
    scf::YieldOp::create(b, loc, whole->getResult(0));
  }
  for (unsigned d = 0; d < keptDims; ++d)
    added.push_back(memref::StoreOp::create(b, loc, body.getArgument(d), rows, ValueRange{cst(d)}));
  added.push_back(memref::StoreOp::create(b, loc, carried.getResult(0), value, ValueRange{cst(0)}));
  if (fold->hasAttr(kRowInvariantAttr))
    for (Operation *op : added)
      op->setAttr(kRowInvariantAttr, b.getUnitAttr());
  fold.getResult().replaceAllUsesWith(carried.getResult(0));
  fold.erase();
}

struct CarryPrefixFoldsPass : impl::MoeCarryPrefixFoldsBase<CarryPrefixFoldsPass> {
  void runOnOperation() override {
    OpBuilder b(&getContext());
    for (auto func : getOperation().getOps<func::FuncOp>())
      for (DomainOp domain : collectDomainOps(func))
        for (auto [fold, position] : carriableFolds(domain))
          carry(b, func, domain, fold, position);
  }
};

} // namespace
} // namespace moec::moe
