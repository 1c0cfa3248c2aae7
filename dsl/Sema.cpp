//===- Sema.cpp - Name resolution and type checking -----------------------===//
#include "moec/dsl/Sema.h"

#include <fmt/format.h>

#include <map>
#include <set>

namespace moec::dsl {

namespace {

bool sameTypeRef(const TypeRef &a, const TypeRef &b) {
  return a.generic == b.generic && (a.generic || a.fixed == b.fixed);
}

bool sameType(const ExprType &a, const ExprType &b) {
  return a.cls == b.cls && (a.cls != ExprType::Float || sameTypeRef(a.floatType, b.floatType));
}

bool isNumeric(const ExprType &t) { return t.cls == ExprType::Int || t.cls == ExprType::Float; }

bool isArithmetic(BinOp op) {
  return op == BinOp::Add || op == BinOp::Sub || op == BinOp::Mul || op == BinOp::Div || op == BinOp::Mod;
}

/// The value type of one element of a tensor holding `elem`.
ExprType elementType(const TypeRef &elem) {
  if (elem.generic || isFloat(elem.fixed))
    return ExprType::floatTy(elem);
  return elem.fixed == DType::Bool ? ExprType::boolTy() : ExprType::intTy();
}

/// Where an expression sits; signature expressions may use only dims, attrs, literals (and rank, present).
enum class Ctx { Shape, Range, Require, When, Body };

const char *ctxName(Ctx c) {
  switch (c) {
  case Ctx::Shape: return "a shape";
  case Ctx::Range: return "a value range";
  case Ctx::Require: return "a require";
  case Ctx::When: return "a `when` condition";
  case Ctx::Body: return "the body";
  }
  return "";
}

const char *localKindName(NameKind k) {
  switch (k) {
  case NameKind::Let: return "a let";
  case NameKind::Accumulator: return "an accumulator";
  default: return "an index variable";
  }
}

class Checker {
public:
  explicit Checker(OpDef &op) : op_(op) {}

  void run() {
    checkTypeParam();
    declareSignatureNames();
    for (TensorDecl &t : op_.tensors)
      checkTensor(t);
    for (Require &r : op_.requires_)
      expectType(*r.cond, Ctx::Require, ExprType::boolTy(), "a require condition");
    checkBody();
  }

private:
  struct Local {
    NameKind kind;
    ExprType type;
    bool host = false; // a let whose value the host can compute (dims, attrs, literals, present())
  };
  using Scope = std::map<std::string, Local>;

  [[noreturn]] static void fail(const SourceLoc &loc, const std::string &message) {
    throw DslError(loc, message);
  }

  std::string typeName(const ExprType &t) const {
    switch (t.cls) {
    case ExprType::Int: return "int";
    case ExprType::Bool: return "bool";
    case ExprType::Float: return t.floatType.generic ? op_.typeParam : dtypeName(t.floatType.fixed);
    default: return "unknown";
    }
  }

  /// "cannot mix f32 and T; cast with f32(...)" - for operands or branches of different types.
  [[noreturn]] void mismatch(const SourceLoc &loc, const ExprType &a, const ExprType &b) const {
    std::string message = fmt::format("cannot mix {} and {}", typeName(a), typeName(b));
    if (isNumeric(a) && isNumeric(b)) {
      // Casting to f32 fixes float/float mixes; an int meets a narrow float by casting to that float.
      const ExprType &flt = a.cls == ExprType::Float ? a : b;
      bool toF32 = a.cls == b.cls || a.isF32() || b.isF32();
      message += fmt::format("; cast with {}(...)", toF32 ? "f32" : typeName(flt));
    }
    fail(loc, message);
  }

  //===--- Signature -------------------------------------------------------===//

  void checkTypeParam() {
    if (op_.typeParam.empty())
      return;
    if (op_.allowedTypes.empty())
      fail(op_.loc, fmt::format("type parameter '{}' needs at least one allowed type", op_.typeParam));
    for (DType t : op_.allowedTypes)
      if (!isFloat(t))
        fail(op_.loc, fmt::format("type parameter '{}' may only be f16, bf16 or f32, not '{}'", op_.typeParam,
                                  dtypeName(t)));
  }

