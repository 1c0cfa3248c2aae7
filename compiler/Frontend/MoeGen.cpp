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
//===----------------------------------------------------------------------===//
#include "moec/compiler/Frontend/MoeGen.h"

#include "moec/compiler/Dialect/MoeDialect.h"
#include "moec/dsl/Eval.h"
#include "moec/dsl/KernelPlan.h"
#include "moec/dsl/Printer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"

#include <cstdint>
#include <map>
#include <optional>

using namespace mlir;
using namespace moec::dsl;

namespace moec {

namespace {

Type floatType(MLIRContext *ctx, DType t) {
  switch (t) {
  case DType::F16: return Float16Type::get(ctx);
  case DType::BF16: return BFloat16Type::get(ctx);
  default: return Float32Type::get(ctx);
  }
}

/// Storage type of a tensor element: bool is stored as one byte.
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

class KernelEmitter {
public:
  KernelEmitter(OpBuilder &b, const OpDef &op, DType typeArg, const std::set<std::string> &present,
                const Bindings &known)
      : b(b), op(op), typeArg(typeArg), present(present), known(known) {}

  /// The value of a condition over present() and static dims/attributes, when those decide it.
  std::optional<bool> staticCondition(const Expr &e) const { return decide(e, known); }

  void emit(ModuleOp module, const PlannedKernel &path) {
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

  std::vector<IndexCheck> checks;

private:
  /// The names an assignment depends on, through the lets, conditions and bounds on its path, so lets
  /// it does not use are not emitted (they may read tensors or dims this specialization lacks).
  std::set<std::string> neededNames(const PlannedKernel &path) const {
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

  /// Names `e` reads; of a `c ? a : b` that present() decides, only the taken branch.
  void collectNames(const Expr &e, std::set<std::string> &names) const {
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

  void emitLet(const Let &let) {
    if (needed.count(let.name))
      scopes.back()[let.name] = emitExpr(*let.value);
  }

  Location loc(const SourceLoc &l) {
    if (!l.known())
      return b.getUnknownLoc();
    return FileLineColLoc::get(b.getStringAttr(l.file->path), l.line, l.col);
  }

  void createFunction(ModuleOp module, const std::string &name, const SourceLoc &at) {
    MLIRContext *ctx = b.getContext();
    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    SmallVector<Type> argTypes;
    SmallVector<std::string> argNames;
    for (const TensorDecl &t : op.tensors) {
      argTypes.push_back(ptrType);
      argNames.push_back("tensor:" + t.name);
    }
    argTypes.push_back(ptrType);
    argNames.push_back("status");
    for (const DimDecl &d : op.dims)
      if (!d.isStatic) {
        argTypes.push_back(b.getIndexType());
        argNames.push_back("dim:" + d.name);
      }
    for (const AttrDecl &a : op.attrs)
      if (!a.isStatic) {
        argTypes.push_back(b.getIndexType());
        argNames.push_back("attr:" + a.name);
      }
    b.setInsertionPointToEnd(module.getBody());
    func = func::FuncOp::create(b, loc(at), name, b.getFunctionType(argTypes, {}));
    for (auto [i, argName] : llvm::enumerate(argNames))
      func.setArgAttr(i, "moe.arg", b.getStringAttr(argName));
    // Tensors never alias (the runtime checks outputs against every other tensor at launch), and inputs are
    // only read: LLVM may then keep loads across stores, vectorize without runtime alias checks, and on the
    // GPU read inputs through the non-coherent cache (ld.global.nc).
    for (auto [i, t] : llvm::enumerate(op.tensors)) {
      func.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(), b.getUnitAttr());
      if (!t.isOutput)
        func.setArgAttr(i, LLVM::LLVMDialect::getReadonlyAttrName(), b.getUnitAttr());
      if (t.unique) // its values never repeat: nothing keyed on one is shared (moe-group-points)
        func.setArgAttr(i, "moe.unique", b.getUnitAttr());
    }
    func.setArgAttr(op.tensors.size(), LLVM::LLVMDialect::getNoAliasAttrName(), b.getUnitAttr()); // status
    Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);
    // Parameters and views are created on first use, before this anchor, so they dominate everything.
    anchor = arith::ConstantIndexOp::create(b, b.getUnknownLoc(), 0);
    b.setInsertionPoint(func::ReturnOp::create(b, loc(at)));
  }

  /// Runs `f` with the builder at the function entry (before the anchor).
  template <typename F> Value atEntry(F f) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(anchor);
    return f();
  }

