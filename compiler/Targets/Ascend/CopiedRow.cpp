//===- CopiedRow.cpp - A domain whose rows copy one streamed input row ----===//
//
// Ascend stages a row through UB buffers: a DataCopy into an input's buffer, the body over the chunk into
// the output's buffer, a DataCopy out. When the row's value is an input row unchanged (A3 without probs
// writes a token's gradient row to each of its slots), the output can go out from the input's buffer:
// half the UB per element, so double-buffered chunks of twice the length.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace moec::moe {
namespace {

/// Whether `guard` holds only where `condition` does: it is the condition, or a conjunction (arith.andi)
/// with the condition among its terms.
bool implies(Value guard, Value condition) {
  if (guard == condition)
    return true;
  auto conjunction = guard.getDefiningOp<arith::AndIOp>();
  return conjunction && (implies(conjunction.getLhs(), condition) || implies(conjunction.getRhs(), condition));
}

} // namespace

CopiedRow copiedRow(DomainOp op) {
  Block &body = op.body();
  Operation *terminator = body.getTerminator();
  Value written;
  Value guard;
  if (auto write = dyn_cast<WriteOp>(terminator)) {
    if (write.getIndices().empty() || write.getIndices().back() != body.getArguments().back())
      return {};
    written = write.getValue();
    guard = write.getGuard();
  } else if (auto yield = dyn_cast<YieldOp>(terminator)) {
    written = yield.getValue();
  } else {
    return {};
  }
  // Follow the written value to the load, through scf.if results: the branch that yields it is taken;
  // the other one's value is written only where the write's guard lets it: never (the guard implies the
  // condition), or it is a constant, which the loop along the row then stores over the staged row.
  CopiedRow copied;
  Value v = written;
  Block *block = &body;
  for (int depth = 0; depth < 8; ++depth) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != block)
      return {};
    if (auto load = dyn_cast<memref::LoadOp>(def)) {
      copied.load = load;
      break;
    }
    auto branch = dyn_cast<scf::IfOp>(def);
    if (!branch || !branch.elseBlock())
      return {};
    unsigned result = cast<OpResult>(v).getResultNumber();
    if (!guard || !implies(guard, branch.getCondition())) {
      if (!matchPattern(branch.elseYield().getOperand(result), m_Constant()))
        return {};
      copied.overwrites = true;
    }
    v = branch.thenYield().getOperand(result);
    block = branch.thenBlock();
  }
  memref::LoadOp load = copied.load;
  auto outputType = cast<MemRefType>(op.output().getType()).getElementType();
  if (!load || load.getIndices().empty() || load.getIndices().back() != body.getArguments().back() ||
      load.getType() != outputType || viewedTensorName(load.getMemRef()).empty())
    return {};
  // The only read of its tensor along the row, so its row is the one buffer copy the lowering stages.
  bool alone = true;
  op.op()->walk([&](memref::LoadOp other) {
    alone &= other == load || viewedTensorName(other.getMemRef()) != viewedTensorName(load.getMemRef()) ||
             other.getIndices().empty() || other.getIndices().back() != body.getArguments().back();
  });
  return alone ? copied : CopiedRow();
}

} // namespace moec::moe