  /// Dims, attr names and aliases, and tensors share one namespace.
  void declareSignatureNames() {
    const DimDecl *tokens = nullptr;
    for (const DimDecl &d : op_.dims) {
      declare(d.name, d.loc);
      if (d.isTokens && tokens)
        fail(d.loc, fmt::format("'{}' and '{}' both claim to be the token count; an op has at most one 'tokens' dim",
                                tokens->name, d.name));
      if (d.isTokens)
        tokens = &d;
    }
    for (const AttrDecl &a : op_.attrs) {
      declare(a.name, a.loc);
      if (!a.alias.empty() && a.alias != a.name)
        declare(a.alias, a.loc);
    }
    for (const TensorDecl &t : op_.tensors)
      declare(t.name, t.loc);
  }

  void declare(const std::string &name, const SourceLoc &loc) {
    auto [it, inserted] = globals_.emplace(name, loc);
    if (!inserted)
      fail(loc, fmt::format("duplicate name '{}' (first declared at {}:{})", name, it->second.line,
                            it->second.col));
  }

  void checkTensor(TensorDecl &t) {
    for (ShapeDim &d : t.shape)
      expectType(*d.size, Ctx::Shape, ExprType::intTy(), "a shape entry");
    if (t.when) {
      expectType(*t.when, Ctx::When, ExprType::boolTy(), "a `when` condition");
      requireHost(*t.when, "a `when` condition");
    }
    if (!t.rangeLo)
      return;
    if (t.elem.generic || (t.elem.fixed != DType::I32 && t.elem.fixed != DType::I8))
      fail(t.rangeLoc, fmt::format("a value range needs an integer tensor; '{}' holds {}", t.name,
                                   typeName(elementType(t.elem))));
    expectType(*t.rangeLo, Ctx::Range, ExprType::intTy(), "a range bound");
    expectType(*t.rangeHi, Ctx::Range, ExprType::intTy(), "a range bound");
  }

  void expectType(Expr &e, Ctx ctx, const ExprType &want, const char *what) {
    ctx_ = ctx;
    check(e);
    if (!sameType(e.type, want))
      fail(e.loc, fmt::format("{} must be {}, found {}", what, typeName(want), typeName(e.type)));
  }

  //===--- Body ------------------------------------------------------------===//

  void checkBody() {
    ctx_ = Ctx::Body;
    checkStmts(op_.body);
    for (size_t i = 0; i < op_.tensors.size(); ++i)
      if (op_.tensors[i].isOutput && !assigned_.count(static_cast<int>(i)))
        fail(op_.tensors[i].loc, fmt::format("output '{}' is never assigned", op_.tensors[i].name));
  }

  /// A statement list with its own scope for lets.
  void checkStmts(std::vector<Stmt> &stmts) {
    scopes_.emplace_back();
    for (Stmt &s : stmts)
      checkStmt(s);
    scopes_.pop_back();
  }

  void checkStmt(Stmt &s) {
    if (s.let)
      checkLet(*s.let);
    else if (s.assign)
      checkAssign(*s.assign);
    else if (s.forStmt)
      checkFor(*s.forStmt);
    else
      checkIf(*s.ifStmt);
  }

  void checkLet(Let &l) {
    check(*l.value);
    bindLocal(l.name, l.loc, NameKind::Let, l.value->type, !firstDeviceValue(*l.value));
  }

  void checkFor(ForStmt &f) {
    scopes_.emplace_back(); // each variable is in scope in the later bounds and the body
    for (size_t i = 0; i < f.vars.size(); ++i) {
      expectType(*f.bounds[i], Ctx::Body, ExprType::intTy(), "a for bound");
      bindLocal(f.vars[i], f.varLocs[i], NameKind::IndexVar, ExprType::intTy());
    }
    ++forDepth_;
    checkStmts(f.body);
    --forDepth_;
    scopes_.pop_back();
  }

  void checkIf(IfStmt &s) {
    expectType(*s.cond, Ctx::Body, ExprType::boolTy(), "an if condition");
    if (forDepth_ == 0)
      requireHost(*s.cond, "a condition outside a `for`");
    checkStmts(s.thenBody);
    checkStmts(s.elseBody);
  }