  unsigned statusArgIndex() const { return op.tensors.size(); }

  unsigned runtimeArgIndex(const std::string &name, bool isDim) {
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

  Value dimValue(const DimDecl &d) {
    Value &v = symbols["dim:" + d.name];
    if (!v)
      v = d.isStatic ? atEntry([&] { return moe::ParamOp::create(b, loc(d.loc), b.getIndexType(), d.name).getResult(); })
                     : Value(func.getArgument(runtimeArgIndex(d.name, true)));
    return v;
  }

  Value attrValue(const AttrDecl &a) {
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

  Value view(int tensorIndex, const SourceLoc &use) {
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

  Value constIndex(int64_t v) { return arith::ConstantIndexOp::create(b, b.getUnknownLoc(), v); }

  Value emitCondition(const Expr &cond, bool value) {
    Value c = emitExpr(cond);
    if (value)
      return c;
    return arith::XOrIOp::create(b, c.getLoc(), c, arith::ConstantOp::create(b, c.getLoc(), b.getBoolAttr(true)));
  }

  /// The value as stored in a `elem` tensor: f32 is rounded once to a narrower float, Int and Bool take
  /// the storage width.
  Value toStorage(Value v, Type elem, Location l) {
    if (v.getType() == elem)
      return v;
    if (isa<FloatType>(elem))
      return arith::TruncFOp::create(b, l, elem, v);
    if (v.getType().isInteger(1))
      return arith::ExtUIOp::create(b, l, elem, v);
    return arith::IndexCastOp::create(b, l, elem, v);
  }

  Type elementType(const Assign &assign) {
    return storageType(b.getContext(), op.tensors[assign.tensorIndex].elem.resolve(typeArg));
  }

  void emitCompute(const Assign &assign) {
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

  /// What the inside of a scatter body computes for one point: the value, the expression indices of the
  /// store, and whether the store happens (null: always).
  struct Point {
    Value value;
    SmallVector<Value> indices;
    Value live;
  };

  void emitScatter(const PlannedKernel &path, size_t firstFor) {
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

  /// A store's guard with its bounds check: reports the stores that would have happened outside (where
  /// `live`, null: always, holds) and returns `live` and "inside" (null: always).
  Value checkedStore(const Assign &assign, ArrayRef<const Expr *> indexExprs, ArrayRef<Value> indices, Value out,
                     Value live) {
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

  /// Lets and ifs inside the `for`s, then the value and the store's expression indices.
  Point emitPoint(const PlannedKernel &path, size_t pos, Type elem) {
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

  /// `if c { rest }` inside a `for`: an scf.if that yields (value, live, indices...) from the rest when c
  /// holds, and (zero, false, zeros) otherwise, so nothing the rest reads is read when c fails.
  Point emitGuarded(const PlannedKernel &path, size_t pos, Type elem) {
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

  Value lookup(const Expr &e) {
    for (auto it = scopes.rbegin(); it != scopes.rend(); ++it)
      if (auto found = it->find(e.name); found != it->end())
        return found->second;
    if (e.nameKind == NameKind::Dim)
      return dimValue(*op.findDim(e.name));
    if (e.nameKind == NameKind::Attr)
      return attrValue(*op.findAttr(e.name));
    throw GenError(where(e.loc) + "'" + e.name + "' is not available here (a `for` bound may not use values " +
                   "computed inside a `for`)");
  }

  Value emitExpr(const Expr &e) {
    Location l = loc(e.loc);
    switch (e.kind) {
    case ExprKind::IntLit: return constIndex(e.intValue);
    case ExprKind::FloatLit:
      return arith::ConstantOp::create(b, l, b.getF32FloatAttr(static_cast<float>(e.floatValue)));
    case ExprKind::BoolLit: return arith::ConstantOp::create(b, l, b.getBoolAttr(e.boolValue));
    case ExprKind::Name: return lookup(e);
    case ExprKind::Element: return emitElement(e);
    case ExprKind::Unary: return emitUnary(e);
    case ExprKind::Binary: return emitBinary(e);
    case ExprKind::Select: return emitSelect(e);
    case ExprKind::Cast: return emitCast(*e.operands[0], e.castTo.resolve(typeArg), l);
    case ExprKind::Sum: return emitSum(e);
    case ExprKind::Fold: return emitFold(e);
    case ExprKind::Call: return emitCall(e);
    case ExprKind::Present: return arith::ConstantOp::create(b, l, b.getBoolAttr(present.count(e.name) > 0));
    case ExprKind::Block: {
      scopes.emplace_back();
      for (const Let &let : e.lets)
        scopes.back()[let.name] = emitExpr(*let.value);
      Value v = emitExpr(*e.operands[0]);
      scopes.pop_back();
      return v;
    }
    case ExprKind::Rank: break; // Sema allows rank() only in host-side requires
    }
    throw GenError(where(e.loc) + "this expression cannot be compiled into a kernel");
  }

  Value emitElement(const Expr &e) {
    Value memref = view(e.refIndex, e.loc);
    SmallVector<Value> indices;
    SmallVector<const Expr *> indexExprs;
    for (const ExprPtr &i : e.operands) {
      indices.push_back(emitExpr(*i));
      indexExprs.push_back(i.get());
    }
    Location l = loc(e.loc);
    Value v;
    // In a fused sum's body, the row assignment's reads of an element the term already read (A3: the
    // token's grad row) reuse that read, checks and all: the pass reads each element once.
    FusedRead *read = nullptr;
    if (fused && fused->sumBody == b.getInsertionBlock())
      for (FusedRead &r : fused->reads)
        if (r.tensor == e.refIndex && r.indices == indices)
          read = &r;
    SmallVector<size_t> checkedDims;
    if (read) {
      v = read->value;
    } else if (Value ok = boundsCheck(e.refIndex, indexExprs, indices, memref, checkedDims)) {
      // Read only in bounds; outside, record the access and read zero.
      Type elem = cast<MemRefType>(memref.getType()).getElementType();
      auto ifOp = scf::IfOp::create(b, l, TypeRange{elem}, ok, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      scf::YieldOp::create(b, l, ValueRange{memref::LoadOp::create(b, l, memref, indices)});
      b.setInsertionPointToStart(ifOp.elseBlock());
      recordFailure(e.refIndex, indices, checkedDims, memref, e.loc);
      scf::YieldOp::create(b, l, ValueRange{arith::ConstantOp::create(b, l, b.getZeroAttr(elem))});
      v = ifOp.getResult(0);
      b.setInsertionPointAfter(ifOp);
    } else {
      v = memref::LoadOp::create(b, l, memref, indices);
    }
    if (!read && fused && fused->sumBody == b.getInsertionBlock())
      fused->reads.push_back({e.refIndex, indices, v});
    switch (op.tensors[e.refIndex].elem.resolve(typeArg)) {
    case DType::I32:
    case DType::I8: return arith::IndexCastOp::create(b, l, b.getIndexType(), v);
    case DType::Bool:
      return arith::CmpIOp::create(b, l, arith::CmpIPredicate::ne, v,
                                   arith::ConstantOp::create(b, l, b.getI8IntegerAttr(0)));
    default: return v;
    }
  }

  Value emitUnary(const Expr &e) {
    Location l = loc(e.loc);
    Value x = emitExpr(*e.operands[0]);
    if (e.unOp == UnOp::Not)
      return arith::XOrIOp::create(b, l, x, arith::ConstantOp::create(b, l, b.getBoolAttr(true)));
    if (isa<FloatType>(x.getType()))
      return arith::NegFOp::create(b, l, x);
    return arith::SubIOp::create(b, l, constIndex(0), x);
  }

  Value emitBinary(const Expr &e) {
    Location l = loc(e.loc);
    // `a && b` / `a || b` whose right side reads memory only evaluates it when needed.
    if ((e.binOp == BinOp::And || e.binOp == BinOp::Or) && readsMemory(*e.operands[1]))
      return emitShortCircuit(e);
    Value x = emitExpr(*e.operands[0]);
    Value y = emitExpr(*e.operands[1]);
    bool isF = isa<FloatType>(x.getType());
    using IP = arith::CmpIPredicate;
    using FP = arith::CmpFPredicate;
    auto cmp = [&](IP ip, FP fp) -> Value {
      if (isF)
        return arith::CmpFOp::create(b, l, fp, x, y);
      return arith::CmpIOp::create(b, l, ip, x, y);
    };
    switch (e.binOp) {
    case BinOp::Add: return isF ? Value(arith::AddFOp::create(b, l, x, y)) : arith::AddIOp::create(b, l, x, y);
    case BinOp::Sub: return isF ? Value(arith::SubFOp::create(b, l, x, y)) : arith::SubIOp::create(b, l, x, y);
    case BinOp::Mul: return isF ? Value(arith::MulFOp::create(b, l, x, y)) : arith::MulIOp::create(b, l, x, y);
    case BinOp::Div:
      return isF ? Value(arith::DivFOp::create(b, l, x, y)) : arith::DivSIOp::create(b, l, x, safeDivisor(x, y, e.loc));
    case BinOp::Mod: return arith::RemSIOp::create(b, l, x, safeDivisor(x, y, e.loc));
    case BinOp::Lt: return cmp(IP::slt, FP::OLT);
    case BinOp::Le: return cmp(IP::sle, FP::OLE);
    case BinOp::Gt: return cmp(IP::sgt, FP::OGT);
    case BinOp::Ge: return cmp(IP::sge, FP::OGE);
    case BinOp::Eq: return cmp(IP::eq, FP::OEQ);
    case BinOp::Ne: return cmp(IP::ne, FP::UNE);
    case BinOp::And: return arith::AndIOp::create(b, l, x, y);
    case BinOp::Or: return arith::OrIOp::create(b, l, x, y);
    }
    llvm_unreachable("binary operator");
  }

  Value emitShortCircuit(const Expr &e) {
    Location l = loc(e.loc);
    Value x = emitExpr(*e.operands[0]);
    bool isAnd = e.binOp == BinOp::And;
    auto ifOp = scf::IfOp::create(b, l, TypeRange{b.getI1Type()}, x, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(isAnd ? ifOp.thenBlock() : ifOp.elseBlock());
    scf::YieldOp::create(b, l, emitExpr(*e.operands[1]));
    b.setInsertionPointToStart(isAnd ? ifOp.elseBlock() : ifOp.thenBlock());
    scf::YieldOp::create(b, l, ValueRange{arith::ConstantOp::create(b, l, b.getBoolAttr(!isAnd))});
    return ifOp.getResult(0);
  }

  /// A condition present() decides picks its branch here. Branches that read memory are guarded by an
  /// scf.if: `live ? x[r, h] : 0.0` must not read row r when r is -1. Pure branches become a select.
  Value emitSelect(const Expr &e) {
    Location l = loc(e.loc);
    if (std::optional<bool> known = staticCondition(*e.operands[0]))
      return emitExpr(*e.operands[*known ? 1 : 2]);
    Value cond = emitExpr(*e.operands[0]);
    if (!readsMemory(*e.operands[1]) && !readsMemory(*e.operands[2])) {
      Value x = emitExpr(*e.operands[1]);
      Value y = emitExpr(*e.operands[2]);
      return arith::SelectOp::create(b, l, cond, x, y);
    }
    auto ifOp = scf::IfOp::create(b, l, TypeRange{typeOf(e.type)}, cond, /*withElseRegion=*/true);
    for (int branch = 0; branch < 2; ++branch) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(branch == 0 ? ifOp.thenBlock() : ifOp.elseBlock());
      scf::YieldOp::create(b, l, emitExpr(*e.operands[1 + branch]));
    }
    return ifOp.getResult(0);
  }

  Type typeOf(const ExprType &t) {
    switch (t.cls) {
    case ExprType::Int: return b.getIndexType();
    case ExprType::Bool: return b.getI1Type();
    default: return floatType(b.getContext(), t.floatType.resolve(typeArg));
    }
  }

  Value emitCast(const Expr &x, DType to, Location l) {
    Value v = emitExpr(x);
    Type from = v.getType();
    if (isFloat(to)) {
      Type target = floatType(b.getContext(), to);
      if (from == target)
        return v;
      if (auto f = dyn_cast<FloatType>(from))
        return f.getWidth() < cast<FloatType>(target).getWidth()
                   ? Value(arith::ExtFOp::create(b, l, target, v))
                   : Value(arith::TruncFOp::create(b, l, target, v));
      if (from.isInteger(1))
        return arith::UIToFPOp::create(b, l, target, v);
      return arith::SIToFPOp::create(b, l, target, arith::IndexCastOp::create(b, l, b.getI64Type(), v));
    }
    if (to == DType::Bool) {
      if (from.isInteger(1))
        return v;
      if (isa<FloatType>(from))
        return arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNE, v,
                                     arith::ConstantOp::create(b, l, b.getFloatAttr(from, 0.0)));
      return arith::CmpIOp::create(b, l, arith::CmpIPredicate::ne, v, constIndex(0));
    }
    // i32(x) / i8(x): convert, wrap to the width, and widen back to an Int (index).
    Type narrow = b.getIntegerType(to == DType::I32 ? 32 : 8);
    Value n;
    if (isa<FloatType>(from))
      n = arith::FPToSIOp::create(b, l, narrow, v);
    else if (from.isInteger(1))
      n = arith::ExtUIOp::create(b, l, narrow, v);
    else
      n = arith::IndexCastOp::create(b, l, narrow, v);
    return arith::IndexCastOp::create(b, l, b.getIndexType(), n);
  }

  Value emitCall(const Expr &e) {
    Location l = loc(e.loc);
    SmallVector<Value> args;
    for (const ExprPtr &a : e.operands)
      args.push_back(emitExpr(*a));
    bool isF = isa<FloatType>(args[0].getType());
    if (e.name == "fma")
      return math::FmaOp::create(b, l, args[0], args[1], args[2]);
    if (e.name == "min")
      return isF ? Value(arith::MinimumFOp::create(b, l, args[0], args[1])) : arith::MinSIOp::create(b, l, args[0], args[1]);
    if (e.name == "max")
      return isF ? Value(arith::MaximumFOp::create(b, l, args[0], args[1])) : arith::MaxSIOp::create(b, l, args[0], args[1]);
    throw GenError(where(e.loc) + "unknown function '" + e.name + "'");
  }

  Value emitSum(const Expr &e) {
    Location l = loc(e.loc);
    Value bound = emitExpr(*e.operands[0]);
    auto sum = moe::SumOp::create(b, l, b.getF32Type(), bound);
    OpBuilder::InsertionGuard guard(b);
    Block *body = b.createBlock(&sum.getBody());
    scopes.emplace_back();
    Value j = body->addArgument(b.getIndexType(), l);
    varBounds[scopes.back()[e.name] = j] = e.operands[0].get();
    bool fusedHere = fused && fused->rows->sum == &e;
    if (fusedHere)
      fused->sumBody = body;
    Value term = emitExpr(*e.operands[1]);
    if (fusedHere) {
      emitRowStore(j);
      fused->sumBody = nullptr;
    }
    moe::YieldOp::create(b, l, term);
    scopes.pop_back();
    return sum.getResult();
  }

  //===--- Statement fusion (dsl::FusedRows) -------------------------------===//

  /// An element read at the top level of the fused sum's body.
  struct FusedRead {
    int tensor;
    SmallVector<Value> indices;
    Value value;
  };
  /// What the fused row assignment stores with, computed before the sum at the point.
  struct FusedStore {
    const FusedRows *rows;
    Value view, live;
    SmallVector<Value> rowIndices; // all but the last
    Block *sumBody = nullptr;      // while the sum's body is emitted
    SmallVector<FusedRead> reads;
  };
  std::optional<FusedStore> fused;

  /// At the point, before the value: the row assignment's conditions (its ifs after the shared
  /// statements; they read no tensor), row indices and their bounds check, as emitScatter has them.
  void prepareFusedRows(const FusedRows &rows) {
    const Assign &assign = *rows.assign;
    Location l = loc(assign.loc);
    FusedStore store{&rows, view(assign.tensorIndex, assign.loc), Value(), {}};
    for (size_t i = rows.guardFrom; i < rows.path.size(); ++i) {
      const PathStep &step = rows.path[i];
      if (staticCondition(*step.ifStmt->cond))
        continue;
      Value cond = emitCondition(*step.ifStmt->cond, step.thenBranch);
      store.live = store.live ? Value(arith::AndIOp::create(b, l, store.live, cond)) : cond;
    }
    SmallVector<const Expr *> indexExprs;
    SmallVector<Value> indices;
    for (const ExprPtr &index : assign.indexExprs) {
      indexExprs.push_back(index.get());
      indices.push_back(index ? emitExpr(*index) : constIndex(0)); // the last: j, proven in bounds
    }
    store.live = checkedStore(assign, indexExprs, indices, store.view, store.live);
    indices.pop_back();
    store.rowIndices = indices;
    fused = store;
  }

  /// Inside the sum, at its index j: the row assignment's value at h = j, stored under its guard.
  void emitRowStore(Value j) {
    const Assign &assign = *fused->rows->assign;
    scopes.emplace_back();
    varBounds[scopes.back()[assign.indices.back()] = j] = op.tensors[assign.tensorIndex].shape.back().size.get();
    Value value = toStorage(emitExpr(*assign.value), elementType(assign), loc(assign.loc));
    scopes.pop_back();
    SmallVector<Value> indices(fused->rowIndices);
    indices.push_back(j);
    moe::RowStoreOp::create(b, loc(assign.loc), value, fused->view, indices, fused->live);
  }

  Value emitFold(const Expr &e) {
    Location l = loc(e.loc);
    Value bound = emitExpr(*e.operands[0]);
    Value init = emitExpr(*e.operands[1]);
    auto fold = moe::FoldOp::create(b, l, init.getType(), bound, init);
    OpBuilder::InsertionGuard guard(b);
    Block *body = b.createBlock(&fold.getBody());
    scopes.emplace_back();
    varBounds[scopes.back()[e.name] = body->addArgument(b.getIndexType(), l)] = e.operands[0].get();
    scopes.back()[e.accName] = body->addArgument(init.getType(), l);
    moe::YieldOp::create(b, l, emitExpr(*e.operands[2]));
    scopes.pop_back();
    return fold.getResult();
  }

  //===--- Bounds checks ---------------------------------------------------===//

  /// The bound expression of a domain, for, sum or fold variable, or null for any other value.
  const Expr *boundOf(const Expr &index) {
    if (index.kind != ExprKind::Name)
      return nullptr;
    for (auto it = scopes.rbegin(); it != scopes.rend(); ++it)
      if (auto found = it->find(index.name); found != it->end()) {
        auto bound = varBounds.find(found->second);
        return bound == varBounds.end() ? nullptr : bound->second;
      }
    return nullptr;
  }

  /// Whether `index` (null: a domain variable that ranges over this very dim) stays in [0, dim): a
  /// variable bounded by the dim itself, or `i * B + j` with i < A and j < B over a dim `A * B`.
  bool provenInBounds(const Expr *index, const Expr &dim) {
    if (!index)
      return true;
    std::string dimText = printExpr(dim);
    // j < e with e < E proves j < E: follow variables bounded by variables (all start at 0). Locals never
    // shadow, so a bound's name still means the variable it meant where the bounded one was declared.
    if (const Expr *bound = boundOf(*index)) {
      for (int depth = 0; bound && depth < 64; ++depth, bound = boundOf(*bound))
        if (printExpr(*bound) == dimText)
          return true;
      return false;
    }
    if (index->kind != ExprKind::Binary || index->binOp != BinOp::Add)
      return false;
    const Expr &product = *index->operands[0], &inner = *index->operands[1];
    if (product.kind != ExprKind::Binary || product.binOp != BinOp::Mul)
      return false;
    const Expr *outerBound = boundOf(*product.operands[0]), *innerBound = boundOf(inner);
    return outerBound && innerBound && printExpr(*innerBound) == printExpr(*product.operands[1]) &&
           printExpr(*outerBound) + " * " + printExpr(*product.operands[1]) == dimText;
  }

  /// The condition that every index the compiler could not prove is inside its dim of the view, or null
  /// when all are proven.
  /// `checkedDims` receives the dims it checks.
  Value boundsCheck(int tensorIndex, ArrayRef<const Expr *> indexExprs, ArrayRef<Value> indices, Value memref,
                    SmallVectorImpl<size_t> &checkedDims) {
    const TensorDecl &t = op.tensors[tensorIndex];
    auto view = memref.getDefiningOp<moe::ViewOp>();
    Value ok;
    for (size_t d = 0; d < indices.size(); ++d) {
      if (provenInBounds(indexExprs[d], *t.shape[d].size))
        continue;
      checkedDims.push_back(d);
      Location l = indices[d].getLoc();
      Value size = view.getSizes()[d];
      Value inside = arith::AndIOp::create(
          b, l, arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, indices[d], constIndex(0)),
          arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, indices[d], size));
      ok = ok ? Value(arith::AndIOp::create(b, l, ok, inside)) : inside;
    }
    return ok;
  }

  /// In the branch where an access is outside: store the first failing dim + 1 and its index in the
  /// access's two status slots. Concurrent failures of one access each store a genuine pair.
  /// Only the checked dims are looked at: a proven index may vary along the row (h), and the failure
  /// branch must stay the same for every element of a vector.
  void recordFailure(int tensorIndex, ArrayRef<Value> indices, ArrayRef<size_t> checkedDims, Value memref,
                     const SourceLoc &at) {
    Location l = loc(at);
    auto view = memref.getDefiningOp<moe::ViewOp>();
    int64_t site = int64_t(checks.size());
    checks.push_back({tensorIndex, at.line, at.col});
    Value dim = constIndex(0), value = constIndex(0);
    for (size_t d : llvm::reverse(checkedDims)) { // the lowest failing dim wins
      Value outside = arith::OrIOp::create(
          b, l, arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, indices[d], constIndex(0)),
          arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, indices[d], view.getSizes()[d]));
      dim = arith::SelectOp::create(b, l, outside, constIndex(int64_t(d) + 1), dim);
      value = arith::SelectOp::create(b, l, outside, indices[d], value);
    }
    Value status = statusBuffer();
    auto i64 = [&](Value v) { return arith::IndexCastOp::create(b, l, b.getI64Type(), v); };
    memref::StoreOp::create(b, l, i64(dim), status, ValueRange{constIndex(2 * site)});
    memref::StoreOp::create(b, l, i64(value), status, ValueRange{constIndex(2 * site + 1)});
  }

  /// `y`, or 1 where dividing `x` by it would trap (a zero divisor, or INT64_MIN / -1), which is then
  /// reported as a check of its own (IndexCheck::tensor = kDivision). Folds away for constant divisors.
  Value safeDivisor(Value x, Value y, const SourceLoc &at) {
    Location l = loc(at);
    using IP = arith::CmpIPredicate;
    Value zero = arith::CmpIOp::create(b, l, IP::eq, y, constIndex(0));
    Value overflow = arith::AndIOp::create(b, l, arith::CmpIOp::create(b, l, IP::eq, y, constIndex(-1)),
                                           arith::CmpIOp::create(b, l, IP::eq, x, constIndex(INT64_MIN)));
    Value bad = arith::OrIOp::create(b, l, zero, overflow);
    {
      OpBuilder::InsertionGuard guard(b);
      auto ifOp = scf::IfOp::create(b, l, bad, /*withElseRegion=*/false);
      b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
      int64_t site = int64_t(checks.size());
      checks.push_back({IndexCheck::kDivision, at.line, at.col});
      Value status = statusBuffer();
      memref::StoreOp::create(b, l, arith::ConstantIntOp::create(b, l, 1, 64), status, ValueRange{constIndex(2 * site)});
      memref::StoreOp::create(b, l, arith::IndexCastOp::create(b, l, b.getI64Type(), x), status,
                              ValueRange{constIndex(2 * site + 1)});
    }
    return arith::SelectOp::create(b, l, bad, constIndex(1), y);
  }

  /// The status argument as a memref<?xi64>; its size is set once every check is known (emit()).
  Value statusBuffer() {
    if (!statusView)
      statusView = atEntry([&]() -> Value {
        auto type = MemRefType::get({ShapedType::kDynamic}, b.getI64Type());
        return moe::ViewOp::create(b, func.getLoc(), type, func.getArgument(statusArgIndex()),
                                   ValueRange{constIndex(0)});
      }).getDefiningOp();
    return statusView->getResult(0);
  }

  OpBuilder &b;
  const OpDef &op;
  DType typeArg;
  const std::set<std::string> &present;
  const Bindings &known; // presence and static values, for deciding conditions here
  func::FuncOp func;
  Operation *anchor = nullptr;
  std::map<std::string, Value> symbols;
  std::map<int, Value> views;
  std::vector<std::map<std::string, Value>> scopes;
  std::set<std::string> needed;
  llvm::DenseMap<Value, const Expr *> varBounds; // domain, for, sum and fold variables: their bounds
  Operation *statusView = nullptr;
};

} // namespace

MoeModule genMoe(MLIRContext &context, const OpDef &op, DType typeArg, const std::set<std::string> &present,
                 const std::map<std::string, int64_t> &statics, bool fuseRowStores) {
  context.loadDialect<moe::MoeDialect, func::FuncDialect, arith::ArithDialect, memref::MemRefDialect,
                      scf::SCFDialect, math::MathDialect, LLVM::LLVMDialect>();
  OpBuilder b(&context);
  MoeModule result;
  result.module = ModuleOp::create(b.getUnknownLoc());
  (*result.module)->setAttr("moe.op", b.getStringAttr(op.name));
  (*result.module)->setAttr("moe.dtype", b.getStringAttr(dtypeName(typeArg)));

  Bindings known = specializationBindings(op, present, statics);
  result.kernels = planKernels(op, known, fuseRowStores);
  for (const PlannedKernel &kernel : result.kernels) {
    KernelEmitter emitter(b, op, typeArg, present, known);
    emitter.emit(*result.module, kernel);
    result.checks.push_back(std::move(emitter.checks));
  }
  return result;
}

} // namespace moec
