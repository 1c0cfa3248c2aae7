//===- MoeGen.h - AST to the moe dialect -------------------------*- C++ -*-===//
#pragma once

#include "moec/dsl/AST.h"
#include "moec/dsl/KernelPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace moec {

struct MoeModule {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<dsl::PlannedKernel> kernels; // one function each, in the order they must run
  std::vector<std::vector<dsl::IndexCheck>> checks; // per kernel: the bounds checks it reports
};

/// A body that cannot be emitted for this specialization, e.g. it reads an optional tensor that is
/// absent outside a `present()` guard. The message carries file:line:col.
class GenError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Emits one kernel `func.func` per assignment of `op` (a dense `moe.compute`, or a `moe.scatter` when
/// the assignment sits in a `for`), with element type `typeArg` for the op's type parameter and the
/// optional tensors in `present` given. Conditions that present() and the `statics` (static dims and
/// attributes by public name) decide pick their branch here, so a branch that reads an absent tensor
/// is never emitted; static values elsewhere stay `moe.param`s for moe-specialize to fold. Every kernel
/// has the same lean ABI:
///
///   (one !llvm.ptr per tensor, in declaration order (absent optional tensors too: null),
///    one !llvm.ptr to the status buffer of the kernel's bounds checks (int64[2 * checks]),
///    one index per runtime dim, in declaration order,
///    one index per runtime attribute, in declaration order)
///
/// Each argument carries its role, `moe.arg = #moe.arg<tensor, "NAME">` (or `<status>`, `<dim, "NAME">`, `<attr, "NAME">`).
/// (moe-fill-uncovered-rows may add a `workspace` pointer after the status buffer to every kernel.)
///
/// Every gather and scatter index that is not provably inside its dim (a domain, for, sum or fold
/// variable whose bound is that dim, or `i * B + j` over a dim `A * B`) is checked in the kernel: an
/// access outside reads zero or stores nothing, and records itself in the status buffer (IndexCheck). Static dims and attrs are
/// `moe.param` ops, bound later by moe-specialize. The module carries `moe.op` and `moe.dtype`.
/// With `fuseRowStores`, a row assignment that planKernels fuses into a point kernel's dot product
/// (dsl::FusedRows) is emitted inside that kernel's moe.sum, as a moe.row_store of element j of its row.
MoeModule genMoe(mlir::MLIRContext &context, const dsl::OpDef &op, dsl::DType typeArg,
                 const std::set<std::string> &present = {}, const std::map<std::string, int64_t> &statics = {},
                 bool fuseRowStores = false);

} // namespace moec
