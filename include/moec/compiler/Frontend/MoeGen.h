//===- MoeGen.h - AST to the moe dialect -------------------------*- C++ -*-===//
#pragma once

#include "moec/dsl/AST.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace moec {

/// Emits one kernel `func.func` per assignment of `op`, with element type `typeArg` for the op's type
/// parameter. Every kernel has the same lean ABI, which the runtime relies on:
///
///   (one !llvm.ptr per tensor, in declaration order,
///    one index per runtime dim, in declaration order,
///    one index per runtime attribute, in declaration order)
///
/// Each argument carries `moe.arg = "tensor:NAME" | "dim:NAME" | "attr:NAME"`. Static dims and attrs are
/// `moe.param` ops, bound later by moe-specialize. The module carries `moe.op` and `moe.dtype`.
mlir::OwningOpRef<mlir::ModuleOp> genMoe(mlir::MLIRContext &context, const dsl::OpDef &op, dsl::DType typeArg);

/// The kernel name of the assignment to `output` ("moe_init_routing_v2_grad" for a one-output op,
/// else "<op>__<output>").
std::string kernelName(const dsl::OpDef &op, const std::string &output);

} // namespace moec
