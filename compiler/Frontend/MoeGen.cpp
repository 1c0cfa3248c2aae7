//===- MoeGen.cpp - AST to the moe dialect --------------------------------===//
//
// Walks a checked OpDef and emits, for each assignment `out[i, j] = value`, one kernel function:
//   1. arguments: tensor pointers, runtime dims, runtime attrs (the lean ABI, see MoeGen.h);
//   2. static dims/attrs as `moe.param`, runtime ones from the arguments;
//   3. a `moe.view` per tensor, sized by its shape expressions;
//   4. top-level lets, then one `moe.compute` over the output whose body is the value, rounded once to the
//      output's element type when the value is f32 and the output narrower.
// Expressions map one to one onto arith/memref/scf ops; a `c ? a : b` whose branches read memory becomes
// an `scf.if`, so a skipped row is never read.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Frontend/MoeGen.h"

#include "moec/compiler/Dialect/MoeDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <map>

using namespace mlir;
using namespace moec::dsl;

namespace moec {

static Type floatType(MLIRContext *ctx, DType t) {
  switch (t) {
  case DType::F16: return Float16Type::get(ctx);
  case DType::BF16: return BFloat16Type::get(ctx);
  default: return Float32Type::get(ctx);
  }
}

/// Storage type of a tensor element: bool is stored as one byte.
static Type storageType(MLIRContext *ctx, DType t) {
  switch (t) {
  case DType::I32: return IntegerType::get(ctx, 32);
  case DType::I8:
  case DType::Bool: return IntegerType::get(ctx, 8);
  default: return floatType(ctx, t);
  }
}

std::string kernelName(const OpDef &op, const std::string &output) {
  int outputs = 0;
  for (const TensorDecl &t : op.tensors)
    outputs += t.isOutput;
  return outputs == 1 ? op.name : op.name + "__" + output;
}

namespace {

static bool readsMemory(const Expr &e) {
  if (e.kind == ExprKind::Element || e.kind == ExprKind::Sum)
    return true;
  for (const ExprPtr &operand : e.operands)
    if (readsMemory(*operand))
      return true;
  for (const Let &let : e.lets)
    if (readsMemory(*let.value))
      return true;
  return false;
}

class KernelEmitter {
public:
  KernelEmitter(OpBuilder &b, const OpDef &op, DType typeArg) : b(b), op(op), typeArg(typeArg) {}

  void emit(ModuleOp module, const Assign &assign) {
    MLIRContext *ctx = b.getContext();
    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    SmallVector<Type> argTypes;
    SmallVector<std::string> argNames;
    for (const TensorDecl &t : op.tensors) {
      argTypes.push_back(ptrType);
      argNames.push_back("tensor:" + t.name);
    }
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
    auto func = func::FuncOp::create(b, loc(op.loc), kernelName(op, assign.target),
                                     b.getFunctionType(argTypes, {}));
    for (auto [i, name] : llvm::enumerate(argNames))
      func.setArgAttr(i, "moe.arg", b.getStringAttr(name));
    Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);

    bindSymbols(func);
    for (auto [i, t] : llvm::enumerate(op.tensors))
      views.push_back(emitView(t, func.getArgument(i)));
    for (const Stmt &s : op.body)
      if (s.let)
        scopes.back()[s.let->name] = emitExpr(*s.let->value);

    emitCompute(assign);
    func::ReturnOp::create(b, loc(op.loc));
  }

private:
  Location loc(const SourceLoc &l) {
    if (!l.known())
      return b.getUnknownLoc();
    return FileLineColLoc::get(b.getStringAttr(l.file->path), l.line, l.col);
  }

  /// Dims and attrs: runtime ones are arguments, static ones are moe.param (bool attrs are i1).
  void bindSymbols(func::FuncOp func) {
    scopes.emplace_back();
    unsigned arg = op.tensors.size();
    for (const DimDecl &d : op.dims)
      dimValues[d.name] = d.isStatic ? moe::ParamOp::create(b, loc(d.loc), b.getIndexType(), d.name).getResult()
                                     : Value(func.getArgument(arg++));
    for (const AttrDecl &a : op.attrs) {
      Type type = a.isBool ? Type(b.getI1Type()) : Type(b.getIndexType());
      Value v;
      if (a.isStatic) {
        v = moe::ParamOp::create(b, loc(a.loc), type, a.name);
      } else {
        v = func.getArgument(arg++);
        if (a.isBool) // runtime bools travel as index 0/1
          v = arith::CmpIOp::create(b, loc(a.loc), arith::CmpIPredicate::ne, v, constIndex(0));
      }
      attrValues[a.name] = v;
    }
  }

  Value emitView(const TensorDecl &t, Value ptr) {
    SmallVector<Value> sizes;
    for (const ShapeDim &d : t.shape)
      sizes.push_back(emitExpr(*d.size));
    SmallVector<int64_t> shape(sizes.size(), ShapedType::kDynamic);
    auto type = MemRefType::get(shape, storageType(b.getContext(), t.elem.resolve(typeArg)));
    return moe::ViewOp::create(b, loc(t.loc), type, ptr, sizes);
  }

