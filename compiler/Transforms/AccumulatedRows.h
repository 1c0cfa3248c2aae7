//===- AccumulatedRows.h - A row's reduction over the whole row (private to Transforms) ---===//
//
// What the loops along a row (BodyLowering.cpp: emitRow, emitStagedRow) share with AccumulatedRows.cpp: the
// reduction a row accumulates step by step over the whole row, the span of a row a loop covers, and the
// passes of the reduction's steps into the row's accumulators.
//===----------------------------------------------------------------------===//
#ifndef MOEC_COMPILER_TRANSFORMS_ACCUMULATEDROWS_H
#define MOEC_COMPILER_TRANSFORMS_ACCUMULATEDROWS_H

#include "BodyEmitter.h"

#include <functional>
#include <memory>

namespace moec::moe {

/// The most fold steps one pass over an accumulated row runs (gathered rows read at once).
constexpr int64_t kJammedSteps = 8;

/// CPU: the reduction (moe.fold or moe.sum) of a row-at-a-time domain whose steps can run one after the
/// other over the whole row (an accumulated row, see emitRow), or null. It must
///   - vary along the row and add f32 terms (accumulatesTerms): a sum, or a fold whose step is `acc + x`
///     (either way round) or fma(x, w, acc), rounded to T after each step or not (C2 accumulating in T,
///     carried as f32), with acc used only there;
///   - have a bound (and init) that the row's prologue computes or that are defined outside the body, and
///     not be short enough to unroll fully;
///   - be followed only by elementwise arithmetic on its result (a truncation) up to the yield;
///   - while everything else in the body is row-invariant and the row has a constant length.
///   Staged (Ascend) rows take any such reduction with a float result (C2 accumulating in T too): their
///   loads along the row must read UB buffers that hold one gathered row at a time, whatever the bound.
///   `decided`: scf.if ops of the body whose branch is known (a staged row's switch), read as that branch.
mlir::Operation *accumulatedReduction(
    DomainOp op, const VaryingAnalysis &analysis, bool staged,
    const llvm::DenseMap<mlir::Operation *, bool> &decided = llvm::DenseMap<mlir::Operation *, bool>());

/// The part of a row a loop along it covers, [begin, end): the whole row on the CPU, a chunk on Ascend,
/// whose buffers are indexed from the chunk's start (`offset`; null: 0).
struct RowSpan {
  mlir::Value begin, end, offset;
  mlir::Value local(mlir::OpBuilder &b, mlir::Location loc, mlir::Value h) const {
    return offset ? mlir::Value(mlir::arith::SubIOp::create(b, loc, h, offset)) : h;
  }
};

/// Loops over `span` (a vector part, then the scalar rest), `body(h, w)` for each.
void overSpan(mlir::OpBuilder &b, mlir::Location loc, const RowSpan &span, int64_t width,
              const std::function<void(mlir::Value, int64_t)> &body);

/// The steps of `accumulated` (an accumulatedReduction) for the row at `rowIndices`, each over the whole
/// row (`span`) instead of every step for each vector: into `accumulators` (f32; a staged row's reduction
/// type on Ascend), set to the reduction's init (+0.0 for a sum), then passes of 8 steps (the last one
/// masked: its steps past the bound are dropped; one at a time for a staged row, whose UB holds one gathered
/// row per step), each reading its steps' gathered rows at once and adding their terms to each element in
/// step order. Each element adds its terms in the same order as the plain lowering, so results are the
/// same; a step's row-invariant work (its list entry, index load and check) runs once per pass instead of
/// once per vector.
/// `newEmitter(w)` makes an emitter of width w that starts from the row's prologue.
void emitAccumulatedSteps(mlir::OpBuilder &b, DomainOp op, mlir::Operation *accumulated,
                          llvm::ArrayRef<mlir::Value> rowIndices, int64_t width, const RowSpan &span,
                          mlir::Value accumulators, StagedRow *staged,
                          llvm::function_ref<std::unique_ptr<BodyEmitter>(int64_t)> newEmitter);

} // namespace moec::moe

#endif // MOEC_COMPILER_TRANSFORMS_ACCUMULATEDROWS_H
