//===- ErrorPaths.cpp - Which branches report a failed check ---------------===//
#include "moec/compiler/Dialect/MoeDialect.h"
#include "moec/compiler/Transforms/ErrorPaths.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace moec::moe {

FunctionOpInterface kernelArgumentOwner(BlockArgument arg) {
  auto func = arg ? dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp()) : nullptr;
  if (!func || arg.getOwner() != &func.getFunctionBody().front() || arg.getArgNumber() >= func.getNumArguments())
    return nullptr;
  return func;
}

bool viewsReadOnlyTensor(Value memref) {
  auto view = memref.getDefiningOp<ViewOp>();
  auto arg = view ? dyn_cast<BlockArgument>(view.getPtr()) : nullptr;
  auto func = kernelArgumentOwner(arg);
  return func && func.getArgAttr(arg.getArgNumber(), "llvm.readonly");
}

bool isStatus(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (def->getNumOperands() == 0)
      return false;
    v = def->getOperand(0);
  }
  auto arg = dyn_cast<BlockArgument>(v);
  auto func = kernelArgumentOwner(arg);
  ArgAttr role = func ? argRole(func, arg.getArgNumber()) : nullptr;
  return role && role.getRole() == ArgRole::Status;
}

bool reportsError(Region &region) {
  return !region.empty() && llvm::any_of(region.front(), [](Operation &op) {
    auto store = dyn_cast<memref::StoreOp>(op);
    return store && isStatus(store.getMemref());
  });
}

bool isCheckCondition(Value condition) {
  return llvm::any_of(condition.getUsers(), [&](Operation *user) {
    auto branch = dyn_cast<scf::IfOp>(user);
    return branch && branch.getCondition() == condition && reportsError(branch.getElseRegion());
  });
}

} // namespace moec::moe