  /// Rejects `e` unless the host can evaluate it before the run.
  void requireHost(const Expr &e, const char *what) const {
    if (const Expr *d = firstDeviceValue(e))
      fail(d->loc, fmt::format("{} must depend only on dims, attributes and present()", what));
  }

  /// The first part of `e` that only the kernel can compute (tensor data, index variables, floats, ...),
  /// or null when the host can evaluate all of `e`.
  const Expr *firstDeviceValue(const Expr &e) const {
    switch (e.kind) {
    case ExprKind::Element:
    case ExprKind::Sum:
    case ExprKind::Fold:
    case ExprKind::Block: return &e;
    case ExprKind::Name: return isHostName(e) ? nullptr : &e;
    default: break;
    }
    if (e.type.cls == ExprType::Float)
      return &e;
    for (const ExprPtr &x : e.operands)
      if (const Expr *d = firstDeviceValue(*x))
        return d;
    return nullptr;
  }

  bool isHostName(const Expr &e) const {
    switch (e.nameKind) {
    case NameKind::Dim:
    case NameKind::Attr: return true;
    case NameKind::Let: return findLocal(e.name)->host;
    default: return false;
    }
  }

  /// Adds a let or index variable to the innermost scope. Locals never shadow other names.
  void bindLocal(const std::string &name, const SourceLoc &loc, NameKind kind, const ExprType &type,
                 bool host = false) {
    if (const char *what = globalKind(name))
      fail(loc, fmt::format("'{}' shadows {}", name, what));
    if (scopes_.back().count(name))
      fail(loc, fmt::format("duplicate name '{}' in this scope", name));
    if (const Local *outer = findLocal(name))
      fail(loc, fmt::format("'{}' shadows {}", name, localKindName(outer->kind)));
    scopes_.back().emplace(name, Local{kind, type, host});
  }

  const Local *findLocal(const std::string &name) const {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
      auto it = s->find(name);
      if (it != s->end())
        return &it->second;
    }
    return nullptr;
  }

  /// "a dim", "an attr", "a tensor", or null when `name` is not a signature name.
  const char *globalKind(const std::string &name) const {
    if (op_.findDim(name))
      return "a dim";
    if (op_.findAttr(name))
      return "an attr";
    if (op_.findTensor(name))
      return "a tensor";
    return nullptr;
  }

  void checkAssign(Assign &a) {
    const TensorDecl &t = assignTarget(a);
    assigned_.insert(a.tensorIndex);
    checkIndexExprs(a);
    scopes_.emplace_back(); // the fresh index names
    for (size_t i = 0; i < a.indices.size(); ++i)
      if (!a.indexExprs[i])
        bindLocal(a.indices[i], a.indexLocs[i], NameKind::IndexVar, ExprType::intTy());
    check(*a.value);
    scopes_.pop_back();
    ExprType want = elementType(t.elem);
    bool ok = sameType(a.value->type, want) || (want.cls == ExprType::Float && a.value->type.isF32());
    if (!ok)
      fail(a.value->loc, fmt::format("cannot store {} into '{}' of type {}", typeName(a.value->type),
                                     a.target, typeName(want)));
  }

  /// Resolves and checks the target of an assignment: an output of the right rank.
  const TensorDecl &assignTarget(Assign &a) {
    a.tensorIndex = op_.tensorIndex(a.target);
    if (a.tensorIndex < 0)
      fail(a.loc, fmt::format("unknown tensor '{}'", a.target));
    const TensorDecl &t = op_.tensors[a.tensorIndex];
    if (!t.isOutput)
      fail(a.loc, fmt::format("cannot assign to input '{}'", a.target));
    if (a.indices.size() != t.shape.size())
      fail(a.loc, fmt::format("'{}' has rank {} but is assigned with {} indices", a.target, t.shape.size(),
                              a.indices.size()));
    return t;
  }

