//===- Bf16Bits.cpp - Carry bf16 values between ops as their 16 bits -------===//
//
// The CPU lowering rounds f32 to bf16 with integer ops (arith-expand-ops), so a bf16 value is only ever
// loaded, stored, or widened and rounded through bitcasts. But the expansion picks the NaN result with an
// arith.select on bf16, and a fold that rounds after every step (C2 without mixed precision) passes its
// bf16 accumulator through scf.if results and scf.for iter_args, which become LLVM phis. x86 has no bf16
// registers without AVX512-BF16: it legalizes such a select or phi by widening every lane to f32 and
// rounding it back with a libcall per element (C2 at Mixtral ran at 0.02 of a memcpy). This pass carries
// those values as i16 of the same shape instead, with bitcasts around them that canonicalization cancels
// against the expansion's own; the bits, hence every result, are unchanged.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEBF16BITS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// The i16 type of a bf16 scalar or vector type; null for any other type.
Type bitsType(Type type) {
  if (type.isBF16())
    return IntegerType::get(type.getContext(), 16);
  if (auto vector = dyn_cast<VectorType>(type); vector && vector.getElementType().isBF16())
    return vector.clone(IntegerType::get(type.getContext(), 16));
  return Type();
}

Value toBits(OpBuilder &b, Location loc, Value v) {
  return arith::BitcastOp::create(b, loc, bitsType(v.getType()), v);
}

/// Gives `result` (a bf16 value) the i16 type; its users read it back through a bitcast.
void retypeToBits(OpBuilder &b, Value result, Type bf16Type) {
  result.setType(bitsType(bf16Type));
  auto back = arith::BitcastOp::create(b, result.getLoc(), bf16Type, result);
  result.replaceAllUsesExcept(back, back);
}

/// Each bf16 operand `i` of `terminator` goes through a bitcast to i16.
void yieldBits(OpBuilder &b, Operation *terminator, unsigned i) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(terminator);
  terminator->setOperand(i, toBits(b, terminator->getLoc(), terminator->getOperand(i)));
}

struct Bf16BitsPass : impl::MoeBf16BitsBase<Bf16BitsPass> {
  void runOnOperation() override {
    OpBuilder b(&getContext());
    getOperation()->walk([&](Operation *op) {
      if (auto select = dyn_cast<arith::SelectOp>(op)) {
        Type type = select.getType();
        if (!bitsType(type))
          return;
        b.setInsertionPoint(select);
        Location loc = select.getLoc();
        Value bits = arith::SelectOp::create(b, loc, select.getCondition(), toBits(b, loc, select.getTrueValue()),
                                             toBits(b, loc, select.getFalseValue()));
        select.replaceAllUsesWith(arith::BitcastOp::create(b, loc, type, bits).getResult());
        select.erase();
      } else if (auto branch = dyn_cast<scf::IfOp>(op)) {
        for (OpResult result : branch.getResults()) {
          Type type = result.getType();
          if (!bitsType(type))
            continue;
          yieldBits(b, branch.thenYield(), result.getResultNumber());
          yieldBits(b, branch.elseYield(), result.getResultNumber());
          b.setInsertionPointAfter(branch);
          retypeToBits(b, result, type);
        }
      } else if (auto loop = dyn_cast<scf::ForOp>(op)) {
        for (auto [i, result] : llvm::enumerate(loop.getResults())) {
          Type type = result.getType();
          if (!bitsType(type))
            continue;
          OpOperand &init = loop.getInitArgsMutable()[i];
          b.setInsertionPoint(loop);
          init.set(toBits(b, loop.getLoc(), init.get()));
          yieldBits(b, loop.getBody()->getTerminator(), i);
          b.setInsertionPointToStart(loop.getBody());
          retypeToBits(b, loop.getRegionIterArgs()[i], type);
          b.setInsertionPointAfter(loop);
          retypeToBits(b, result, type);
        }
      }
    });
  }
};

} // namespace
} // namespace moec::moe
