//===- BodyLowering.h - moe.compute bodies to loops, shared by targets -*- C++ -*-===//
//
// Both loop lowerings (CPU: moe-lower-to-loops, GPU: moe-lower-to-gpu) differ only in where a row and a
// lane come from; what one row computes is the same. This file emits that part.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/compiler/Dialect/MoeDialect.h"

#include "mlir/IR/Builders.h"

namespace moec::moe {

/// Whether the body of `compute` can run `vector` contiguous elements at a time: values that depend on
/// the contiguous index may only feed elementwise arith ops, and loads only through that index itself as
/// their last subscript (a contiguous access). Conditions and reduction bounds must not depend on it.
bool isVectorizable(ComputeOp compute);

/// The number of rows of `compute`'s index space (all dims but the last, flattened; 1 for rank 1), and
/// the length of its contiguous (last) dim, as values at the builder's insertion point.
mlir::Value emitRowCount(mlir::OpBuilder &b, ComputeOp compute);
mlir::Value emitInnerSize(mlir::OpBuilder &b, ComputeOp compute);

/// Emits, at the builder's insertion point, the elements of flattened row `row` of `compute` whose
/// contiguous index h is laneStart*V, laneStart*V + laneStride*V, ... as vectors of V = schedule.vector,
/// then the remainder (h not covered because V does not divide the dim) one element at a time with the
/// same lane split. CPU: laneStart 0, laneStride 1. GPU: laneStart thread_id.x, laneStride block_dim.x.
/// `vectorAlignment` is the alignment of tensor base pointers; each vector access promises what that
/// implies for its rows (the largest power of two dividing the row stride, at most V elements).
void emitRow(mlir::OpBuilder &b, ComputeOp compute, mlir::Value row, mlir::Value laneStart,
             int64_t laneStride, int64_t vectorAlignment);

/// The schedule of `compute`; moe-schedule must have run.
ScheduleAttr getSchedule(ComputeOp compute);

} // namespace moec::moe