  /// Turns bare index names that are in scope (a for variable or a let) into expressions, then checks
  /// every expression index: only inside a `for` does a store have points to scatter to.
  void checkIndexExprs(Assign &a) {
    for (size_t i = 0; i < a.indices.size(); ++i) {
      if (!a.indexExprs[i] && findLocal(a.indices[i]))
        a.indexExprs[i] = nameExpr(a.indices[i], a.indexLocs[i]);
      if (!a.indexExprs[i])
        continue;
      a.indices[i].clear();
      if (forDepth_ == 0)
        fail(a.indexLocs[i], "an indexed store needs an enclosing `for`");
      expectType(*a.indexExprs[i], Ctx::Body, ExprType::intTy(), "a store index");
    }
  }

  static ExprPtr nameExpr(const std::string &name, const SourceLoc &loc) {
    auto e = std::make_unique<Expr>(ExprKind::Name, loc);
    e->name = name;
    return e;
  }

  //===--- Expressions -----------------------------------------------------===//

  void check(Expr &e) {
    switch (e.kind) {
    case ExprKind::IntLit: e.type = ExprType::intTy(); break;
    case ExprKind::FloatLit: e.type = ExprType::f32(); break;
    case ExprKind::BoolLit: e.type = ExprType::boolTy(); break;
    case ExprKind::Name: checkName(e); break;
    case ExprKind::Element: checkElement(e); break;
    case ExprKind::Unary: checkUnary(e); break;
    case ExprKind::Binary: checkBinary(e); break;
    case ExprKind::Select: checkSelect(e); break;
    case ExprKind::Cast: checkCast(e); break;
    case ExprKind::Sum: checkSum(e); break;
    case ExprKind::Rank: checkRank(e); break;
    case ExprKind::Block: checkBlock(e); break;
    case ExprKind::Fold: checkFold(e); break;
    case ExprKind::Call: checkCall(e); break;
    case ExprKind::Present: checkPresent(e); break;
    }
  }

  void bodyOnly(const Expr &e, const char *what) const {
    if (ctx_ != Ctx::Body)
      fail(e.loc, fmt::format("{} is not allowed in {}", what, ctxName(ctx_)));
  }

  void checkName(Expr &e) {
    if (const Local *l = findLocal(e.name)) {
      e.nameKind = l->kind;
      e.type = l->type;
      return;
    }
    for (size_t i = 0; i < op_.dims.size(); ++i) {
      if (op_.dims[i].name == e.name) {
        resolveName(e, NameKind::Dim, i, ExprType::intTy());
        return;
      }
    }
    for (size_t i = 0; i < op_.attrs.size(); ++i) {
      const AttrDecl &a = op_.attrs[i];
      if (a.name == e.name || a.alias == e.name) {
        resolveName(e, NameKind::Attr, i, a.isBool ? ExprType::boolTy() : ExprType::intTy());
        return;
      }
    }
    if (op_.findTensor(e.name))
      fail(e.loc, fmt::format("'{}' is a tensor; read an element with {}[...]", e.name, e.name));
    fail(e.loc, fmt::format("unknown name '{}'", e.name));
  }

  static void resolveName(Expr &e, NameKind kind, size_t index, const ExprType &type) {
    e.nameKind = kind;
    e.refIndex = static_cast<int>(index);
    e.type = type;
  }

  /// The index of tensor `name`, or an error at `e`.
  int requireTensor(const Expr &e) const {
    int i = op_.tensorIndex(e.name);
    if (i >= 0)
      return i;
    if (globalKind(e.name) || findLocal(e.name))
      fail(e.loc, fmt::format("'{}' is not a tensor", e.name));
    fail(e.loc, fmt::format("unknown tensor '{}'", e.name));
  }

  void checkElement(Expr &e) {
    bodyOnly(e, "element access");
    e.refIndex = requireTensor(e);
    const TensorDecl &t = op_.tensors[e.refIndex];
    if (t.isOutput)
      fail(e.loc, fmt::format("cannot read output '{}'; outputs are write-only", e.name));
    if (e.operands.size() != t.shape.size())
      fail(e.loc, fmt::format("'{}' has rank {} but is indexed with {} indices", e.name, t.shape.size(),
                              e.operands.size()));
    for (ExprPtr &idx : e.operands) {
      check(*idx);
      if (idx->type.cls != ExprType::Int)
        fail(idx->loc, fmt::format("a tensor index must be int, found {}", typeName(idx->type)));
    }
    e.type = elementType(t.elem);
  }

