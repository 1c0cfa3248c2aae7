//===- WidenRoundedFolds.cpp - Carry a narrow accumulator as f32 ----------===//
//
// A fold that accumulates in f16 or bf16 (C2 without mixed precision: `T(f32(acc) + f32(x))`) widens its
// accumulator at the start of every step and rounds it back at the end. Carried in T, every step pays
// for both conversions in its dependency chain: on x86 a pack and an unpack of the 16-bit lanes, and a
// masked load of the NaN pattern. This pass carries the accumulator as f32 instead, always holding the
// exact value of the T one: `f32(acc)` becomes the f32 accumulator itself, and the yielded value
// `T(y)` becomes `f32(T(y))` (a rounding that stays in f32 registers: integer add and mask). A branch that
// yields the accumulator or a rounded value is widened through. The fold's result is rounded to T once,
// after it. Every value is the same, so every result is. (MoePasses.td has a before and after.)
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

#define DEBUG_TYPE "moe-widen-rounded-folds"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEWIDENROUNDEDFOLDS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

bool isNarrowFloat(Type t) { return isa<BFloat16Type, Float16Type>(t); }

/// Whether `v` is widened to f32 somewhere: the fold gains from carrying it wide.
bool widenedOnUse(Value v) {
  return llvm::any_of(v.getUsers(), [](Operation *user) {
    auto widen = dyn_cast<arith::ExtFOp>(user);
    return widen && widen.getType().isF32();
  });
}

/// Rewrites one fold. `narrow` is the step's T view of the accumulator, `wide` the f32 one.
class Widener {
public:
  Widener(Value narrow, Value wide) : narrow(narrow), wide(wide) {}
  /// Drops the roundings of widened branches that nothing reads (the yield now reads the wide value).
  ~Widener() {
    for (arith::TruncFOp rounded : roundings)
      if (rounded->use_empty())
        rounded.erase();
  }

  /// An f32 value equal to f32(v), for a T value `v` of the step, made at v's definition.
  Value widen(Value v) {
    if (v == narrow)
      return wide;
    Operation *def = v.getDefiningOp();
    if (auto branch = dyn_cast_or_null<scf::IfOp>(def); branch && branch.getNumResults() == 1 && branch.elseBlock())
      return widenBranch(branch);
    OpBuilder b(v.getContext());
    if (def)
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
    return arith::ExtFOp::create(b, v.getLoc(), b.getF32Type(), v);
  }

private:
  /// An scf.if with one T result: the same branches yielding f32; other users of the T result read it
  /// rounded back.
  Value widenBranch(scf::IfOp branch) {
    OpBuilder b(branch);
    auto wideBranch = scf::IfOp::create(b, branch.getLoc(), TypeRange{b.getF32Type()}, branch.getCondition(),
                                        /*withElseRegion=*/true);
    for (auto [from, to] : {std::pair(&branch.getThenRegion(), &wideBranch.getThenRegion()),
                            std::pair(&branch.getElseRegion(), &wideBranch.getElseRegion())}) {
      to->front().erase();
      to->takeBody(*from);
      auto yield = cast<scf::YieldOp>(to->front().getTerminator());
      yield->setOperand(0, widen(yield->getOperand(0)));
    }
    b.setInsertionPointAfter(wideBranch);
    auto rounded = arith::TruncFOp::create(b, branch.getLoc(), branch.getResult(0).getType(), wideBranch.getResult(0));
    branch.getResult(0).replaceAllUsesWith(rounded.getResult());
    roundings.push_back(rounded);
    branch.erase();
    return wideBranch.getResult(0);
  }

  Value narrow, wide;
  SmallVector<arith::TruncFOp> roundings;
};

/// Whether `v`, an f32 value of a widened bf16 fold's step, has its low 16 bits zero whatever it is (a NaN
/// included): the step's accumulator (it only ever holds bf16 values, widened) or a widened bf16 value.
bool holdsBf16(Value v, Value wide) {
  if (v == wide)
    return true;
  auto widen = v.getDefiningOp<arith::ExtFOp>();
  return widen && widen.getIn().getType().isBF16();
}

