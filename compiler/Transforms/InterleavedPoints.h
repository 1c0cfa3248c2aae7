//===- InterleavedPoints.h - Points whose dot products run together (private to Transforms) ---===//
//
// What the point kernels that interleave their points' dot products share (PointLowering.cpp: a CPU range of
// points; WarpPointRows.cpp: a GPU warp's row of points): the plan of a body split around its dot product,
// and the emission of the waiting points and of a point that is not live (InterleavedPoints.cpp).
//===----------------------------------------------------------------------===//
#ifndef MOEC_COMPILER_TRANSFORMS_INTERLEAVEDPOINTS_H
#define MOEC_COMPILER_TRANSFORMS_INTERLEAVEDPOINTS_H

#include "BodyEmitter.h"

#include <memory>
#include <optional>

namespace moec::moe {

/// How a point kernel's body splits around its dot product for interleaving (emitPointRange):
///   before:  the top-level ops before `carrier`, run for each point in order;
///   carrier: the sum itself, or an scf.if whose then-block starts with it (the point is live when the
///            condition holds; its else-block runs at once for the others);
///   after:   the rest of the then-block (pure arithmetic on the sum), then the top-level ops after the
///            carrier and the write, run for the live points once their sums are known.
/// `saved` are the values of `before` (and the point's indices) that the sum or `after` use: kept per
/// pending point in small stack arrays.
struct InterleavedPoints {
  SumOp sum;
  mlir::Operation *carrier = nullptr;
  mlir::scf::IfOp carrierIf; // null when the carrier is the sum
  llvm::SmallVector<mlir::Value> saved;
};

/// The split, or nothing when the body does not have that shape: the sum's rows are shorter than
/// `minRowBytes` or not of a constant length;
/// the then-block does more than pure arithmetic after the sum; a saved value is not a scalar; or what
/// runs late reads memory that `before` writes (it would see later points' writes).
std::optional<InterleavedPoints> interleavedPoints(DomainOp op, int64_t minRowBytes);

/// The waiting points of `plan` (emitters with their saved values mapped): their sums together, then each
/// one's late ops and write, under its flag in `actives` where that is given (see splitSums).
void finishPoints(mlir::OpBuilder &b, InterleavedPoints plan, DomainOp op,
                  llvm::ArrayRef<std::unique_ptr<BodyEmitter>> emitters, llvm::ArrayRef<mlir::Value> actives);

/// A point that is not live (its carrier's condition false), at `indices`: the carrier's else-block and what
/// comes after the carrier, its write included, now (`early` emitted the ops before the carrier).
void emitDeadPoint(InterleavedPoints plan, DomainOp op, BodyEmitter &early, mlir::ValueRange indices);

} // namespace moec::moe

#endif // MOEC_COMPILER_TRANSFORMS_INTERLEAVEDPOINTS_H