  void checkUnary(Expr &e) {
    Expr &x = *e.operands[0];
    check(x);
    bool ok = e.unOp == UnOp::Neg ? isNumeric(x.type) : x.type.cls == ExprType::Bool;
    if (!ok)
      fail(e.loc, fmt::format("'{}' needs {} operand, found {}", e.unOp == UnOp::Neg ? "-" : "!",
                              e.unOp == UnOp::Neg ? "an int or float" : "a bool", typeName(x.type)));
    e.type = x.type;
  }

  void checkBinary(Expr &e) {
    check(*e.operands[0]);
    check(*e.operands[1]);
    const ExprType &l = e.operands[0]->type, &r = e.operands[1]->type;
    const char *op = binOpSpelling(e.binOp);
    if (e.binOp == BinOp::And || e.binOp == BinOp::Or) {
      if (l.cls != ExprType::Bool || r.cls != ExprType::Bool)
        fail(e.loc, fmt::format("'{}' needs bool operands, found {} and {}", op, typeName(l), typeName(r)));
      e.type = ExprType::boolTy();
      return;
    }
    bool boolEquality =
        (e.binOp == BinOp::Eq || e.binOp == BinOp::Ne) && l.cls == ExprType::Bool && r.cls == ExprType::Bool;
    if (!boolEquality && (!isNumeric(l) || !isNumeric(r)))
      fail(e.loc,
           fmt::format("'{}' needs int or float operands, found {} and {}", op, typeName(l), typeName(r)));
    if (!sameType(l, r))
      mismatch(e.loc, l, r);
    if (e.binOp == BinOp::Mod && l.cls == ExprType::Float)
      fail(e.loc, fmt::format("'%' needs int operands, found {}", typeName(l)));
    const Expr &divisor = *e.operands[1];
    if ((e.binOp == BinOp::Div || e.binOp == BinOp::Mod) && divisor.kind == ExprKind::IntLit && divisor.intValue == 0)
      fail(divisor.loc, fmt::format("'{}' by zero", op));
    e.type = isArithmetic(e.binOp) ? l : ExprType::boolTy();
  }

  void checkSelect(Expr &e) {
    for (ExprPtr &x : e.operands)
      check(*x);
    const Expr &c = *e.operands[0];
    if (c.type.cls != ExprType::Bool)
      fail(c.loc, fmt::format("the condition of '?:' must be bool, found {}", typeName(c.type)));
    const ExprType &a = e.operands[1]->type, &b = e.operands[2]->type;
    if (!sameType(a, b))
      mismatch(e.loc, a, b);
    e.type = a;
  }

  void checkCast(Expr &e) {
    check(*e.operands[0]);
    const TypeRef &to = e.castTo;
    if (to.generic && op_.typeParam.empty())
      fail(e.loc, "cast to the type parameter, but the op has none");
    e.type = elementType(to);
  }

  void checkSum(Expr &e) {
    bodyOnly(e, "'sum'");
    checkBound(*e.operands[0], "sum");
    scopes_.emplace_back();
    bindLocal(e.name, e.loc, NameKind::IndexVar, ExprType::intTy());
    Expr &body = *e.operands[1];
    check(body);
    scopes_.pop_back();
    if (!body.type.isF32())
      fail(body.loc, fmt::format("sum accumulates in f32; cast the body with f32(...) (found {})",
                                 typeName(body.type)));
    e.type = ExprType::f32();
  }

  void checkFold(Expr &e) {
    bodyOnly(e, "'fold'");
    checkBound(*e.operands[0], "fold");
    Expr &init = *e.operands[1], &body = *e.operands[2];
    check(init);
    scopes_.emplace_back();
    bindLocal(e.name, e.loc, NameKind::IndexVar, ExprType::intTy());
    bindLocal(e.accName, e.loc, NameKind::Accumulator, init.type);
    check(body);
    scopes_.pop_back();
    if (!sameType(body.type, init.type))
      fail(body.loc, fmt::format("the fold body must have the accumulator's type {}, found {}",
                                 typeName(init.type), typeName(body.type)));
    e.type = init.type;
  }

