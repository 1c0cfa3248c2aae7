// moe-unroll-lane-sums (GPU): a split sum's loop along a row (moe.lane_sum: a warp's dot product along a
// whole row, its results the lanes' partial sums; every lane runs it the same constant number of steps from
// its offset) runs from 0 with the offset added in its body, and unrolls by the largest power of two that
// keeps at most 32 vector loads per lane in one step (of at most 4), divides the steps and leaves at least
// two. @dot_sum's 16 steps of 2 loads unroll by 8 (16 loads a step, 2 steps). Left alone: @wide_dot_sum's
// step of 5 loads (a batch of points whose registers already set the kernel's count), @odd_dot_sum's 7
// steps (no power of two above 1 divides them). The mark is removed either way.
// RUN: moec-opt %s --moe-unroll-lane-sums | FileCheck %s

// CHECK-LABEL: func.func @dot_sum
// CHECK:       scf.for %[[J:.*]] = %{{c0.*}} to %c4096 step %c2048 iter_args
// CHECK-NEXT:  %[[AT:.*]] = arith.addi %arg2, %[[J]] : index
// CHECK-NEXT:  vector.load %{{.*}}[%{{.*}}, %[[AT]]]
// CHECK-COUNT-15: vector.load
// CHECK-NOT:   vector.load
// CHECK:       scf.yield
// CHECK-NOT:   moe.lane_sum
// CHECK:       return
// CHECK-LABEL: func.func @wide_dot_sum
// CHECK:       scf.for %{{.*}} = %arg2 to %c4096 step %c256 iter_args
// CHECK-NOT:   moe.lane_sum
// CHECK:       return
// CHECK-LABEL: func.func @odd_dot_sum
// CHECK:       scf.for %{{.*}} = %arg2 to %c1792 step %c256 iter_args
// CHECK-COUNT-2: vector.load
// CHECK-NOT:   vector.load
// CHECK-NOT:   moe.lane_sum
// CHECK:       return
func.func @dot_sum(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %rows: index, %offset: index) -> vector<8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %c4096 = arith.constant 4096 : index
  %zero = arith.constant dense<0.0> : vector<8xf32>
  %x = moe.view %xp[%rows, %c4096] : !llvm.ptr -> memref<?x4096xbf16>
  %sum = scf.for %j = %offset to %c4096 step %c256 iter_args(%acc = %zero) -> (vector<8xf32>) {
    %a = vector.load %x[%c0, %j] {alignment = 16 : i64} : memref<?x4096xbf16>, vector<8xbf16>
    %b = vector.load %x[%c1, %j] {alignment = 16 : i64} : memref<?x4096xbf16>, vector<8xbf16>
    %fa = arith.extf %a : vector<8xbf16> to vector<8xf32>
    %fb = arith.extf %b : vector<8xbf16> to vector<8xf32>
    %p = arith.mulf %fa, %fb : vector<8xf32>
    %next = arith.addf %acc, %p : vector<8xf32>
    scf.yield %next : vector<8xf32>
  } {moe.lane_sum}
  return %sum : vector<8xf32>
}
func.func @wide_dot_sum(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %rows: index, %offset: index) -> vector<8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c256 = arith.constant 256 : index
  %c4096 = arith.constant 4096 : index
  %zero = arith.constant dense<0.0> : vector<8xf32>
  %x = moe.view %xp[%rows, %c4096] : !llvm.ptr -> memref<?x4096xbf16>
  %sum = scf.for %j = %offset to %c4096 step %c256 iter_args(%acc = %zero) -> (vector<8xf32>) {
    %a = vector.load %x[%c0, %j] {alignment = 16 : i64} : memref<?x4096xbf16>, vector<8xbf16>
    %b = vector.load %x[%c1, %j] {alignment = 16 : i64} : memref<?x4096xbf16>, vector<8xbf16>
    %c = vector.load %x[%c2, %j] {alignment = 16 : i64} : memref<?x4096xbf16>, vector<8xbf16>
    %d = vector.load %x[%c3, %j] {alignment = 16 : i64} : memref<?x4096xbf16>, vector<8xbf16>
    %e = vector.load %x[%c4, %j] {alignment = 16 : i64} : memref<?x4096xbf16>, vector<8xbf16>
    %fa = arith.extf %a : vector<8xbf16> to vector<8xf32>
    %fe = arith.extf %e : vector<8xbf16> to vector<8xf32>
    %p = arith.mulf %fa, %fe : vector<8xf32>
    %next = arith.addf %acc, %p : vector<8xf32>
    scf.yield %next : vector<8xf32>
  } {moe.lane_sum}
  return %sum : vector<8xf32>
}
func.func @odd_dot_sum(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %rows: index, %offset: index) -> vector<8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %c1792 = arith.constant 1792 : index
  %zero = arith.constant dense<0.0> : vector<8xf32>
  %x = moe.view %xp[%rows, %c1792] : !llvm.ptr -> memref<?x1792xbf16>
  %sum = scf.for %j = %offset to %c1792 step %c256 iter_args(%acc = %zero) -> (vector<8xf32>) {
    %a = vector.load %x[%c0, %j] {alignment = 16 : i64} : memref<?x1792xbf16>, vector<8xbf16>
    %b = vector.load %x[%c1, %j] {alignment = 16 : i64} : memref<?x1792xbf16>, vector<8xbf16>
    %fa = arith.extf %a : vector<8xbf16> to vector<8xf32>
    %fb = arith.extf %b : vector<8xbf16> to vector<8xf32>
    %p = arith.mulf %fa, %fb : vector<8xf32>
    %next = arith.addf %acc, %p : vector<8xf32>
    scf.yield %next : vector<8xf32>
  } {moe.lane_sum}
  return %sum : vector<8xf32>
}
