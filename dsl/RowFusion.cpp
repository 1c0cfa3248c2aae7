//===- RowFusion.cpp - Statement fusion: row assignments inside dot products ===//
//
// planKernels(.., fuseRowStores): a row assignment `G[row, h] = ..` (h < H, a fresh last index) at the same
// point of the same `for` as a point assignment whose value runs `sum(j < H)` becomes that kernel's
// FusedRows instead of a kernel of its own, when
//   - the row assignment's conditions (its ifs from the first undecided one after the `for`; none reads a
//     tensor) include every condition the sum runs under (the point's own ifs, and the selects on the way
//     to the sum), compared as text in the same scope;
//   - no kernel between them writes the rows' tensor (the row stores move to the point kernel's place;
//     outputs are write-only, so nothing reads them).
//===----------------------------------------------------------------------===//
#include "moec/dsl/KernelPlan.h"
#include "moec/dsl/Printer.h"

#include <algorithm>

namespace moec::dsl {

namespace {

class RowFusion {
public:
  RowFusion(const OpDef &op, const Bindings &known, std::vector<PlannedKernel> &kernels)
      : op(op), known(known), kernels(kernels) {}

  void run() {
    for (size_t a = 0; a < kernels.size(); ++a)
      for (size_t b = 0; b < kernels.size(); ++b)
        if (a != b)
          if (std::optional<FusedRows> f = fusion(a, b)) {
            kernels[a].fusedRows = std::move(*f);
            kernels.erase(kernels.begin() + b);
            return run(); // indices moved: start over (a kernel takes one row assignment)
          }
  }

private:
  /// A condition of an if or a select, as the planner compares them: its text and the branch taken.
  using Condition = std::pair<std::string, bool>;

  static bool sameStep(const PathStep &a, const PathStep &b) {
    return a.let == b.let && a.ifStmt == b.ifStmt && a.thenBranch == b.thenBranch && a.forStmt == b.forStmt;
  }

  static bool readsTensor(const Expr &e) {
    if (e.kind == ExprKind::Element)
      return true;
    return std::any_of(e.operands.begin(), e.operands.end(), [](const ExprPtr &o) { return readsTensor(*o); }) ||
           std::any_of(e.lets.begin(), e.lets.end(), [](const Let &l) { return readsTensor(*l.value); });
  }

  /// The first sum of `e` on the way through casts and selects (a select's condition joins `conds`; one
  /// that `known` decides is followed into its taken branch), or null.
  const Expr *findSum(const Expr &e, std::vector<Condition> &conds) const {
    if (e.kind == ExprKind::Sum)
      return &e;
    if (e.kind == ExprKind::Cast)
      return findSum(*e.operands[0], conds);
    if (e.kind != ExprKind::Select)
      return nullptr;
    if (std::optional<bool> taken = decide(*e.operands[0], known))
      return findSum(*e.operands[*taken ? 1 : 2], conds);
    for (bool branch : {true, false}) {
      conds.push_back({printExpr(*e.operands[0]), branch});
      if (const Expr *sum = findSum(*e.operands[branch ? 1 : 2], conds))
        return sum;
      conds.pop_back();
    }
    return nullptr;
  }

  /// The non-static conditions of the ifs among `steps`; false if a step is not an if, or (`pure`) an if
  /// reads a tensor (the fused kernel evaluates row conditions before the sum, unguarded).
  bool ifConditions(const std::vector<PathStep> &steps, size_t from, bool pure, std::vector<Condition> &conds) const {
    for (size_t i = from; i < steps.size(); ++i) {
      const PathStep &step = steps[i];
      if (!step.ifStmt)
        return false;
      if (decide(*step.ifStmt->cond, known))
        continue;
      if (pure && readsTensor(*step.ifStmt->cond))
        return false;
      conds.push_back({printExpr(*step.ifStmt->cond), step.thenBranch});
    }
    return true;
  }

  static size_t forVariables(const std::vector<PathStep> &path) {
    size_t n = 0;
    for (const PathStep &step : path)
      if (step.forStmt)
        n += step.forStmt->vars.size();
    return n;
  }

  /// Row assignment `rows` fused into point kernel `point`, if the two can run as one (FusedRows).
  std::optional<FusedRows> fusion(size_t point, size_t rows) const {
    const PlannedKernel &a = kernels[point], &b = kernels[rows];
    if (!a.scatter || !b.scatter || a.fusedRows || b.fusedRows)
      return std::nullopt;
    const Assign &row = *b.assign;
    // a: one value per point of the `for`; b: whole rows along a fresh last index.
    size_t vars = forVariables(a.path);
    if (a.domain.size() != vars || b.domain.size() != vars + 1 || forVariables(b.path) != vars ||
        row.indexExprs.back() ||
        std::any_of(row.indexExprs.begin(), row.indexExprs.end() - 1, [](const ExprPtr &e) { return !e; }))
      return std::nullopt;
    size_t common = 0;
    while (common < a.path.size() && common < b.path.size() && sameStep(a.path[common], b.path[common]))
      ++common;
    for (size_t i = common; i < a.path.size(); ++i)
      if (a.path[i].forStmt)
        return std::nullopt;
    // The row's guard: its ifs from the first one after the `for` that `known` does not decide.
    size_t guardFrom = 0;
    for (size_t i = 0; i < b.path.size(); ++i)
      if (b.path[i].forStmt)
        guardFrom = i + 1;
    while (guardFrom < b.path.size() && (!b.path[guardFrom].ifStmt || decide(*b.path[guardFrom].ifStmt->cond, known)))
      ++guardFrom;
    if (guardFrom > common)
      return std::nullopt;
    // Where the row's conditions hold, the sum runs: its conditions are among them.
    std::vector<Condition> sumConds, rowConds;
    const Expr *sum = findSum(*a.assign->value, sumConds);
    if (!sum || !ifConditions(a.path, common, false, sumConds) || !ifConditions(b.path, guardFrom, true, rowConds))
      return std::nullopt;
    for (const Condition &c : sumConds)
      if (std::find(rowConds.begin(), rowConds.end(), c) == rowConds.end())
        return std::nullopt;
    if (printExpr(*sum->operands[0]) != printExpr(*op.tensors[row.tensorIndex].shape.back().size))
      return std::nullopt;
    // The row stores move to the point kernel's place. Outputs are write-only (Sema), so no statement reads
    // what another writes; only another write of the rows' tensor there or between would be reordered.
    int outB = row.tensorIndex;
    if (a.assign->tensorIndex == outB)
      return std::nullopt;
    for (size_t k = std::min(point, rows) + 1; k < std::max(point, rows); ++k)
      if (kernels[k].assign->tensorIndex == outB)
        return std::nullopt;
    return FusedRows{&row, b.path, common, guardFrom, sum, b.name};
  }

  const OpDef &op;
  const Bindings &known;
  std::vector<PlannedKernel> &kernels;
};

} // namespace

void fuseRows(const OpDef &op, const Bindings &known, std::vector<PlannedKernel> &kernels) {
  RowFusion(op, known, kernels).run();
}

} // namespace moec::dsl
