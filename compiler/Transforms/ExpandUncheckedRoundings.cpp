//===- ExpandUncheckedRoundings.cpp - bf16 roundings without the NaN case --===//
//
// C2 without mixed precision rounds its accumulator to bf16 after every add; moe-widen-rounded-folds
// keeps it in f32 as `f32(bf16(acc + x))`. arith-expand-ops rounds with integer ops and then selects the
// canonical NaN where the sum is a NaN: on x86 a compare into a mask register and a masked move, 2 of
// the ~10 vector instructions of each step of the chain. Where moe-widen-rounded-folds marked the
// rounding (kNanUncheckedAttr: the sum of two bf16 values, read back only by the accumulator), this pass
// rounds it as arith-expand-ops does, minus the NaN select, and stays in f32:
//   bits = bitcast(y); bits + 0x7fff + ((bits >> 16) & 1), low 16 bits cleared,
// the bias chosen by a test of bit 16 (bits + 0x8000 where it is set, bits + 0x7fff where not): 4 integer
// instructions a step on x86 where the shift takes 5. C2 without mixed precision at DeepSeek-V3, its rows in
// cache, runs 3-9 % faster (bench/cpu/RESULTS.md, stop 50).
// That is arith-expand-ops' result for every non-NaN y (its `>> 16`, then extf's `<< 16`). A NaN y is
// an operand's NaN quieted or a NaN of zero payload (LLVM's rules for a NaN result; x86 gives 0xffc00000,
// AArch64 0x7fc00000), low 16 bits zero since the operands are widened bf16 values, so the bias (at
// most 0x8000) never carries out of them and the NaN comes out unchanged. The fold's
// result goes through an unmarked rounding, which turns any NaN into the canonical one: the same bits
// as with the select at every step.
// The same argument makes the rounding the identity wherever y's low 16 bits are known to be zero (a
// widened bf16 value plus zero: the first step of an unrolled fold, whose accumulator starts at 0.0);
// there the widening reads y itself and no integer op is left.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEEXPANDUNCHECKEDROUNDINGS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// `f32(bf16(y))` for f32 (or vector of f32) `y`, rounded to nearest even with integer ops, a NaN y kept.
Value roundInF32(OpBuilder &b, Location loc, Value y) {
  Type bitsType = b.getI32Type();
  if (auto vector = dyn_cast<VectorType>(y.getType()))
    bitsType = vector.clone(bitsType);
  auto constant = [&](uint32_t v) {
    TypedAttr value = b.getI32IntegerAttr(int32_t(v));
    if (auto vector = dyn_cast<VectorType>(bitsType))
      value = DenseElementsAttr::get(vector, value);
    return arith::ConstantOp::create(b, loc, value);
  };
  Value bits = arith::BitcastOp::create(b, loc, bitsType, y);
  // bits + 0x7fff + bit 16, as a choice between two biases (one instruction fewer on x86: see the header).
  Value bit16 = arith::AndIOp::create(b, loc, bits, constant(0x10000));
  Value odd = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, bit16, constant(0));
  Value biased = arith::SelectOp::create(b, loc, odd, arith::AddIOp::create(b, loc, bits, constant(0x8000)),
                                         arith::AddIOp::create(b, loc, bits, constant(0x7fff)));
  Value high = constant(0xffff0000u);
  Value rounded = arith::AndIOp::create(b, loc, biased, high);
  return arith::BitcastOp::create(b, loc, y.getType(), rounded);
}

/// Whether a constant (a scalar or a splat, float or integer) has its low 16 bits zero.
bool constantLowBitsZero(Attribute value) {
  if (auto splat = dyn_cast<SplatElementsAttr>(value))
    return constantLowBitsZero(splat.getSplatValue<Attribute>());
  if (auto scalar = dyn_cast<FloatAttr>(value))
    return (scalar.getValue().bitcastToAPInt().getZExtValue() & 0xffff) == 0;
  if (auto scalar = dyn_cast<IntegerAttr>(value))
    return (scalar.getValue().getZExtValue() & 0xffff) == 0;
  return false;
}

