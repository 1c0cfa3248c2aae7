//===- MoeGen.cpp - AST to the moe dialect --------------------------------===//
//
// Every assignment becomes one kernel function, emitted from the path of statements that leads to it:
//   1. arguments: tensor pointers, runtime dims, runtime attrs (the lean ABI, see MoeGen.h);
//   2. statements outside any `for`: lets become values, `if`s an scf.if around what follows (or
//      nothing, when present() decides the branch here);
//   3. an assignment outside a `for` is a dense `moe.compute` over its target; one inside is a
//      `moe.scatter` over the for-variables plus the target dims it names freshly, whose body evaluates
//      the lets and ifs inside the `for` (each `if` an scf.if yielding the value, the written indices and
//      whether the write happens) and ends in `moe.write`;
//   4. static dims/attrs become `moe.param` and tensors `moe.view`, on first use, at the function entry.
// Expressions map one to one onto arith/math/memref/scf ops; a `c ? a : b` whose branches read memory
// becomes an scf.if, so a skipped row is never read.
//
// This file: the kernel's function, its statements and stores (KernelEmitter, KernelEmitter.h), and genMoe.
// Expressions are in ExpressionGen.cpp, bounds and division checks in BoundsChecks.cpp.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Frontend/MoeGen.h"
#include "KernelEmitter.h"

#include "moec/compiler/Dialect/MoeDialect.h"
#include "moec/dsl/Eval.h"
#include "moec/dsl/KernelPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"

#include <cstdint>
#include <map>
#include <optional>

using namespace mlir;
using namespace moec::dsl;

