//===- PredicatedFolds.h - A fold over its live steps only (private to Transforms) ---===//
//
// What moe-compact-predicated-folds (folds longer than the unroll) and moe-short-lists (folds of at most
// the unroll's steps whose live steps add terms) share: the split of a fold or sum whose steps are mostly
// no-ops into a moe.compact of the live steps and a reduction over that list (PredicatedFolds.cpp).
//===----------------------------------------------------------------------===//
#ifndef MOEC_COMPILER_TRANSFORMS_PREDICATEDFOLDS_H
#define MOEC_COMPILER_TRANSFORMS_PREDICATEDFOLDS_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

namespace moec::moe {

/// Which predicated reductions a pass compacts: those longer than the schedule's unroll factor, or those
/// of at most that many steps (which otherwise unroll fully and keep their branches).
enum class FoldLength { Long, Short };

/// Splits each qualifying moe.fold or moe.sum of `root`'s domains that runs along the row into a
/// moe.compact of its live steps and a reduction over that list, in the same order (bit-identical
/// results), within each domain's list budget (16 KiB of CPU stack, or of GPU shared memory per block),
/// which the lists the domain already has count against. `gpu`: lists live in shared memory, so only
/// domains lowered a row at a time whose lists are built in the row's prologue qualify; a short one must
/// be a fold, its live steps adding terms in T or f32 (on the CPU: an f32 sum or f32-carried fold).
/// `target` is the pass option: "cpu" or "gpu"; anything else is an error on `root`, and nothing changes.
mlir::LogicalResult compactPredicatedFolds(mlir::Operation *root, llvm::StringRef target, FoldLength which);

} // namespace moec::moe

#endif // MOEC_COMPILER_TRANSFORMS_PREDICATEDFOLDS_H
