//===- Specialize.cpp - Bind static symbols and fold ----------------------===//
//
// 1. Parse `bind=NAME=VALUE` options.
// 2. Replace each `moe.param "NAME"` by an arith.constant of its type (index, or i1 for bool attrs); a
//    param without a binding is an error naming it.
// 3. Run the canonicalization patterns of every loaded dialect, so the constants fold through
//    arithmetic and mode conditions, and constant view sizes become static memref dims.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Transforms/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "moe-specialize"

using namespace mlir;

namespace moec::moe {
#define GEN_PASS_DEF_MOESPECIALIZE
#include "moec/compiler/Transforms/Passes.h.inc"

namespace {
struct SpecializePass : impl::MoeSpecializeBase<SpecializePass> {
  using MoeSpecializeBase::MoeSpecializeBase;

  void runOnOperation() override {
    llvm::StringMap<int64_t> values;
    for (const std::string &binding : bindings) {
      auto [name, text] = llvm::StringRef(binding).split('=');
      int64_t value;
      if (text.getAsInteger(10, value)) {
        getOperation().emitError() << "moe-specialize: bad binding '" << binding << "', expected NAME=INT";
        return signalPassFailure();
      }
      values[name] = value;
    }

    bool missing = false;
    getOperation().walk([&](ParamOp param) {
      auto it = values.find(param.getName());
      if (it == values.end()) {
        param.emitError() << "no value bound for static '" << param.getName() << "'";
        missing = true;
        return;
      }
      OpBuilder b(param);
      Value constant = param.getType().isIndex()
                           ? arith::ConstantIndexOp::create(b, param.getLoc(), it->second).getResult()
                           : arith::ConstantOp::create(b, param.getLoc(), b.getBoolAttr(it->second != 0));
      param.replaceAllUsesWith(constant);
      param.erase();
    });
    if (missing)
      return signalPassFailure();

    RewritePatternSet patterns(&getContext());
    for (Dialect *dialect : getContext().getLoadedDialects())
      dialect->getCanonicalizationPatterns(patterns);
    for (RegisteredOperationName op : getContext().getRegisteredOperations())
      op.getCanonicalizationPatterns(patterns, &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
} // namespace moec::moe
