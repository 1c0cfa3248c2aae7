//===- NativeBf16Roundings.cpp - CPU: vector f32 -> bf16 by vcvtneps2bf16 --===//
//
// arith-expand-ops rounds f32 to bf16 exactly with integer ops: per 16 lanes a shift, an and, two adds,
// a shift back, a NaN compare and a masked move to the canonical NaN, then a pack (A3 with probs, whose
// rows are products rounded to bf16, spends most of its instructions there). AVX512-BF16's
// vcvtneps2bf16 rounds 16 lanes to nearest even in one instruction, but it treats subnormal inputs as
// zero and keeps a NaN's payload. A normal f32 never rounds to a subnormal bf16 (the two share their
// exponent range), so the instruction is exact for every input but those two classes.
//
// Where the host has AVX512-BF16 and AVX512-DQ, this pass (before arith-expand-ops) turns a rounding of
// vector<16k x f32> into: vfpclassps of each 16 lanes for subnormal or NaN; where no lane is one, the
// instruction, vcvtne2ps2bf16 for each 32 lanes (inline asm: the target machine leaves the feature off, see
// CPUTarget.cpp, so that LLVM never picks it for the roundings it makes itself); otherwise the exact rounding, which
// arith-expand-ops then expands. The bits are the same either way.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOENATIVEBF16ROUNDINGS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// vfpclassps classes: quiet NaN (bit 0), subnormal (bit 5), signaling NaN (bit 7).
constexpr int32_t kNanOrSubnormal = 0x01 | 0x20 | 0x80;
constexpr int64_t kLanes = 16; // one zmm of f32
constexpr llvm::StringLiteral kExactAttr = MoeDialect::ExactRoundingAttrHelper::getNameStr();

/// The roundings this pass rewrites: vector<16k x f32> to vector<16k x bf16> (k a power of two), not its own.
bool isVectorRounding(arith::TruncFOp rounding) {
  auto from = dyn_cast<VectorType>(rounding.getIn().getType());
  auto to = dyn_cast<VectorType>(rounding.getType());
  return from && to && from.getRank() == 1 && from.getElementType().isF32() && to.getElementType().isBF16() &&
         llvm::isPowerOf2_64(from.getNumElements() / kLanes) && from.getNumElements() % kLanes == 0 &&
         !rounding->hasAttr(kExactAttr);
}

void rewrite(arith::TruncFOp rounding) {
  OpBuilder b(rounding);
  Location loc = rounding.getLoc();
  Value x = rounding.getIn();
  int64_t lanes = cast<VectorType>(x.getType()).getNumElements();
  auto maskType = VectorType::get({kLanes}, b.getI1Type());
  auto bitsType = VectorType::get({kLanes}, b.getI16Type());
  SmallVector<Value> slices;
  Value special;
  Value classes = arith::ConstantIntOp::create(b, loc, kNanOrSubnormal, 32);
  for (int64_t at = 0; at < lanes; at += kLanes) {
    SmallVector<int64_t> positions;
    for (int64_t i = 0; i < kLanes; ++i)
      positions.push_back(at + i);
    Value slice = vector::ShuffleOp::create(b, loc, x, x, positions);
    slices.push_back(slice);
    Value mask = LLVM::CallIntrinsicOp::create(b, loc, maskType, b.getStringAttr("llvm.x86.avx512.fpclass.ps.512"),
                                               ValueRange{slice, classes})
                     .getResult(0);
    special = special ? arith::OrIOp::create(b, loc, special, mask).getResult() : mask;
  }
  Value any = vector::ReductionOp::create(b, loc, vector::CombiningKind::OR, special);
  auto branch = scf::IfOp::create(b, loc, rounding.getType(), any, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(branch.thenBlock());
    auto exact = arith::TruncFOp::create(b, loc, rounding.getType(), x);
    exact->setAttr(kExactAttr, b.getUnitAttr());
    scf::YieldOp::create(b, loc, exact.getResult());
    b.setInsertionPointToStart(branch.elseBlock());
    auto native = [&](Type type, ValueRange in, StringRef code, StringRef constraints) {
      return LLVM::InlineAsmOp::create(b, loc, type, in, code, constraints, /*has_side_effects=*/false,
                                       /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
                                       LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
                                       /*operand_attrs=*/ArrayAttr())
          .getResult(0);
    };
    // Two slices at a time where there are two: vcvtne2ps2bf16 rounds 32 lanes into one zmm (its last
    // operand to the low half), where two vcvtneps2bf16 and a vinserti64x4 take 5 uops on two ports.
    SmallVector<Value> parts;
    if (slices.size() == 1)
      parts.push_back(native(bitsType, slices, "vcvtneps2bf16 $1, $0", "=v,v"));
    for (size_t i = 0; i + 1 < slices.size(); i += 2)
      parts.push_back(native(VectorType::get({2 * kLanes}, b.getI16Type()), ValueRange{slices[i], slices[i + 1]},
                             "vcvtne2ps2bf16 $1, $2, $0", "=v,v,v"));
    // Concatenated pairwise by shuffles, the first slice in the lowest lanes.
    while (parts.size() > 1) {
      SmallVector<Value> joined;
      for (size_t i = 0; i < parts.size(); i += 2) {
        int64_t width = cast<VectorType>(parts[i].getType()).getNumElements();
        SmallVector<int64_t> both;
        for (int64_t j = 0; j < 2 * width; ++j)
          both.push_back(j);
        joined.push_back(vector::ShuffleOp::create(b, loc, parts[i], parts[i + 1], both));
      }
      parts = std::move(joined);
    }
    Value bits = parts.front();
    scf::YieldOp::create(b, loc, arith::BitcastOp::create(b, loc, rounding.getType(), bits).getResult());
  }
  rounding.replaceAllUsesWith(branch.getResult(0));
  rounding.erase();
}

struct NativeBf16RoundingsPass : impl::MoeNativeBf16RoundingsBase<NativeBf16RoundingsPass> {
  void runOnOperation() override {
    SmallVector<arith::TruncFOp> roundings;
    getOperation()->walk([&](arith::TruncFOp rounding) {
      if (isVectorRounding(rounding))
        roundings.push_back(rounding);
    });
    for (arith::TruncFOp rounding : roundings)
      rewrite(rounding);
    getOperation()->walk([](arith::TruncFOp rounding) { rounding->removeAttr(kExactAttr); });
  }
};

} // namespace
} // namespace moec::moe
