// The GPU's loop along a split sum's row, unrolled for loads in flight: a warp per point covers the whole
// row (here a dot product of two bf16 rows of 4096, vector 8: 16 steps of 256 elements), and each step's
// loads are used in that step, so with few warps per SM the warp waits once per step. moe-lower-to-gpu marks
// the loop moe.lane_sum (every lane runs it the same constant number of steps; its results are partial
// sums), and moe-unroll-lane-sums unrolls it by the largest power of two that keeps at
// most 32 vector loads per lane in one step, divides the steps and leaves at least two (2 loads a step: 8
// steps). It runs from 0 with the lane's offset added in its body, so that every lane runs the same constant
// number of steps and no remainder loop is needed; the partial sums still add their terms in the same
// order. A row of 7168 (28 steps) unrolls by 4: 4 divides 28 and leaves 7 steps, though 8 does not divide
// them. With loads-in-flight off the pipeline runs no moe-unroll-lane-sums: the marked loop stays.
// RUN: moec-opt %s --moe-lower-to-gpu --canonicalize | FileCheck %s --check-prefix=MARKED
// RUN: moec-opt %s --moe-lower-to-gpu --moe-unroll-lane-sums --canonicalize | FileCheck %s

// MARKED-LABEL: gpu.func @dot_rows
// MARKED: scf.for %{{.*}} = %{{.*}} to %c4096 step %c256 iter_args
// MARKED-COUNT-2: vector.load
// MARKED-NOT: vector.load
// MARKED: } {moe.lane_sum}
// MARKED-LABEL: gpu.func @dot_rows_28_steps
// MARKED: } {moe.lane_sum}

// CHECK-LABEL: gpu.func @dot_rows
// CHECK: %[[OFFSET:.*]] = arith.muli %thread_id_x, %c8 : index
// CHECK: %[[SUM:.*]] = scf.for %[[J:.*]] = %c0 to %c4096 step %c2048 iter_args(%{{.*}} = %cst) -> (vector<8xf32>) {
// CHECK-NEXT: %[[AT:.*]] = arith.addi %[[OFFSET]], %[[J]] : index
// CHECK-NEXT: vector.load %{{.*}}[%{{.*}}, %[[AT]]]
// CHECK-COUNT-15: vector.load
// CHECK-NOT: vector.load
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: vector.reduction <add>, %[[SUM]]

// CHECK-LABEL: gpu.func @dot_rows_28_steps
// CHECK: scf.for %{{.*}} = %c0 to %c7168 step %c1024 iter_args
// CHECK-COUNT-8: vector.load
// CHECK-NOT: vector.load
// CHECK: scf.yield

module attributes {moe.op = "dot_rows"} {
  func.func @dot_rows(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %arg3: index) {
    %c4096 = arith.constant 4096 : index
    %0 = moe.view %arg0[%arg3, %c4096] : !llvm.ptr -> memref<?x4096xbf16>
    %1 = moe.view %arg1[%arg3, %c4096] : !llvm.ptr -> memref<?x4096xbf16>
    %2 = moe.view %arg2[%arg3] : !llvm.ptr -> memref<?xf32>
    moe.compute %2[%arg3] {schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 8, unroll = 1>} : memref<?xf32> {
    ^bb0(%t: index):
      %4 = moe.sum %c4096 : f32 {
      ^bb0(%j: index):
        %5 = memref.load %0[%t, %j] : memref<?x4096xbf16>
        %6 = memref.load %1[%t, %j] : memref<?x4096xbf16>
        %7 = arith.extf %5 : bf16 to f32
        %8 = arith.extf %6 : bf16 to f32
        %9 = arith.mulf %7, %8 : f32
        moe.yield %9 : f32
      }
      moe.yield %4 : f32
    }
    return
  }
  func.func @dot_rows_28_steps(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %arg3: index) {
    %c7168 = arith.constant 7168 : index
    %0 = moe.view %arg0[%arg3, %c7168] : !llvm.ptr -> memref<?x7168xbf16>
    %1 = moe.view %arg1[%arg3, %c7168] : !llvm.ptr -> memref<?x7168xbf16>
    %2 = moe.view %arg2[%arg3] : !llvm.ptr -> memref<?xf32>
    moe.compute %2[%arg3] {schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 8, unroll = 1>} : memref<?xf32> {
    ^bb0(%t: index):
      %4 = moe.sum %c7168 : f32 {
      ^bb0(%j: index):
        %5 = memref.load %0[%t, %j] : memref<?x7168xbf16>
        %6 = memref.load %1[%t, %j] : memref<?x7168xbf16>
        %7 = arith.extf %5 : bf16 to f32
        %8 = arith.extf %6 : bf16 to f32
        %9 = arith.mulf %7, %8 : f32
        moe.yield %9 : f32
      }
      moe.yield %4 : f32
    }
    return
  }
}
