//===- KernelEmitter.h - One kernel function from its path of statements (private to Frontend) ---===//
//
// KernelEmitter, which genMoe runs once per planned kernel (see MoeGen.cpp's file comment): its function and
// statements are in MoeGen.cpp, its expressions in ExpressionGen.cpp, its bounds and division checks in
// BoundsChecks.cpp.
//===----------------------------------------------------------------------===//
#ifndef MOEC_COMPILER_FRONTEND_KERNELEMITTER_H
#define MOEC_COMPILER_FRONTEND_KERNELEMITTER_H

#include "moec/compiler/Frontend/MoeGen.h"
#include "moec/dsl/AST.h"
#include "moec/dsl/Eval.h"
#include "moec/dsl/KernelPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseMap.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace moec::detail {

/// The float type of `t`: f16, bf16, or f32 for any other type.
mlir::Type floatType(mlir::MLIRContext *ctx, dsl::DType t);

/// Storage type of a tensor element: bool is stored as one byte.
mlir::Type storageType(mlir::MLIRContext *ctx, dsl::DType t);

/// Whether evaluating `e` reads memory (an element, a sum or a fold, in it or in its lets).
bool readsMemory(const dsl::Expr &e);

/// "file:line:col: " of `l`, the start of a GenError's message; empty where `l` is not known.
std::string where(const dsl::SourceLoc &l);

/// Emits one kernel function of a module from the path of statements that leads to its assignment.
class KernelEmitter {
public:
  KernelEmitter(mlir::OpBuilder &b, const dsl::OpDef &op, dsl::DType typeArg, const std::set<std::string> &present,
                const dsl::Bindings &known)
      : b(b), op(op), typeArg(typeArg), present(present), known(known) {}

  /// The value of a condition over present() and static dims/attributes, when those decide it.
  std::optional<bool> staticCondition(const dsl::Expr &e) const;

  void emit(mlir::ModuleOp module, const dsl::PlannedKernel &path);

  std::vector<dsl::IndexCheck> checks;

private:
  //===--- The function and its statements (MoeGen.cpp) --------------------===//

  /// The names an assignment depends on, through the lets, conditions and bounds on its path, so lets
  /// it does not use are not emitted (they may read tensors or dims this specialization lacks).
  std::set<std::string> neededNames(const dsl::PlannedKernel &path) const;

  /// Names `e` reads; of a `c ? a : b` that present() decides, only the taken branch.
  void collectNames(const dsl::Expr &e, std::set<std::string> &names) const;

  void emitLet(const dsl::Let &let);

  mlir::Location loc(const dsl::SourceLoc &l);

  void createFunction(mlir::ModuleOp module, const std::string &name, const dsl::SourceLoc &at);

  /// Runs `f` with the builder at the function entry (before the anchor).
  template <typename F> mlir::Value atEntry(F f) {
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(anchor);
    return f();
  }

  unsigned statusArgIndex() const;

  unsigned runtimeArgIndex(const std::string &name, bool isDim);

  mlir::Value dimValue(const dsl::DimDecl &d);

  mlir::Value attrValue(const dsl::AttrDecl &a);

  mlir::Value view(int tensorIndex, const dsl::SourceLoc &use);

  mlir::Value constIndex(int64_t v);

  mlir::Value emitCondition(const dsl::Expr &cond, bool value);

  /// The value as stored in a `elem` tensor: f32 is rounded once to a narrower float, Int and Bool take
  /// the storage width.
  mlir::Value toStorage(mlir::Value v, mlir::Type elem, mlir::Location l);

  mlir::Type elementType(const dsl::Assign &assign);

  void emitCompute(const dsl::Assign &assign);

  /// What the inside of a scatter body computes for one point: the value, the expression indices of the
  /// store, and whether the store happens (null: always).
  struct Point {
    mlir::Value value;
    llvm::SmallVector<mlir::Value> indices;
    mlir::Value live;
  };

  void emitScatter(const dsl::PlannedKernel &path, size_t firstFor);

  /// A store's guard with its bounds check: reports the stores that would have happened outside (where
  /// `live`, null: always, holds) and returns `live` and "inside" (null: always).
  mlir::Value checkedStore(const dsl::Assign &assign, llvm::ArrayRef<const dsl::Expr *> indexExprs,
                           llvm::ArrayRef<mlir::Value> indices, mlir::Value out, mlir::Value live);

  /// Lets and ifs inside the `for`s, then the value and the store's expression indices.
  Point emitPoint(const dsl::PlannedKernel &path, size_t pos, mlir::Type elem);

  /// `if c { rest }` inside a `for`: an scf.if that yields (value, live, indices...) from the rest when c
  /// holds, and (zero, false, zeros) otherwise, so nothing the rest reads is read when c fails.
  Point emitGuarded(const dsl::PlannedKernel &path, size_t pos, mlir::Type elem);