  void emitCompute(const Assign &assign) {
    Value out = views[assign.tensorIndex];
    const TensorDecl &t = op.tensors[assign.tensorIndex];
    SmallVector<Value> bounds;
    for (const ShapeDim &d : t.shape)
      bounds.push_back(emitExpr(*d.size));
    auto compute = moe::ComputeOp::create(b, loc(assign.loc), out, bounds, moe::ScheduleAttr());
    OpBuilder::InsertionGuard guard(b);
    Block *body = b.createBlock(&compute.getBody());
    scopes.emplace_back();
    for (auto [i, name] : llvm::enumerate(assign.indices))
      scopes.back()[name] = body->addArgument(b.getIndexType(), loc(assign.indexLocs[i]));
    Value v = emitExpr(*assign.value);
    Type elem = cast<MemRefType>(out.getType()).getElementType();
    if (v.getType() != elem) // f32 into a narrower float: round once, to nearest even
      v = arith::TruncFOp::create(b, loc(assign.loc), elem, v);
    moe::YieldOp::create(b, loc(assign.loc), v);
    scopes.pop_back();
  }

  Value constIndex(int64_t v) { return arith::ConstantIndexOp::create(b, b.getUnknownLoc(), v); }

  Value lookup(const Expr &e) {
    for (auto it = scopes.rbegin(); it != scopes.rend(); ++it)
      if (auto found = it->find(e.name); found != it->end())
        return found->second;
    if (e.nameKind == NameKind::Dim)
      return dimValues.at(e.name);
    const AttrDecl *a = op.findAttr(e.name);
    return attrValues.at(a->name);
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
    llvm_unreachable("expression kind not allowed in a kernel body");
  }

  Value emitElement(const Expr &e) {
    SmallVector<Value> indices;
    for (const ExprPtr &i : e.operands)
      indices.push_back(emitExpr(*i));
    Location l = loc(e.loc);
    Value v = memref::LoadOp::create(b, l, views[e.refIndex], indices);
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
    case BinOp::Div: return isF ? Value(arith::DivFOp::create(b, l, x, y)) : arith::DivSIOp::create(b, l, x, y);
    case BinOp::Mod: return arith::RemSIOp::create(b, l, x, y);
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

  /// Branches that read memory are guarded by an scf.if: `live ? x[r, h] : 0.0` must not read row r when
  /// r is -1. Pure branches become an arith.select.
  Value emitSelect(const Expr &e) {
    Location l = loc(e.loc);
    Value cond = emitExpr(*e.operands[0]);
    if (!readsMemory(*e.operands[1]) && !readsMemory(*e.operands[2])) {
      Value x = emitExpr(*e.operands[1]);
      Value y = emitExpr(*e.operands[2]);
      return arith::SelectOp::create(b, l, cond, x, y);
    }
    Type type = typeOf(e.type);
    auto ifOp = scf::IfOp::create(b, l, TypeRange{type}, cond, /*withElseRegion=*/true);
    for (int branch = 0; branch < 2; ++branch) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(branch == 0 ? ifOp.thenBlock() : ifOp.elseBlock());
      Value v = emitExpr(*e.operands[1 + branch]);
      scf::YieldOp::create(b, l, v);
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

  Value emitSum(const Expr &e) {
    Location l = loc(e.loc);
    Value bound = emitExpr(*e.operands[0]);
    auto sum = moe::SumOp::create(b, l, b.getF32Type(), bound);
    OpBuilder::InsertionGuard guard(b);
    Block *body = b.createBlock(&sum.getBody());
    scopes.emplace_back();
    scopes.back()[e.name] = body->addArgument(b.getIndexType(), l);
    Value v = emitExpr(*e.operands[1]);
    moe::YieldOp::create(b, l, v);
    scopes.pop_back();
    return sum.getResult();
  }

  OpBuilder &b;
  const OpDef &op;
  DType typeArg;
  std::map<std::string, Value> dimValues, attrValues;
  SmallVector<Value> views;
  std::vector<std::map<std::string, Value>> scopes;
};

} // namespace

OwningOpRef<ModuleOp> genMoe(MLIRContext &context, const OpDef &op, DType typeArg) {
  context.loadDialect<moe::MoeDialect, func::FuncDialect, arith::ArithDialect, memref::MemRefDialect,
                      scf::SCFDialect, LLVM::LLVMDialect>();
  OpBuilder b(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(b.getUnknownLoc());
  (*module)->setAttr("moe.op", b.getStringAttr(op.name));
  (*module)->setAttr("moe.dtype", b.getStringAttr(dtypeName(typeArg)));
  for (const Stmt &s : op.body)
    if (s.assign)
      KernelEmitter(b, op, typeArg).emit(*module, *s.assign);
  return module;
}

} // namespace moec
