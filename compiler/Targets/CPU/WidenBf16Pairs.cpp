//===- WidenBf16Pairs.cpp - CPU: bf16 rows widened in place, two lanes a word --===//
//
// A loop along a row that reads bf16 and computes in f32 widens every vector it loads: LLVM's x86 code
// for `arith.extf vector<32xbf16> to vector<32xf32>` is, per 16 lanes, a vpmovzxwd (a shuffle port uop)
// and a vpslld. A 32-bit word of the row holds two bf16 values, and each is an f32 already in place: the
// high one is the word with its low half cleared, the low one the word shifted left by 16. So the row
// widens with one and and one shift per 32 lanes, loaded whole, if the lanes may come out in another
// order: the even elements in the first half of the vector, the odd ones in the second (the paired order).
//
// That is the case where everything the loop computes from the widened rows is lane-wise: arith ops
// (their vector operands all in the paired order, or the same in every lane), the loop's own carried
// values and an scf.if's results. Where a value leaves that web (a store, a reduction, a use after the
// loop), a vector.shuffle puts its lanes back in order: a bf16 row stored once per 32 lanes takes one
// vpermw. The pass pairs a loop's widened loads where they save more than those shuffles cost (2 uops a
// widened load; 1 a bf16 vector put back in order, 2 any other). Every result is the same: each lane
// computes what it did, only elsewhere in the vector.
// CPU only, before the roundings are expanded (moe-native-bf16-roundings and arith-expand-ops round the
// paired lanes as they would the others).
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEWIDENBF16PAIRS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// uops a paired widening saves (vpmovzxwd and vpslld per 16 lanes, against an and and a shift per 32).
constexpr int64_t kSavedPerWidening = 2;

/// Where natural element `i` of `lanes` lies in the paired order: the even elements, then the odd ones.
int64_t pairedPosition(int64_t i, int64_t lanes) { return i % 2 == 0 ? i / 2 : lanes / 2 + i / 2; }

/// A vector of `lanes` lanes, of rank 1.
bool hasLanes(Type type, int64_t lanes) {
  auto vector = dyn_cast<VectorType>(type);
  return vector && vector.getRank() == 1 && !vector.isScalable() && vector.getNumElements() == lanes;
}

/// A widening the pass pairs: a loaded vector<2k x bf16> (k >= 4) to f32.
bool isPairable(arith::ExtFOp extf) {
  auto from = dyn_cast<VectorType>(extf.getIn().getType());
  auto to = dyn_cast<VectorType>(extf.getType());
  return from && to && from.getRank() == 1 && !from.isScalable() && from.getElementType().isBF16() &&
         to.getElementType().isF32() && from.getNumElements() % 2 == 0 && from.getNumElements() >= 8 &&
         extf.getIn().getDefiningOp<vector::LoadOp>();
}

/// The same in every lane: a scalar (arith.select's condition), a splat constant or a broadcast scalar.
bool isUniform(Value v) {
  if (!isa<VectorType>(v.getType()))
    return true;
  if (auto broadcast = v.getDefiningOp<vector::BroadcastOp>())
    return !isa<VectorType>(broadcast.getSource().getType());
  DenseElementsAttr constant;
  return matchPattern(v, m_Constant(&constant)) && constant.isSplat();
}

/// The values computed lane-wise from a loop's paired widenings, and the uses where they leave.
struct Web {
  int64_t lanes = 0;
  SmallVector<arith::ExtFOp> widenings;
  llvm::SetVector<Value> values;
  SmallVector<OpOperand *> exits;
  /// Operands that must be in the web or uniform for the lanes to stay paired.
  SmallVector<Value> mustMatch;
};