  //===--- Expressions (ExpressionGen.cpp) ---------------------------------===//

  mlir::Value lookup(const dsl::Expr &e);

  mlir::Value emitExpr(const dsl::Expr &e);

  mlir::Value emitElement(const dsl::Expr &e);

  mlir::Value emitUnary(const dsl::Expr &e);

  mlir::Value emitBinary(const dsl::Expr &e);

  mlir::Value emitShortCircuit(const dsl::Expr &e);

  /// A condition present() decides picks its branch here. Branches that read memory are guarded by an
  /// scf.if: `live ? x[r, h] : 0.0` must not read row r when r is -1. Pure branches become a select.
  mlir::Value emitSelect(const dsl::Expr &e);

  mlir::Type typeOf(const dsl::ExprType &t);

  mlir::Value emitCast(const dsl::Expr &x, dsl::DType to, mlir::Location l);

  mlir::Value emitCall(const dsl::Expr &e);

  mlir::Value emitSum(const dsl::Expr &e);

  //===--- Statement fusion (dsl::FusedRows) -------------------------------===//

  /// An element read at the top level of the fused sum's body.
  struct FusedRead {
    int tensor;
    llvm::SmallVector<mlir::Value> indices;
    mlir::Value value;
  };
  /// What the fused row assignment stores with, computed before the sum at the point.
  struct FusedStore {
    const dsl::FusedRows *rows;
    mlir::Value view, live;
    llvm::SmallVector<mlir::Value> rowIndices; // all but the last
    mlir::Block *sumBody = nullptr;            // while the sum's body is emitted
    llvm::SmallVector<FusedRead> reads;
  };
  std::optional<FusedStore> fused;

  /// At the point, before the value: the row assignment's conditions (its ifs after the shared
  /// statements; they read no tensor), row indices and their bounds check, as emitScatter has them.
  void prepareFusedRows(const dsl::FusedRows &rows);

  /// Inside the sum, at its index j: the row assignment's value at h = j, stored under its guard.
  void emitRowStore(mlir::Value j);

  mlir::Value emitFold(const dsl::Expr &e);

  //===--- Bounds checks (BoundsChecks.cpp) --------------------------------===//

  /// The bound expression of a domain, for, sum or fold variable, or null for any other value.
  const dsl::Expr *boundOf(const dsl::Expr &index);

  /// Whether `index` (null: a domain variable that ranges over this very dim) stays in [0, dim): a
  /// variable bounded by the dim itself, or `i * B + j` with i < A and j < B over a dim `A * B`.
  bool provenInBounds(const dsl::Expr *index, const dsl::Expr &dim);

  /// The condition that every index the compiler could not prove is inside its dim of the view, or null
  /// when all are proven.
  /// `checkedDims` receives the dims it checks.
  mlir::Value boundsCheck(int tensorIndex, llvm::ArrayRef<const dsl::Expr *> indexExprs,
                          llvm::ArrayRef<mlir::Value> indices, mlir::Value memref,
                          llvm::SmallVectorImpl<size_t> &checkedDims);

  /// In the branch where an access is outside: store the first failing dim + 1 and its index in the
  /// access's two status slots. Concurrent failures of one access each store a genuine pair.
  /// Only the checked dims are looked at: a proven index may vary along the row (h), and the failure
  /// branch must stay the same for every element of a vector.
  void recordFailure(int tensorIndex, llvm::ArrayRef<mlir::Value> indices, llvm::ArrayRef<size_t> checkedDims,
                     mlir::Value memref, const dsl::SourceLoc &at);

  /// `y`, or 1 where dividing `x` by it would trap (a zero divisor, or INT64_MIN / -1), which is then
  /// reported as a check of its own (IndexCheck::tensor = kDivision). Folds away for constant divisors.
  mlir::Value safeDivisor(mlir::Value x, mlir::Value y, const dsl::SourceLoc &at);

  /// The status argument as a memref<?xi64>; its size is set once every check is known (emit()).
  mlir::Value statusBuffer();

  mlir::OpBuilder &b;
  const dsl::OpDef &op;
  dsl::DType typeArg;
  const std::set<std::string> &present;
  const dsl::Bindings &known; // presence and static values, for deciding conditions here
  mlir::func::FuncOp func;
  mlir::Operation *anchor = nullptr;
  std::map<std::string, mlir::Value> symbols;
  std::map<int, mlir::Value> views;
  std::vector<std::map<std::string, mlir::Value>> scopes;
  std::set<std::string> needed;
  llvm::DenseMap<mlir::Value, const dsl::Expr *> varBounds; // domain, for, sum and fold variables: their bounds
  mlir::Operation *statusView = nullptr;
};

} // namespace moec::detail

#endif // MOEC_COMPILER_FRONTEND_KERNELEMITTER_H
