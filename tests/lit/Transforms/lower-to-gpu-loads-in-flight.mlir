// The GPU's loop along a split sum's row, unrolled for loads in flight (moe-lower-to-gpu): a warp per
// point covers the whole row (here a dot product of two bf16 rows of 4096, vector 8: 16 steps of 256
// elements), and each step's loads are used in that step, so with few warps per SM the warp waits once
// per step. The loop is unrolled by the largest power of two that keeps at most 16 vector loads per lane
// in one step (2 loads a step: 8 steps), and a loop of single steps takes what remains; the partial sums
// still add their terms in the same order.
// RUN: moec-opt %s --moe-lower-to-gpu --canonicalize | FileCheck %s

// CHECK-LABEL: gpu.func @dot_rows
// CHECK: %[[MAIN:.*]] = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c2048 iter_args(%[[ACC:.*]] = %cst) -> (vector<8xf32>) {
// CHECK-COUNT-16: vector.load
// CHECK-NOT: vector.load
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[REST:.*]] = scf.for %{{.*}} = %{{.*}} to %c4096 step %c256 iter_args(%{{.*}} = %[[MAIN]]) -> (vector<8xf32>) {
// CHECK-COUNT-2: vector.load
// CHECK-NOT: vector.load
// CHECK: scf.yield
// CHECK: vector.reduction <add>, %[[REST]]

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
}
