//===- SemaInternal.h - The checker of an op's names and types (private) -*- C++ -*-===//
//
// The Checker that checkOp runs over an op (see Sema.h): its signature and statements are checked in
// Sema.cpp, its expressions in SemaExpressions.cpp.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/dsl/AST.h"
#include "moec/dsl/Diagnostics.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace moec::dsl::detail {

/// Whether `a` and `b` are the same type (a float's: the same dtype, or both the type parameter).
bool sameType(const ExprType &a, const ExprType &b);

/// Int or Float.
bool isNumeric(const ExprType &t);

/// The value type of one element of a tensor holding `elem`.
ExprType elementType(const TypeRef &elem);

/// Where an expression sits; signature expressions may use only dims, attrs, literals (and rank, present).
enum class Ctx { Shape, Range, Require, When, Body };

class Checker {
public:
  explicit Checker(OpDef &op) : op_(op) {}

  void run();

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

  std::string typeName(const ExprType &t) const;

  /// "cannot mix f32 and T; cast with f32(...)" - for operands or branches of different types.
  [[noreturn]] void mismatch(const SourceLoc &loc, const ExprType &a, const ExprType &b) const;

  //===--- Signature -------------------------------------------------------===//

  void checkTypeParam();

  /// Dims, attr names and aliases, and tensors share one namespace.
  void declareSignatureNames();

  void declare(const std::string &name, const SourceLoc &loc);

  void checkTensor(TensorDecl &t);

  void expectType(Expr &e, Ctx ctx, const ExprType &want, const char *what);

  //===--- Body ------------------------------------------------------------===//

  void checkBody();

  /// A statement list with its own scope for lets.
  void checkStmts(std::vector<Stmt> &stmts);

  void checkStmt(Stmt &s);

  void checkLet(Let &l);

  void checkFor(ForStmt &f);

  void checkIf(IfStmt &s);

  /// Rejects `e` unless the host can evaluate it before the run.
  void requireHost(const Expr &e, const char *what) const;

  /// The first part of `e` that only the kernel can compute (tensor data, index variables, floats, ...),
  /// or null when the host can evaluate all of `e`.
  const Expr *firstDeviceValue(const Expr &e) const;

  bool isHostName(const Expr &e) const;

  /// Adds a let or index variable to the innermost scope. Locals never shadow other names.
  void bindLocal(const std::string &name, const SourceLoc &loc, NameKind kind, const ExprType &type,
                 bool host = false);

  const Local *findLocal(const std::string &name) const;

  /// "a dim", "an attr", "a tensor", or null when `name` is not a signature name.
  const char *globalKind(const std::string &name) const;

  void checkAssign(Assign &a);

  /// Resolves and checks the target of an assignment: an output of the right rank.
  const TensorDecl &assignTarget(Assign &a);

  /// Turns bare index names that are in scope (a for variable or a let) into expressions, then checks
  /// every expression index: only inside a `for` does a store have points to scatter to.
  void checkIndexExprs(Assign &a);

  static ExprPtr nameExpr(const std::string &name, const SourceLoc &loc);

  //===--- Expressions -----------------------------------------------------===//

  void check(Expr &e);

  void bodyOnly(const Expr &e, const char *what) const;

  void checkName(Expr &e);

  static void resolveName(Expr &e, NameKind kind, size_t index, const ExprType &type);

  /// The index of tensor `name`, or an error at `e`.
  int requireTensor(const Expr &e) const;

  void checkElement(Expr &e);

  void checkUnary(Expr &e);

  void checkBinary(Expr &e);

  void checkSelect(Expr &e);

  void checkCast(Expr &e);

  void checkSum(Expr &e);

  void checkFold(Expr &e);

  /// A sum or fold bound: an int that names no runtime dim or attr (lets and index variables are fine).
  void checkBound(Expr &bound, const char *what);

  /// Rejects runtime dims/attrs (and accumulators) anywhere in a sum or fold bound.
  void requireStaticNames(const Expr &e, const char *what) const;

  void requireStaticName(const Expr &e, const char *what) const;

  void checkCall(Expr &e);

  /// Checks the argument count and every argument.
  void checkArgs(Expr &e, size_t count);

  void checkFma(Expr &e);

  void checkMinMax(Expr &e);

  void checkPresent(Expr &e);

  void checkRank(Expr &e);

  void checkBlock(Expr &e);

  OpDef &op_;
  Ctx ctx_ = Ctx::Body;
  std::map<std::string, SourceLoc> globals_;
  std::vector<Scope> scopes_; // innermost last
  int forDepth_ = 0;          // how many `for` statements enclose the statement being checked
  std::set<int> assigned_;    // outputs with at least one assignment
};

} // namespace moec::dsl::detail
