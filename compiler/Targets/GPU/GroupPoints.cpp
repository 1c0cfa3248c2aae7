//===- GroupPoints.cpp - GPU: a row of points whose dot products share a row ---===//
//
// A point kernel (a dot product over H per domain point, runsPerPoint) runs a warp per point on the GPU.
// A3 with probs computes, for each (token t, expert e), sum(j < H) permuted_tokens[row, j] * grad[t, j]:
// the K live experts of a token each read the token's gradient row again (K reads of it per token, K = 8
// at DeepSeek-V3's shapes, where the op's minimum traffic reads it once).
//
// This pass marks such a kernel `moe.point_rows` when a term of its dot product loads along the sum's
// index through indices that do not depend on the point's last index (grad[t, j]: a row shared by the
// row's points). moe-lower-to-gpu then runs a row of points (outer..., every e) per warp: the warp walks
// the points in order, a live point's dot product waits until a batch of them have (the pass's `batch`, the
// mark's value), and those run
// together in one loop along j, the shared row loaded once per vector for all of them
// (emitWarpPointRow). Each point's partial sums add the same terms in the same order: the results are
// bit-identical to a warp per point.
//
// The shared row may depend on the point through a few integers computed at the top of the body, its keys
// (marked `moe.group_key`): A3's drop-and-pad probs_grad runs over slots i and reads token
// permute_token_id[i]'s row, and the forward op orders a token's slots one after another. A batch then
// holds points of one key, and a one-dim domain runs as runs of kPointRunLength (8) points, a warp each. A key
// loaded from a tensor declared `unique` never repeats: a term that needs one is not shared.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"
#include "moec/contracts/Schedule.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "moe-group-points"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOEGROUPPOINTS
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {

/// Whether `v` is (a cast of) a value loaded from a tensor declared `unique`, or an scf.if that yields
/// one or a constant (a checked load, -1 where the check fails): no two live points share it.
bool loadedFromUniqueTensor(Value v) {
  while (auto cast = v.getDefiningOp<arith::IndexCastOp>())
    v = cast.getIn();
  if (auto ifOp = v.getDefiningOp<scf::IfOp>()) {
    unsigned n = cast<OpResult>(v).getResultNumber();
    bool unique = false;
    for (Block *block : {ifOp.thenBlock(), ifOp.elseBlock()}) {
      Value yielded = block ? block->getTerminator()->getOperand(n) : Value();
      if (yielded && !matchPattern(yielded, m_Constant())) {
        if (!loadedFromUniqueTensor(yielded))
          return false;
        unique = true;
      }
    }
    return unique;
  }
  auto load = v.getDefiningOp<memref::LoadOp>();
  auto view = load ? load.getMemRef().getDefiningOp<ViewOp>() : ViewOp();
  auto arg = view ? dyn_cast<BlockArgument>(view.getPtr()) : BlockArgument();
  auto func = arg ? dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp()) : FunctionOpInterface();
  return func && func.getArgAttr(arg.getArgNumber(), kUniqueArgAttrName);
}

/// At most this many keys: each is compared for every live point.
constexpr size_t kMaxKeys = 4;

/// The keys through which a term of `sum` that loads along the sum's index depends on the point, for the
/// term with the fewest keys whose loads the points of a row can share: none when it does not depend on the point's last
/// index at all (grad[t, j]), or a few integers computed at the top of the body from the point (A3's
/// drop-and-pad grad[tok, j], tok = permute_token_id[i]: consecutive slots of a token share it). A key
/// loaded from a `unique` tensor never repeats: terms that need one are not shared. Nothing when no term
/// qualifies.
std::optional<SetVector<Operation *>> sharedRowKeys(DomainOp domain, SumOp sum) {
  Block &body = domain.body();
  // The values that depend on the point: an op's results do when it or an op nested in it uses one.
  DenseSet<Value> fromPoint{body.getArguments().back()};
  for (bool changed = true; changed;) {
    changed = false;
    body.walk([&](Operation *op) {
      bool uses = false;
      op->walk([&](Operation *inner) {
        uses |= llvm::any_of(inner->getOperands(), [&](Value v) { return fromPoint.contains(v); });
      });
      if (uses)
        for (Value r : op->getResults())
          changed |= fromPoint.insert(r).second;
    });
  }
  Block &terms = sum.getBody().front();
  Value j = terms.getArgument(0);
  // The keys a top-level op of the sum's body takes from the point (nullopt: it takes more than keys).
  DenseMap<Operation *, std::optional<SetVector<Operation *>>> keysOf;
  for (Operation &op : terms.without_terminator()) {
    std::optional<SetVector<Operation *>> keys = SetVector<Operation *>();
    op.walk([&](Operation *inner) {
      for (Value v : inner->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!keys || !fromPoint.contains(v) || (def && op.isAncestor(def)))
          continue;
        if (def && def->getBlock() == &terms && keysOf.count(def) && keysOf[def]) {
          keys->insert(keysOf[def]->begin(), keysOf[def]->end());
        } else if (def && def->getBlock() == &body && def->getNumResults() == 1 && v.getType().isIntOrIndex() &&
                   !loadedFromUniqueTensor(v)) {
          keys->insert(def);
        } else {
          keys = std::nullopt;
        }
      }
    });
    keysOf[&op] = keys && keys->size() <= kMaxKeys ? keys : std::nullopt;
  }
  // The term with the fewest keys (none: a row all the points read).
  std::optional<SetVector<Operation *>> best;
  for (Operation &op : terms.without_terminator()) {
    bool loadsAlong = false;
    op.walk([&](memref::LoadOp load) {
      loadsAlong |= !load.getIndices().empty() && load.getIndices().back() == j;
    });
    if (loadsAlong && keysOf[&op] && (!best || keysOf[&op]->size() < best->size()))
      best = keysOf[&op];
  }
  return best;
}

struct GroupPointsPass : impl::MoeGroupPointsBase<GroupPointsPass> {
  using MoeGroupPointsBase::MoeGroupPointsBase;
  void runOnOperation() override {
    if (batch < 2 || batch > 32 || !llvm::isPowerOf2_64(batch)) {
      getOperation().emitError("moe-group-points: batch must be a power of two from 2 to 32, got ") << int64_t(batch);
      return signalPassFailure();
    }
    for (DomainOp domain : collectDomainOps(getOperation())) {
      ScheduleAttr schedule = domain.schedule();
      if (!schedule || schedule.getThreads() != kWarpSize ||
          gpuMapping(domain) != GpuMapping::WarpPerPoint || !pointsCanInterleave(domain, /*minRowBytes=*/0))
        continue;
      std::optional<SetVector<Operation *>> keys = sharedRowKeys(domain, contiguousReductionOf(domain));
      if (!keys)
        continue;
      domain.op()->setAttr(kPointRowsAttr, IntegerAttr::get(IntegerType::get(&getContext(), 64), batch));
      for (Operation *key : *keys)
        key->setAttr(kGroupKeyAttr, UnitAttr::get(&getContext()));
    }
  }
};
} // namespace
} // namespace moec::moe