/// unchecked-roundings: marks each rounding of `step` (a widened bf16 fold's) that rounds the sum of two
/// bf16 values and only feeds the accumulator, `T(a + b)` read back as f32 by yields alone. A NaN sum of
/// such values keeps its low 16 bits zero, so rounding it without the NaN case keeps it a NaN, and the
/// fold's result is rounded with the NaN case (moe-expand-unchecked-roundings).
void markUncheckedRoundings(Block &step, Value wide) {
  step.walk([&](arith::TruncFOp rounding) {
    auto sum = rounding.getIn().getDefiningOp<arith::AddFOp>();
    if (!rounding.getType().isBF16() || rounding.getRoundingmodeAttr() || !sum || !sum.getType().isF32() ||
        !holdsBf16(sum.getLhs(), wide) || !holdsBf16(sum.getRhs(), wide) || !rounding->hasOneUse())
      return;
    auto widened = dyn_cast<arith::ExtFOp>(*rounding->getUsers().begin());
    if (!widened || !widened.getType().isF32() ||
        !llvm::all_of(widened->getUsers(), [](Operation *user) { return isa<YieldOp, scf::YieldOp>(user); }))
      return;
    rounding->setAttr(kNanUncheckedAttr, UnitAttr::get(rounding.getContext()));
  });
}

void widenFold(FoldOp fold, bool uncheckedRoundings) {
  Location loc = fold.getLoc();
  Type narrowType = fold.getResult().getType();
  OpBuilder b(fold);
  Value init = arith::ExtFOp::create(b, loc, b.getF32Type(), fold.getInit());
  auto wideFold = FoldOp::create(b, loc, b.getF32Type(), fold->getOperand(0), init);
  Block &oldStep = fold.getBody().front();
  Block *step = b.createBlock(&wideFold.getBody(), {}, {b.getIndexType(), b.getF32Type()}, {loc, loc});
  Value wide = step->getArgument(1);
  // The step's T view of the accumulator, for what reads it other than a widening.
  auto narrow = arith::TruncFOp::create(b, loc, narrowType, wide);
  step->getOperations().splice(step->end(), oldStep.getOperations());
  oldStep.getArgument(0).replaceAllUsesWith(step->getArgument(0));
  oldStep.getArgument(1).replaceAllUsesWith(narrow.getResult());

  auto yield = cast<YieldOp>(step->getTerminator());
  yield->setOperand(0, Widener(narrow.getResult(), wide).widen(yield->getOperand(0)));
  // f32(T(acc)) is acc: the f32 accumulator only ever holds values of T.
  for (Operation *user : llvm::make_early_inc_range(narrow->getUsers()))
    if (auto widen = dyn_cast<arith::ExtFOp>(user); widen && widen.getType().isF32()) {
      widen.getResult().replaceAllUsesWith(wide);
      widen.erase();
    }
  if (narrow->use_empty())
    narrow.erase();
  if (uncheckedRoundings && narrowType.isBF16())
    markUncheckedRoundings(*step, wide);

  b.setInsertionPointAfter(wideFold);
  Value result = arith::TruncFOp::create(b, loc, narrowType, wideFold.getResult());
  fold.getResult().replaceAllUsesWith(result);
  fold.erase();
}

struct WidenRoundedFoldsPass : impl::MoeWidenRoundedFoldsBase<WidenRoundedFoldsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<FoldOp> folds;
    getOperation()->walk([&](FoldOp fold) {
      if (isNarrowFloat(fold.getResult().getType()) && widenedOnUse(fold.getBody().front().getArgument(1)))
        folds.push_back(fold);
    });
    for (FoldOp fold : folds)
      widenFold(fold, uncheckedRoundings);
  }
};

} // namespace
} // namespace moec::moe
