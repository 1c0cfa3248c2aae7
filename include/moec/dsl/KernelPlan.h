//===- KernelPlan.h - Which kernels an op specializes to ---------*- C++ -*-===//
//
// Every assignment of an op body is one kernel. Planning is pure AST work, shared by the compiler (which
// emits each kernel) and the runtime (which launches kernels compiled ahead of time, without LLVM):
// which assignments a specialization keeps, the statements on the way to each, its stable name, and the
// extents of its domain.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/dsl/AST.h"
#include "moec/dsl/Eval.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace moec::dsl {

/// One statement on the way from the op body to an assignment: a let, a taken branch of an if, or a for.
struct PathStep {
  const Let *let = nullptr;
  const IfStmt *ifStmt = nullptr;
  bool thenBranch = true;
  const ForStmt *forStmt = nullptr;
};

/// A gather or scatter whose indices the compiler could not prove in bounds: the kernel checks them,
/// skips the access when one is outside its dim, and reports it in the kernel's status buffer (two
/// int64 per check, in order: the failing dim + 1, then the index value). The runtime names it with this.
struct IndexCheck {
  static constexpr int kDivision = -1; // not an access: an integer division by zero (or INT64_MIN / -1)
  int tensor = 0; // index into OpDef::tensors, or kDivision
  int line = 0, col = 0;
};

/// Statement fusion: an assignment of whole rows along a dot product's index (`G[row, h] = ..` for h < H)
/// that runs inside another kernel's `sum(j < H)`, at the same point of the same `for`, so that each row
/// both read for the sum and written for the assignment is visited once (A3 with probs: the prob's dot
/// product over the unpermuted grad's row and the scaled copy of that row). The assignment stores element
/// j of its row as the sum adds term j; it stores when its own conditions hold, which imply the sum's.
struct FusedRows {
  const Assign *assign = nullptr; // the row assignment; its last index is the row's fresh one
  std::vector<PathStep> path;     // the statements on its way: this kernel's first `common`, then ifs
  size_t common = 0;
  size_t guardFrom = 0;           // its ifs from here on (no lets; none reads a tensor) guard the store;
                                  // <= common: the frontend computes the guard before the sum's ifs
  const Expr *sum = nullptr;      // the sum of this kernel's value that it runs in
  std::string name;               // the kernel it would have been
};

struct PlannedKernel {
  std::string name;             // "<op>" for a one-assignment op, else "<op>__<n>_<output>"
  const Assign *assign = nullptr;
  std::vector<PathStep> path;   // lets, ifs and fors enclosing (and preceding) the assignment
  /// Extents of the domain: every enclosing for-bound, then the target dims the assignment names freshly
  /// (for a dense assignment: the target's shape). Rows = all but the last, multiplied.
  std::vector<const Expr *> domain;
  bool scatter = false; // inside a `for`: a moe.scatter, else a dense moe.compute
  std::optional<FusedRows> fusedRows; // planKernels(.., fuseRowStores): a row assignment it also runs
};

/// Where a specialization's workspace puts each buffer: at offsets rounded up to this many bytes.
constexpr int64_t kWorkspaceAlignment = 64;

/// The kernels of `op` for a specialization, in the order they must run. `known` holds what is decided
/// at specialization time: presence of optional tensors (inputs given, outputs whose `when` holds) and
/// static dims/attrs. Branches whose condition `known` decides are kept or dropped here; assignments to
/// absent optional outputs are dropped. Names are stable across specializations.
/// With `fuseRowStores`, a row assignment that can run inside another kernel's dot product (FusedRows: same
/// `for` point, its conditions imply the sum's, no kernel between them writes its tensor) is not a kernel
/// of its own but that kernel's `fusedRows`.
std::vector<PlannedKernel> planKernels(const OpDef &op, const Bindings &known, bool fuseRowStores = false);

/// Statement fusion over planned kernels (see planKernels' `fuseRowStores`; RowFusion.cpp): each row
/// assignment that can run inside another kernel's dot product becomes that kernel's fusedRows.
void fuseRows(const OpDef &op, const Bindings &known, std::vector<PlannedKernel> &kernels);

/// What a specialization decides before any kernel runs: which optional tensors are present (`present`
/// holds the given inputs and the outputs whose `when` holds) and the static dims/attrs (by public name;
/// attributes are also bound under their alias).
Bindings specializationBindings(const OpDef &op, const std::set<std::string> &present,
                                const std::map<std::string, int64_t> &statics);

/// Evaluates `cond` with `known`, or nothing when it depends on something else.
std::optional<bool> decide(const Expr &cond, const Bindings &known);

} // namespace moec::dsl