/// Grows `web` from its widenings within `loop`; false where a value leaves it in a way the pass does not
/// follow (a yield of another region op).
bool grow(Web &web, scf::ForOp loop) {
  SmallVector<Value> worklist;
  auto add = [&](Value v) {
    if (web.values.insert(v))
      worklist.push_back(v);
  };
  for (arith::ExtFOp extf : web.widenings)
    add(extf.getResult());
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (!loop->isAncestor(user)) {
        web.exits.push_back(&use);
        continue;
      }
      if (auto yield = dyn_cast<scf::YieldOp>(user)) {
        unsigned at = use.getOperandNumber();
        Operation *parent = yield->getParentOp();
        if (auto forOp = dyn_cast<scf::ForOp>(parent)) {
          web.mustMatch.push_back(forOp.getInitArgs()[at]);
          add(forOp.getRegionIterArgs()[at]);
          add(forOp.getResult(at));
        } else if (auto ifOp = dyn_cast<scf::IfOp>(parent)) {
          for (Region *branch : {&ifOp.getThenRegion(), &ifOp.getElseRegion()})
            if (!branch->empty())
              web.mustMatch.push_back(cast<scf::YieldOp>(branch->front().getTerminator()).getOperand(at));
          add(ifOp.getResult(at));
        } else {
          return false;
        }
        continue;
      }
      bool laneWise = user->hasTrait<OpTrait::Elementwise>() && user->getNumRegions() == 0 &&
                      llvm::all_of(user->getOperandTypes(),
                                   [&](Type t) { return hasLanes(t, web.lanes) || !isa<VectorType>(t); }) &&
                      llvm::all_of(user->getResultTypes(), [&](Type t) { return hasLanes(t, web.lanes); });
      if (!laneWise) {
        web.exits.push_back(&use);
        continue;
      }
      for (Value operand : user->getOperands())
        web.mustMatch.push_back(operand);
      for (Value result : user->getResults())
        add(result);
    }
  }
  return llvm::all_of(web.mustMatch, [&](Value v) { return web.values.contains(v) || isUniform(v); });
}

/// What putting the lanes back in order costs inside the loop, per step: a vpermw for a 16-bit vector, a
/// pair of permutes for anything else.
int64_t exitCost(const Web &web, scf::ForOp loop) {
  int64_t cost = 0;
  for (OpOperand *use : web.exits)
    if (loop->isAncestor(use->getOwner()))
      cost += cast<VectorType>(use->get().getType()).getElementTypeBitWidth() == 16 ? 1 : 2;
  return cost;
}

Value paired(OpBuilder &b, arith::ExtFOp extf) {
  Location loc = extf.getLoc();
  int64_t lanes = cast<VectorType>(extf.getType()).getNumElements();
  auto words = VectorType::get({lanes / 2}, b.getI32Type());
  auto half = VectorType::get({lanes / 2}, b.getF32Type());
  Value bits = vector::BitCastOp::create(b, loc, words, extf.getIn());
  auto splat = [&](int32_t v) {
    return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(words, b.getI32IntegerAttr(v).getValue()));
  };
  Value even = arith::ShLIOp::create(b, loc, bits, splat(16));                  // the low bf16 of each word
  Value odd = arith::AndIOp::create(b, loc, bits, splat(int32_t(0xffff0000u))); // the high one
  SmallVector<int64_t> both;
  for (int64_t i = 0; i < lanes; ++i)
    both.push_back(i);
  return vector::ShuffleOp::create(b, loc, arith::BitcastOp::create(b, loc, half, even),
                                   arith::BitcastOp::create(b, loc, half, odd), both);
}

void rewrite(Web &web) {
  for (arith::ExtFOp extf : web.widenings) {
    OpBuilder b(extf);
    extf.replaceAllUsesWith(paired(b, extf));
    extf.erase();
  }
  SmallVector<int64_t> natural;
  for (int64_t i = 0; i < web.lanes; ++i)
    natural.push_back(pairedPosition(i, web.lanes));
  for (OpOperand *use : web.exits) {
    OpBuilder b(use->getOwner());
    Value v = use->get();
    use->set(vector::ShuffleOp::create(b, v.getLoc(), v, v, natural));
  }
}

struct WidenBf16PairsPass : impl::MoeWidenBf16PairsBase<WidenBf16PairsPass> {
  void runOnOperation() override {
    // The innermost loops that widen loaded bf16 rows, each with its widenings (of one width).
    llvm::MapVector<Operation *, SmallVector<arith::ExtFOp>> byLoop;
    getOperation()->walk([&](arith::ExtFOp extf) {
      if (!isPairable(extf))
        return;
      if (auto loop = extf->getParentOfType<scf::ForOp>())
        byLoop[loop].push_back(extf);
    });
    for (auto &[op, widenings] : byLoop) {
      auto loop = cast<scf::ForOp>(op);
      Web web;
      web.lanes = cast<VectorType>(widenings.front().getType()).getNumElements();
      for (arith::ExtFOp extf : widenings)
        if (cast<VectorType>(extf.getType()).getNumElements() == web.lanes)
          web.widenings.push_back(extf);
      if (!grow(web, loop) || kSavedPerWidening * int64_t(web.widenings.size()) <= exitCost(web, loop))
        continue;
      rewrite(web);
    }
  }
};

} // namespace
} // namespace moec::moe
