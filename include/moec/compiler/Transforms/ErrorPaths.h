//===- ErrorPaths.h - Which branches report a failed check -------*- C++ -*-===//
//
// A check the compiler derives (a gather's bounds) is a branch whose other side writes the kernel's status
// buffer. Passes that treat checks apart from other branches (moe-version-row-loops, the GPU's step tables)
// recognize them here.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/compiler/Dialect/MoeDialect.h"

#include "mlir/IR/Region.h"
#include "mlir/IR/Value.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringRef.h"

namespace moec::moe {

/// The function whose argument `arg` is (null for another block's argument, or a gpu.func's memory attribution).
mlir::FunctionOpInterface kernelArgumentOwner(mlir::BlockArgument arg);

/// Whether `memref` views a tensor argument that the kernel only reads (`llvm.readonly`).
bool viewsReadOnlyTensor(mlir::Value memref);

/// Whether `v` is the kernel's status buffer, or a view of it (func argument `moe.arg = #moe.arg<status>`).
bool isStatus(mlir::Value v);

/// Whether `region` is an error path: it writes the status buffer itself (not in a branch nested in it, which is that
/// branch's error path).
bool reportsError(mlir::Region &region);

/// Whether `condition` is a check's: some scf.if on it reports an error when it is false.
bool isCheckCondition(mlir::Value condition);

/// Marks a GPU step table's "the check holds at every step" vote (moe-lower-to-gpu) that is false only where a
/// step that runs the check fails it: a row whose vote is false reports an error (moe-version-row-loops).
inline constexpr llvm::StringLiteral kExactCheckVote = MoeDialect::ExactCheckVoteAttrHelper::getNameStr();

} // namespace moec::moe