  /// A sum or fold bound: an int that names no runtime dim or attr (lets and index variables are fine).
  void checkBound(Expr &bound, const char *what) {
    check(bound);
    if (bound.type.cls != ExprType::Int)
      fail(bound.loc, fmt::format("a {} bound must be int, found {}", what, typeName(bound.type)));
    requireStaticNames(bound, what);
  }

  /// Rejects runtime dims/attrs (and accumulators) anywhere in a sum or fold bound.
  void requireStaticNames(const Expr &e, const char *what) const {
    if (e.kind == ExprKind::Name)
      requireStaticName(e, what);
    for (const Let &l : e.lets)
      requireStaticNames(*l.value, what);
    for (const ExprPtr &x : e.operands)
      requireStaticNames(*x, what);
  }

  void requireStaticName(const Expr &e, const char *what) const {
    const char *why = nullptr;
    if (e.nameKind == NameKind::Dim && !op_.dims[e.refIndex].isStatic)
      why = "a runtime dim";
    else if (e.nameKind == NameKind::Attr && !op_.attrs[e.refIndex].isStatic)
      why = "a runtime attr";
    else if (e.nameKind == NameKind::Accumulator)
      why = "an accumulator";
    if (why)
      fail(e.loc, fmt::format("{} bound must be static; '{}' is {}", what, e.name, why));
  }

  void checkCall(Expr &e) {
    if (e.name == "fma")
      checkFma(e);
    else if (e.name == "min" || e.name == "max")
      checkMinMax(e);
    else
      fail(e.loc, fmt::format("unknown function '{}'", e.name));
  }

  /// Checks the argument count and every argument.
  void checkArgs(Expr &e, size_t count) {
    if (e.operands.size() != count)
      fail(e.loc, fmt::format("{}() takes {} arguments, found {}", e.name, count, e.operands.size()));
    for (ExprPtr &x : e.operands)
      check(*x);
  }

  void checkFma(Expr &e) {
    checkArgs(e, 3);
    for (const ExprPtr &x : e.operands)
      if (!x->type.isF32())
        fail(x->loc,
             fmt::format("fma() needs f32 arguments, found {}; cast with f32(...)", typeName(x->type)));
    e.type = ExprType::f32();
  }

  void checkMinMax(Expr &e) {
    checkArgs(e, 2);
    const ExprType &a = e.operands[0]->type, &b = e.operands[1]->type;
    if (!isNumeric(a) || !isNumeric(b))
      fail(e.loc, fmt::format("{}() needs int or float arguments, found {} and {}", e.name, typeName(a),
                              typeName(b)));
    if (!sameType(a, b))
      mismatch(e.loc, a, b);
    e.type = a;
  }

  void checkPresent(Expr &e) {
    if (ctx_ == Ctx::Shape || ctx_ == Ctx::Range)
      fail(e.loc, fmt::format("present() is not allowed in {}", ctxName(ctx_)));
    e.refIndex = requireTensor(e);
    if (!op_.tensors[e.refIndex].optional)
      fail(e.loc, fmt::format("present() needs an optional tensor; '{}' is always present", e.name));
    e.type = ExprType::boolTy();
  }

  void checkRank(Expr &e) {
    if (ctx_ != Ctx::Require)
      fail(e.loc, "rank() is only allowed in a require");
    e.refIndex = requireTensor(e);
    e.type = ExprType::intTy();
  }

  void checkBlock(Expr &e) {
    bodyOnly(e, "a block");
    scopes_.emplace_back();
    for (Let &l : e.lets)
      checkLet(l);
    check(*e.operands[0]);
    scopes_.pop_back();
    e.type = e.operands[0]->type;
  }

  OpDef &op_;
  Ctx ctx_ = Ctx::Body;
  std::map<std::string, SourceLoc> globals_;
  std::vector<Scope> scopes_; // innermost last
  int forDepth_ = 0;          // how many `for` statements enclose the statement being checked
  std::set<int> assigned_;    // outputs with at least one assignment
};

} // namespace

void checkOp(OpDef &op) { Checker(op).run(); }

} // namespace moec::dsl
