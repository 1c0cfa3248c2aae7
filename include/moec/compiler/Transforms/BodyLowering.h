//===- BodyLowering.h - Domain bodies to loops, shared by targets -*- C++ -*-===//
//
// moe.compute and moe.scatter both run a body over an index domain: rows (all dims but the last,
// flattened) and a contiguous last dim. The loop lowerings (CPU: moe-lower-to-loops, GPU:
// moe-lower-to-gpu) differ only in where a row and a lane come from; this file emits the rest.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/compiler/Dialect/MoeDialect.h"

#include "mlir/IR/Builders.h"

namespace moec::moe {

/// A moe.compute or moe.scatter, seen through what the lowerings need.
class DomainOp {
public:
  /// Null unless `op` is a moe.compute or moe.scatter.
  static DomainOp dyn(mlir::Operation *op);

  mlir::Operation *op() const { return operation; }
  explicit operator bool() const { return operation != nullptr; }
  mlir::Value output() const { return operation->getOperand(0); }
  mlir::OperandRange bounds() const { return operation->getOperands().drop_front(); }
  mlir::Block &body() const { return operation->getRegion(0).front(); }
  ScheduleAttr schedule() const;
  void setSchedule(ScheduleAttr schedule);
  bool isScatter() const { return mlir::isa<ScatterOp>(operation); }

private:
  mlir::Operation *operation = nullptr;
};

/// Every moe.compute / moe.scatter under `root`, in order.
llvm::SmallVector<DomainOp> collectDomainOps(mlir::Operation *root);

/// Whether the body can run `vector` contiguous elements at a time: values that depend on the last
/// domain index may only feed elementwise arith/math ops, loads and stores only through that index itself
/// as their last subscript (a contiguous access). Conditions, guards and reduction bounds must not
/// depend on it.
bool isVectorizable(DomainOp op);

/// The number of rows of the domain (all dims but the last, flattened; 1 for rank 1), at the builder's
/// insertion point.
mlir::Value emitRowCount(mlir::OpBuilder &b, DomainOp op);

/// Emits, at the builder's insertion point, the points of flattened row `row` whose last index h is
/// laneStart*V, laneStart*V + laneStride*V, ... as vectors of V = schedule.vector, then the remainder
/// (h not covered because V does not divide the dim) one element at a time with the same lane split.
/// CPU: laneStart 0, laneStride 1. GPU: laneStart thread_id.x, laneStride block_dim.x.
/// `vectorAlignment` is the alignment of tensor base pointers; each vector access promises what that
/// implies for its rows (the largest power of two dividing the row stride, at most V elements).
void emitRow(mlir::OpBuilder &b, DomainOp op, mlir::Value row, mlir::Value laneStart, int64_t laneStride,
             int64_t vectorAlignment);

} // namespace moec::moe