namespace moec::detail {

Type floatType(MLIRContext *ctx, DType t) {
  switch (t) {
  case DType::F16: return Float16Type::get(ctx);
  case DType::BF16: return BFloat16Type::get(ctx);
  default: return Float32Type::get(ctx);
  }
}

Type storageType(MLIRContext *ctx, DType t) {
  switch (t) {
  case DType::I32: return IntegerType::get(ctx, 32);
  case DType::I8:
  case DType::Bool: return IntegerType::get(ctx, 8);
  default: return floatType(ctx, t);
  }
}

bool readsMemory(const Expr &e) {
  if (e.kind == ExprKind::Element || e.kind == ExprKind::Sum || e.kind == ExprKind::Fold)
    return true;
  for (const ExprPtr &operand : e.operands)
    if (readsMemory(*operand))
      return true;
  for (const Let &let : e.lets)
    if (readsMemory(*let.value))
      return true;
  return false;
}

std::string where(const SourceLoc &l) {
  if (!l.known())
    return "";
  return l.file->path + ":" + std::to_string(l.line) + ":" + std::to_string(l.col) + ": ";
}

std::optional<bool> KernelEmitter::staticCondition(const Expr &e) const { return decide(e, known); }

void KernelEmitter::emit(ModuleOp module, const PlannedKernel &path) {
  const Assign &assign = *path.assign;
  createFunction(module, path.name, assign.loc);
  needed = neededNames(path);
  scopes.emplace_back();

  // Outside any `for`: lets, and ifs that wrap what follows.
  size_t pos = 0;
  for (; pos < path.path.size() && !path.path[pos].forStmt; ++pos) {
    const PathStep &step = path.path[pos];
    if (step.let) {
      emitLet(*step.let);
      continue;
    }
    if (staticCondition(*step.ifStmt->cond))
      continue; // decided by present(); the planner kept only the taken branch
    Value cond = emitCondition(*step.ifStmt->cond, step.thenBranch);
    auto ifOp = scf::IfOp::create(b, loc(step.ifStmt->loc), cond, /*withElseRegion=*/false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  }

  if (path.scatter)
    emitScatter(path, pos);
  else
    emitCompute(assign);
  if (statusView) { // two int64 per check, its size created before the view (the IR verifies as genMoe leaves it)
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(statusView);
    statusView->setOperand(1, constIndex(2 * int64_t(checks.size())));
  }
}

std::set<std::string> KernelEmitter::neededNames(const PlannedKernel &path) const {
  std::set<std::string> names;
  collectNames(*path.assign->value, names);
  for (const ExprPtr &index : path.assign->indexExprs)
    if (index)
      collectNames(*index, names);
  if (path.fusedRows) { // its value, row indices and conditions read the shared lets too
    const FusedRows &f = *path.fusedRows;
    collectNames(*f.assign->value, names);
    for (const ExprPtr &index : f.assign->indexExprs)
      if (index)
        collectNames(*index, names);
    for (size_t i = f.guardFrom; i < f.path.size(); ++i)
      if (!staticCondition(*f.path[i].ifStmt->cond))
        collectNames(*f.path[i].ifStmt->cond, names);
  }
  for (auto step = path.path.rbegin(); step != path.path.rend(); ++step) {
    if (step->let && names.count(step->let->name))
      collectNames(*step->let->value, names);
    if (step->ifStmt && !staticCondition(*step->ifStmt->cond))
      collectNames(*step->ifStmt->cond, names);
    if (step->forStmt)
      for (const ExprPtr &bound : step->forStmt->bounds)
        collectNames(*bound, names);
  }
  return names;
}

void KernelEmitter::collectNames(const Expr &e, std::set<std::string> &names) const {
  if (e.kind == ExprKind::Name)
    names.insert(e.name);
  if (e.kind == ExprKind::Select)
    if (std::optional<bool> known = staticCondition(*e.operands[0])) {
      collectNames(*e.operands[*known ? 1 : 2], names);
      return;
    }
  for (const ExprPtr &o : e.operands)
    collectNames(*o, names);
  for (const Let &let : e.lets)
    collectNames(*let.value, names);
}

void KernelEmitter::emitLet(const Let &let) {
  if (needed.count(let.name))
    scopes.back()[let.name] = emitExpr(*let.value);
}

Location KernelEmitter::loc(const SourceLoc &l) {
  if (!l.known())
    return b.getUnknownLoc();
  return FileLineColLoc::get(b.getStringAttr(l.file->path), l.line, l.col);
}

void KernelEmitter::createFunction(ModuleOp module, const std::string &name, const SourceLoc &at) {
  MLIRContext *ctx = b.getContext();
  auto ptrType = LLVM::LLVMPointerType::get(ctx);
  SmallVector<Type> argTypes;
  SmallVector<moe::ArgAttr> argRoles;
  for (const TensorDecl &t : op.tensors) {
    argTypes.push_back(ptrType);
    argRoles.push_back(moe::ArgAttr::get(ctx, moe::ArgRole::Tensor, t.name));
  }
  argTypes.push_back(ptrType);
  argRoles.push_back(moe::ArgAttr::get(ctx, moe::ArgRole::Status, ""));
  for (const DimDecl &d : op.dims)
    if (!d.isStatic) {
      argTypes.push_back(b.getIndexType());
      argRoles.push_back(moe::ArgAttr::get(ctx, moe::ArgRole::Dim, d.name));
    }
  for (const AttrDecl &a : op.attrs)
    if (!a.isStatic) {
      argTypes.push_back(b.getIndexType());
      argRoles.push_back(moe::ArgAttr::get(ctx, moe::ArgRole::Attr, a.name));
    }
  b.setInsertionPointToEnd(module.getBody());
  func = func::FuncOp::create(b, loc(at), name, b.getFunctionType(argTypes, {}));
  for (auto [i, role] : llvm::enumerate(argRoles))
    func.setArgAttr(i, moe::kArgRoleAttrName, role);
  // Tensors never alias (the runtime checks outputs against every other tensor at launch), and inputs are
  // only read: LLVM may then keep loads across stores, vectorize without runtime alias checks, and on the
  // GPU read inputs through the non-coherent cache (ld.global.nc).
  for (auto [i, t] : llvm::enumerate(op.tensors)) {
    func.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(), b.getUnitAttr());
    if (!t.isOutput)
      func.setArgAttr(i, LLVM::LLVMDialect::getReadonlyAttrName(), b.getUnitAttr());
    if (t.unique) // its values never repeat: nothing keyed on one is shared (moe-group-points)
      func.setArgAttr(i, moe::kUniqueArgAttrName, b.getUnitAttr());
  }
  func.setArgAttr(op.tensors.size(), LLVM::LLVMDialect::getNoAliasAttrName(), b.getUnitAttr()); // status
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  // Parameters and views are created on first use, before this anchor, so they dominate everything.
  anchor = arith::ConstantIndexOp::create(b, b.getUnknownLoc(), 0);
  b.setInsertionPoint(func::ReturnOp::create(b, loc(at)));
}

unsigned KernelEmitter::statusArgIndex() const { return op.tensors.size(); }

unsigned KernelEmitter::runtimeArgIndex(const std::string &name, bool isDim) {
  unsigned arg = statusArgIndex() + 1;
  for (const DimDecl &d : op.dims)
    if (!d.isStatic) {
      if (isDim && d.name == name)
        return arg;
      ++arg;
    }
  for (const AttrDecl &a : op.attrs)
    if (!a.isStatic) {
      if (!isDim && a.name == name)
        return arg;
      ++arg;
    }
  llvm_unreachable("not a runtime symbol");
}

Value KernelEmitter::dimValue(const DimDecl &d) {
  Value &v = symbols["dim:" + d.name];
  if (!v)
    v = d.isStatic ? atEntry([&] { return moe::ParamOp::create(b, loc(d.loc), b.getIndexType(), d.name).getResult(); })
                   : Value(func.getArgument(runtimeArgIndex(d.name, true)));
  return v;
}

Value KernelEmitter::attrValue(const AttrDecl &a) {
  Value &v = symbols["attr:" + a.name];
  if (v)
    return v;
  Type type = a.isBool ? Type(b.getI1Type()) : Type(b.getIndexType());
  v = atEntry([&]() -> Value {
    if (a.isStatic)
      return moe::ParamOp::create(b, loc(a.loc), type, a.name);
    Value arg = func.getArgument(runtimeArgIndex(a.name, false));
    if (!a.isBool)
      return arg;
    // Runtime bools travel as index 0/1.
    return arith::CmpIOp::create(b, loc(a.loc), arith::CmpIPredicate::ne, arg,
                                 arith::ConstantIndexOp::create(b, loc(a.loc), 0));
  });
  return v;
}

Value KernelEmitter::view(int tensorIndex, const SourceLoc &use) {
  const TensorDecl &t = op.tensors[tensorIndex];
  if (t.optional && !present.count(t.name))
    throw GenError(where(use) + "'" + t.name + "' is an optional tensor that is not present here; guard the " +
                   "use with present(" + t.name + ")");
  Value &v = views[tensorIndex];
  if (!v)
    v = atEntry([&]() -> Value {
      SmallVector<Value> sizes;
      for (const ShapeDim &d : t.shape)
        sizes.push_back(emitExpr(*d.size));
      SmallVector<int64_t> shape(sizes.size(), ShapedType::kDynamic);
      auto type = MemRefType::get(shape, storageType(b.getContext(), t.elem.resolve(typeArg)));
      return moe::ViewOp::create(b, loc(t.loc), type, func.getArgument(tensorIndex), sizes);
    });
  return v;
}

Value KernelEmitter::constIndex(int64_t v) { return arith::ConstantIndexOp::create(b, b.getUnknownLoc(), v); }

Value KernelEmitter::emitCondition(const Expr &cond, bool value) {
  Value c = emitExpr(cond);
  if (value)
    return c;
  return arith::XOrIOp::create(b, c.getLoc(), c, arith::ConstantOp::create(b, c.getLoc(), b.getBoolAttr(true)));
}

Value KernelEmitter::toStorage(Value v, Type elem, Location l) {
  if (v.getType() == elem)
    return v;
  if (isa<FloatType>(elem))
    return arith::TruncFOp::create(b, l, elem, v);
  if (v.getType().isInteger(1))
    return arith::ExtUIOp::create(b, l, elem, v);
  return arith::IndexCastOp::create(b, l, elem, v);
}

Type KernelEmitter::elementType(const Assign &assign) {
  return storageType(b.getContext(), op.tensors[assign.tensorIndex].elem.resolve(typeArg));
}

void KernelEmitter::emitCompute(const Assign &assign) {
  const TensorDecl &t = op.tensors[assign.tensorIndex];
  Value out = view(assign.tensorIndex, assign.loc);
  SmallVector<Value> bounds;
  for (const ShapeDim &d : t.shape)
    bounds.push_back(emitExpr(*d.size));
  auto compute = moe::ComputeOp::create(b, loc(assign.loc), out, bounds, moe::ScheduleAttr());
  OpBuilder::InsertionGuard guard(b);
  Block *body = b.createBlock(&compute.getBody());
  scopes.emplace_back();
  for (auto [i, name] : llvm::enumerate(assign.indices))
    varBounds[scopes.back()[name] = body->addArgument(b.getIndexType(), loc(assign.indexLocs[i]))] =
        t.shape[i].size.get();
  Value v = toStorage(emitExpr(*assign.value), elementType(assign), loc(assign.loc));
  moe::YieldOp::create(b, loc(assign.loc), v);
  scopes.pop_back();
}

void KernelEmitter::emitScatter(const PlannedKernel &path, size_t firstFor) {
  const Assign &assign = *path.assign;
  const TensorDecl &t = op.tensors[assign.tensorIndex];
  Value out = view(assign.tensorIndex, assign.loc);
  // The domain: every for-variable, then the target dims the assignment names freshly.
  SmallVector<Value> bounds;
  SmallVector<std::pair<std::string, SourceLoc>> vars;
  SmallVector<const Expr *> boundExprs;
  for (size_t i = firstFor; i < path.path.size(); ++i) {
    const ForStmt *f = path.path[i].forStmt;
    if (!f)
      continue;
    for (size_t v = 0; v < f->vars.size(); ++v) {
      bounds.push_back(emitExpr(*f->bounds[v])); // outside the domain: see lookup()
      vars.push_back({f->vars[v], f->varLocs[v]});
      boundExprs.push_back(f->bounds[v].get());
    }
  }
  for (size_t i = 0; i < assign.indices.size(); ++i)
    if (!assign.indexExprs[i]) {
      bounds.push_back(emitExpr(*t.shape[i].size));
      vars.push_back({assign.indices[i], assign.indexLocs[i]});
      boundExprs.push_back(t.shape[i].size.get());
    }

  auto scatter = moe::ScatterOp::create(b, loc(assign.loc), out, bounds, moe::ScheduleAttr());
  OpBuilder::InsertionGuard guard(b);
  Block *body = b.createBlock(&scatter.getBody());
  scopes.emplace_back();
  for (auto [i, var] : llvm::enumerate(vars))
    varBounds[scopes.back()[var.first] = body->addArgument(b.getIndexType(), loc(var.second))] = boundExprs[i];
  Point p = emitPoint(path, firstFor, elementType(assign));
  SmallVector<Value> indices;
  SmallVector<const Expr *> indexExprs;
  size_t exprIndex = 0;
  for (size_t i = 0; i < assign.indices.size(); ++i) {
    indices.push_back(assign.indexExprs[i] ? p.indices[exprIndex++] : scopes.back().at(assign.indices[i]));
    indexExprs.push_back(assign.indexExprs[i].get()); // null: a domain variable over this very dim
  }
  Value live = checkedStore(assign, indexExprs, indices, out, p.live);
  moe::WriteOp::create(b, loc(assign.loc), p.value, indices, live);
  scopes.pop_back();
}

Value KernelEmitter::checkedStore(const Assign &assign, ArrayRef<const Expr *> indexExprs, ArrayRef<Value> indices,
                                  Value out, Value live) {
  SmallVector<size_t> checkedDims;
  Value ok = boundsCheck(assign.tensorIndex, indexExprs, indices, out, checkedDims);
  if (!ok)
    return live;
  Location l = loc(assign.loc);
  Value outside = arith::XOrIOp::create(b, l, ok, arith::ConstantOp::create(b, l, b.getBoolAttr(true)));
  Value report = live ? Value(arith::AndIOp::create(b, l, live, outside)) : outside;
  {
    OpBuilder::InsertionGuard reportGuard(b);
    auto ifOp = scf::IfOp::create(b, l, report, /*withElseRegion=*/false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    recordFailure(assign.tensorIndex, indices, checkedDims, out, assign.loc);
  }
  return live ? Value(arith::AndIOp::create(b, l, live, ok)) : ok;
}

KernelEmitter::Point KernelEmitter::emitPoint(const PlannedKernel &path, size_t pos, Type elem) {
  const Assign &assign = *path.assign;
  for (; pos < path.path.size(); ++pos) {
    if (path.fusedRows && pos == path.fusedRows->guardFrom && !fused)
      prepareFusedRows(*path.fusedRows);
    const PathStep &step = path.path[pos];
    if (step.let) {
      emitLet(*step.let);
      continue;
    }
    if (!step.ifStmt || staticCondition(*step.ifStmt->cond))
      continue;
    return emitGuarded(path, pos, elem);
  }
  if (path.fusedRows && !fused)
    prepareFusedRows(*path.fusedRows);
  Point p;
  p.value = toStorage(emitExpr(*assign.value), elem, loc(assign.loc));
  for (const ExprPtr &index : assign.indexExprs)
    if (index)
      p.indices.push_back(emitExpr(*index));
  return p;
}

KernelEmitter::Point KernelEmitter::emitGuarded(const PlannedKernel &path, size_t pos, Type elem) {
  const PathStep &step = path.path[pos];
  Location l = loc(step.ifStmt->loc);
  Value cond = emitCondition(*step.ifStmt->cond, step.thenBranch);
  size_t numIndices = 0;
  for (const ExprPtr &index : path.assign->indexExprs)
    numIndices += index != nullptr;
  SmallVector<Type> types{elem, b.getI1Type()};
  types.append(numIndices, b.getIndexType());
  auto ifOp = scf::IfOp::create(b, l, types, cond, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    scopes.emplace_back();
    Point inner = emitPoint(path, pos + 1, elem);
    scopes.pop_back();
    SmallVector<Value> yielded{inner.value, inner.live ? inner.live : Value(arith::ConstantOp::create(
                                                                           b, l, b.getBoolAttr(true)))};
    yielded.append(inner.indices.begin(), inner.indices.end());
    scf::YieldOp::create(b, l, yielded);
    b.setInsertionPointToStart(ifOp.elseBlock());
    SmallVector<Value> none{arith::ConstantOp::create(b, l, b.getZeroAttr(elem)),
                            arith::ConstantOp::create(b, l, b.getBoolAttr(false))};
    for (size_t i = 0; i < numIndices; ++i)
      none.push_back(constIndex(0));
    scf::YieldOp::create(b, l, none);
  }
  Point p;
  p.value = ifOp.getResult(0);
  p.live = ifOp.getResult(1);
  for (size_t i = 0; i < numIndices; ++i)
    p.indices.push_back(ifOp.getResult(2 + i));
  return p;
}

} // namespace moec::detail

namespace moec {

MoeModule genMoe(MLIRContext &context, const OpDef &op, DType typeArg, const std::set<std::string> &present,
                 const std::map<std::string, int64_t> &statics, bool fuseRowStores) {
  context.loadDialect<moe::MoeDialect, func::FuncDialect, arith::ArithDialect, memref::MemRefDialect,
                      scf::SCFDialect, math::MathDialect, LLVM::LLVMDialect>();
  OpBuilder b(&context);
  MoeModule result;
  result.module = ModuleOp::create(b.getUnknownLoc());
  (*result.module)->setAttr(moe::MoeDialect::OpAttrHelper::getNameStr(), b.getStringAttr(op.name));
  (*result.module)->setAttr(moe::MoeDialect::DtypeAttrHelper::getNameStr(), b.getStringAttr(dtypeName(typeArg)));

  Bindings known = specializationBindings(op, present, statics);
  result.kernels = planKernels(op, known, fuseRowStores);
  for (const PlannedKernel &kernel : result.kernels) {
    detail::KernelEmitter emitter(b, op, typeArg, present, known);
    emitter.emit(*result.module, kernel);
    result.checks.push_back(std::move(emitter.checks));
  }
  return result;
}

} // namespace moec