/// Whether every bit pattern that the 32-bit value `v` (a scalar or a vector) can take has its low 16 bits
/// zero, so that `roundInF32(v)` is `v`: widened bf16 values (arith.extf, or moe-widen-bf16-pairs' shift
/// and mask), constants, and what bitcasts, shuffles, selects, sign changes and the addition of a zero
/// make of those (a NaN result of the addition is a NaN operand quieted or the default NaN, both with
/// low 16 bits zero, as above). `depth` bounds the walk up the operands.
bool lowBitsKnownZero(Value v, unsigned depth = 12) {
  Operation *def = v.getDefiningOp();
  Type element = getElementTypeOrSelf(v.getType());
  if (!def || depth == 0 || !element.isIntOrFloat() || element.getIntOrFloatBitWidth() != 32)
    return false;
  auto known = [&](Value operand) { return lowBitsKnownZero(operand, depth - 1); };
  Attribute value;
  if (matchPattern(v, m_Constant(&value)))
    return constantLowBitsZero(value);
  if (auto widened = dyn_cast<arith::ExtFOp>(def))
    return getElementTypeOrSelf(widened.getIn().getType()).isBF16();
  if (auto shift = dyn_cast<arith::ShLIOp>(def)) {
    APInt amount;
    return matchPattern(shift.getRhs(), m_ConstantInt(&amount)) && amount.getZExtValue() >= 16 &&
           amount.getZExtValue() < 32;
  }
  if (isa<arith::AndIOp>(def))
    return known(def->getOperand(0)) || known(def->getOperand(1));
  if (isa<arith::BitcastOp, arith::NegFOp, math::AbsFOp>(def))
    return known(def->getOperand(0));
  if (auto select = dyn_cast<arith::SelectOp>(def))
    return known(select.getTrueValue()) && known(select.getFalseValue());
  if (auto shuffle = dyn_cast<vector::ShuffleOp>(def))
    return known(shuffle.getV1()) && known(shuffle.getV2());
  if (auto sum = dyn_cast<arith::AddFOp>(def))
    return (matchPattern(sum.getRhs(), m_AnyZeroFloat()) && known(sum.getLhs())) ||
           (matchPattern(sum.getLhs(), m_AnyZeroFloat()) && known(sum.getRhs()));
  return false;
}

struct ExpandUncheckedRoundingsPass : impl::MoeExpandUncheckedRoundingsBase<ExpandUncheckedRoundingsPass> {
  void runOnOperation() override {
    SmallVector<arith::TruncFOp> marked;
    getOperation()->walk([&](arith::TruncFOp rounding) {
      if (rounding->hasAttr(kNanUncheckedAttr))
        marked.push_back(rounding);
    });
    OpBuilder b(&getContext());
    for (arith::TruncFOp rounding : marked) {
      Value y = rounding.getIn();
      if (!getElementTypeOrSelf(rounding.getType()).isBF16() || !getElementTypeOrSelf(y.getType()).isF32()) {
        rounding.emitOpError("moe-expand-unchecked-roundings: marked, but not a rounding of f32 to bf16");
        return signalPassFailure();
      }
      // Its f32 readers take the rounding in f32 (y itself where that is exact); anything else keeps
      // the checked one.
      bool exact = lowBitsKnownZero(y);
      for (Operation *user : llvm::make_early_inc_range(rounding->getUsers())) {
        auto widened = dyn_cast<arith::ExtFOp>(user);
        if (!widened || widened.getType() != y.getType())
          continue;
        b.setInsertionPoint(widened);
        widened.replaceAllUsesWith(exact ? y : roundInF32(b, widened.getLoc(), y));
        widened.erase();
      }
      if (rounding->use_empty())
        rounding.erase();
      else
        rounding->removeAttr(kNanUncheckedAttr);
    }
  }
};

} // namespace
} // namespace moec::moe
