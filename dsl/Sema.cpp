//===- Sema.cpp - Name resolution and type checking -----------------------===//
//
// checkOp: the Checker (SemaInternal.h) over the op's signature (type parameter, names, tensors, requires)
// and its body's statements (lets, fors, ifs, assignments), with their scopes; its expressions are checked
// in SemaExpressions.cpp.
//===----------------------------------------------------------------------===//
#include "moec/dsl/Sema.h"
#include "SemaInternal.h"

#include <fmt/format.h>

#include <map>
#include <set>

namespace moec::dsl::detail {

namespace {

bool sameTypeRef(const TypeRef &a, const TypeRef &b) {
  return a.generic == b.generic && (a.generic || a.fixed == b.fixed);
}

const char *localKindName(NameKind k) {
  switch (k) {
  case NameKind::Let: return "a let";
  case NameKind::Accumulator: return "an accumulator";
  default: return "an index variable";
  }
}

} // namespace

bool sameType(const ExprType &a, const ExprType &b) {
  return a.cls == b.cls && (a.cls != ExprType::Float || sameTypeRef(a.floatType, b.floatType));
}

bool isNumeric(const ExprType &t) { return t.cls == ExprType::Int || t.cls == ExprType::Float; }

ExprType elementType(const TypeRef &elem) {
  if (elem.generic || isFloat(elem.fixed))
    return ExprType::floatTy(elem);
  return elem.fixed == DType::Bool ? ExprType::boolTy() : ExprType::intTy();
}

void Checker::run() {
  checkTypeParam();
  declareSignatureNames();
  for (TensorDecl &t : op_.tensors)
    checkTensor(t);
  for (Require &r : op_.requires_)
    expectType(*r.cond, Ctx::Require, ExprType::boolTy(), "a require condition");
  checkBody();
}

std::string Checker::typeName(const ExprType &t) const {
  switch (t.cls) {
  case ExprType::Int: return "int";
  case ExprType::Bool: return "bool";
  case ExprType::Float: return t.floatType.generic ? op_.typeParam : dtypeName(t.floatType.fixed);
  default: return "unknown";
  }
}

[[noreturn]] void Checker::mismatch(const SourceLoc &loc, const ExprType &a, const ExprType &b) const {
  std::string message = fmt::format("cannot mix {} and {}", typeName(a), typeName(b));
  if (isNumeric(a) && isNumeric(b)) {
    // Casting to f32 fixes float/float mixes; an int meets a narrow float by casting to that float.
    const ExprType &flt = a.cls == ExprType::Float ? a : b;
    bool toF32 = a.cls == b.cls || a.isF32() || b.isF32();
    message += fmt::format("; cast with {}(...)", toF32 ? "f32" : typeName(flt));
  }
  fail(loc, message);
}

void Checker::checkTypeParam() {
  if (op_.typeParam.empty())
    return;
  if (op_.allowedTypes.empty())
    fail(op_.loc, fmt::format("type parameter '{}' needs at least one allowed type", op_.typeParam));
  for (DType t : op_.allowedTypes)
    if (!isFloat(t))
      fail(op_.loc, fmt::format("type parameter '{}' may only be f16, bf16 or f32, not '{}'", op_.typeParam,
                                dtypeName(t)));
}

void Checker::declareSignatureNames() {
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

void Checker::declare(const std::string &name, const SourceLoc &loc) {
  auto [it, inserted] = globals_.emplace(name, loc);
  if (!inserted)
    fail(loc, fmt::format("duplicate name '{}' (first declared at {}:{})", name, it->second.line,
                          it->second.col));
}

void Checker::checkTensor(TensorDecl &t) {
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

void Checker::expectType(Expr &e, Ctx ctx, const ExprType &want, const char *what) {
  ctx_ = ctx;
  check(e);
  if (!sameType(e.type, want))
    fail(e.loc, fmt::format("{} must be {}, found {}", what, typeName(want), typeName(e.type)));
}

void Checker::checkBody() {
  ctx_ = Ctx::Body;
  checkStmts(op_.body);
  for (size_t i = 0; i < op_.tensors.size(); ++i)
    if (op_.tensors[i].isOutput && !assigned_.count(static_cast<int>(i)))
      fail(op_.tensors[i].loc, fmt::format("output '{}' is never assigned", op_.tensors[i].name));
}

void Checker::checkStmts(std::vector<Stmt> &stmts) {
  scopes_.emplace_back();
  for (Stmt &s : stmts)
    checkStmt(s);
  scopes_.pop_back();
}

void Checker::checkStmt(Stmt &s) {
  if (s.let)
    checkLet(*s.let);
  else if (s.assign)
    checkAssign(*s.assign);
  else if (s.forStmt)
    checkFor(*s.forStmt);
  else
    checkIf(*s.ifStmt);
}

void Checker::checkLet(Let &l) {
  check(*l.value);
  bindLocal(l.name, l.loc, NameKind::Let, l.value->type, !firstDeviceValue(*l.value));
}

void Checker::checkFor(ForStmt &f) {
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

void Checker::checkIf(IfStmt &s) {
  expectType(*s.cond, Ctx::Body, ExprType::boolTy(), "an if condition");
  if (forDepth_ == 0)
    requireHost(*s.cond, "a condition outside a `for`");
  checkStmts(s.thenBody);
  checkStmts(s.elseBody);
}

void Checker::requireHost(const Expr &e, const char *what) const {
  if (const Expr *d = firstDeviceValue(e))
    fail(d->loc, fmt::format("{} must depend only on dims, attributes and present()", what));
}

const Expr *Checker::firstDeviceValue(const Expr &e) const {
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

bool Checker::isHostName(const Expr &e) const {
  switch (e.nameKind) {
  case NameKind::Dim:
  case NameKind::Attr: return true;
  case NameKind::Let: return findLocal(e.name)->host;
  default: return false;
  }
}

void Checker::bindLocal(const std::string &name, const SourceLoc &loc, NameKind kind, const ExprType &type,
                        bool host) {
  if (const char *what = globalKind(name))
    fail(loc, fmt::format("'{}' shadows {}", name, what));
  if (scopes_.back().count(name))
    fail(loc, fmt::format("duplicate name '{}' in this scope", name));
  if (const Local *outer = findLocal(name))
    fail(loc, fmt::format("'{}' shadows {}", name, localKindName(outer->kind)));
  scopes_.back().emplace(name, Local{kind, type, host});
}

const Checker::Local *Checker::findLocal(const std::string &name) const {
  for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
    auto it = s->find(name);
    if (it != s->end())
      return &it->second;
  }
  return nullptr;
}

const char *Checker::globalKind(const std::string &name) const {
  if (op_.findDim(name))
    return "a dim";
  if (op_.findAttr(name))
    return "an attr";
  if (op_.findTensor(name))
    return "a tensor";
  return nullptr;
}

void Checker::checkAssign(Assign &a) {
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

const TensorDecl &Checker::assignTarget(Assign &a) {
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

void Checker::checkIndexExprs(Assign &a) {
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

ExprPtr Checker::nameExpr(const std::string &name, const SourceLoc &loc) {
  auto e = std::make_unique<Expr>(ExprKind::Name, loc);
  e->name = name;
  return e;
}

} // namespace moec::dsl::detail

namespace moec::dsl {

void checkOp(OpDef &op) { detail::Checker(op).run(); }

} // namespace moec::dsl
