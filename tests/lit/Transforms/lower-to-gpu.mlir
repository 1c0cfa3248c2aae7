// moe-lower-to-gpu: each kernel func.func becomes a gpu.func kernel in a gpu.module, with the launch
// block recorded as known_block_size = (threads, rowsPerBlock, 1). row = block_id.x * Y + thread_id.y,
// guarded by row < rows; along the row, thread_id.x * V steps by X * V with 16-byte vector accesses, and a
// scalar remainder strided by X when V does not divide H. Input: `moec emit --target ptx --emit moe`.
// RUN: moec-opt %s --moe-lower-to-gpu | FileCheck %s

// CHECK: module attributes {gpu.container_module
// CHECK-NEXT: gpu.module @moe_kernels {
// CHECK-NOT: func.func

// bf16, H = 7168: 256 threads x 8 lanes = 2048 elements a stride, no remainder.
// CHECK-LABEL: gpu.func @bf16_h7168_k8
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 256, 1, 1>, moe.rows_per_block = 1 : i64}
// CHECK: %[[BX:.*]] = gpu.block_id  x
// CHECK: %[[B:.*]] = arith.muli %[[BX]], %{{.*}} : index
// CHECK: %[[TY:.*]] = gpu.thread_id  y
// CHECK: %[[ROW:.*]] = arith.addi %[[B]], %[[TY]] : index
// CHECK: %[[ROWS:.*]] = arith.muli %{{.*}}, %arg3 : index
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[ROW]], %[[ROWS]] : index
// CHECK: scf.if %[[IN]] {
// CHECK: %[[TX:.*]] = gpu.thread_id  x
// CHECK: %[[START:.*]] = arith.muli %[[TX]], %{{.*}} : index
// CHECK: %[[STRIDE:.*]] = arith.constant 2048 : index
// CHECK: scf.for %[[H:.*]] = %[[START]] to %{{.*}} step %[[STRIDE]] {
// CHECK: vector.load %{{.*}}[%{{.*}}, %[[H]]] {alignment = 16 : i64} : memref<?x7168xbf16>, vector<8xbf16>
// CHECK: vector.store %{{.*}}, %{{.*}}[%[[ROW]], %[[H]]] {alignment = 16 : i64} : memref<?x7168xbf16>, vector<8xbf16>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: gpu.return

// f32, H = 7: vector 1, 32 threads x 4 rows a block; a scalar loop from thread_id.x step 32.
// CHECK-LABEL: gpu.func @f32_h7_k2
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 32, 4, 1>, moe.rows_per_block = 4 : i64}
// CHECK: %[[BX:.*]] = gpu.block_id  x
// CHECK: %[[B:.*]] = arith.muli %[[BX]], %c4 : index
// CHECK: %[[TY:.*]] = gpu.thread_id  y
// CHECK: %[[ROW:.*]] = arith.addi %[[B]], %[[TY]] : index
// CHECK: scf.if
// CHECK: %[[TX:.*]] = gpu.thread_id  x
// CHECK-NOT: vector.
// CHECK: scf.for %[[H:.*]] = %[[TX]] to %c7 step %c32 {
// CHECK-NOT: vector.
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[ROW]], %[[H]]] : memref<?x7xf32>
// CHECK: gpu.return

// bf16, H = 1023 with vector = 8 requested: a vector loop over the first 1016 and a scalar remainder from
// 1016 + thread_id.x step 128; K = 64 is a reduction loop unrolled by 8.
// CHECK-LABEL: gpu.func @bf16_h1023_vector8
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK: %[[TX:.*]] = gpu.thread_id  x
// CHECK: %[[MAIN:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK: %[[START:.*]] = arith.muli %[[TX]], %{{.*}} : index
// CHECK: scf.for %[[H:.*]] = %[[START]] to %[[MAIN]] step %c1024 {
// CHECK: scf.for %{{.*}} = %{{.*}} to %c64 step %c8{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (vector<8xf32>) {
// CHECK: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %[[H]]] {{.*}} : memref<?x1023xbf16>, vector<8xbf16>
// CHECK: %[[TAIL:.*]] = arith.addi %[[MAIN]], %[[TX]] : index
// CHECK: scf.for %[[HS:.*]] = %[[TAIL]] to %c1023 step %c128 {
// CHECK: scf.for %{{.*}} = %{{.*}} to %c64 step %c8{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (f32) {
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %[[HS]]] : memref<?x1023xbf16>
// CHECK: gpu.return

module attributes {moe.op = "moe_init_routing_v2_grad"} {
  func.func @bf16_h7168_k8(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %arg3: index, %arg4: index, %arg5: index) {
    %cst = arith.constant 0.000000e+00 : f32
    %c7168 = arith.constant 7168 : index
    %c8 = arith.constant 8 : index
    %c0 = arith.constant 0 : index
    %0 = moe.view %arg0[%arg4, %c7168] : !llvm.ptr -> memref<?x7168xbf16>
    %1 = arith.muli %arg3, %c8 : index
    %2 = moe.view %arg1[%1] : !llvm.ptr -> memref<?xi32>
    %3 = moe.view %arg2[%arg3, %c7168] : !llvm.ptr -> memref<?x7168xbf16>
    moe.compute %3[%arg3, %c7168] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 256, vector = 8, unroll = 8>} : memref<?x7168xbf16> {
    ^bb0(%arg6: index, %arg7: index):
      %4 = moe.sum %c8 : f32 {
      ^bb0(%arg8: index):
        %6 = arith.muli %arg6, %c8 : index
        %7 = arith.addi %6, %arg8 : index
        %8 = memref.load %2[%7] : memref<?xi32>
        %9 = arith.index_cast %8 : i32 to index
        %10 = arith.cmpi eq, %arg5, %c0 : index
        %11 = arith.cmpi slt, %9, %arg5 : index
        %12 = arith.ori %10, %11 : i1
        %13 = scf.if %12 -> (f32) {
          %14 = memref.load %0[%9, %arg7] : memref<?x7168xbf16>
          %15 = arith.extf %14 : bf16 to f32
          scf.yield %15 : f32
        } else {
          scf.yield %cst : f32
        }
        moe.yield %13 : f32
      }
      %5 = arith.truncf %4 : f32 to bf16
      moe.yield %5 : bf16
    }
    return
  }

  func.func @f32_h7_k2(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %arg3: index, %arg4: index, %arg5: index) {
    %cst = arith.constant 0.000000e+00 : f32
    %c7 = arith.constant 7 : index
    %c2 = arith.constant 2 : index
    %c0 = arith.constant 0 : index
    %0 = moe.view %arg0[%arg4, %c7] : !llvm.ptr -> memref<?x7xf32>
    %1 = arith.muli %arg3, %c2 : index
    %2 = moe.view %arg1[%1] : !llvm.ptr -> memref<?xi32>
    %3 = moe.view %arg2[%arg3, %c7] : !llvm.ptr -> memref<?x7xf32>
    moe.compute %3[%arg3, %c7] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 1, unroll = 8>} : memref<?x7xf32> {
    ^bb0(%arg6: index, %arg7: index):
      %4 = moe.sum %c2 : f32 {
      ^bb0(%arg8: index):
        %5 = arith.muli %arg6, %c2 : index
        %6 = arith.addi %5, %arg8 : index
        %7 = memref.load %2[%6] : memref<?xi32>
        %8 = arith.index_cast %7 : i32 to index
        %9 = arith.cmpi eq, %arg5, %c0 : index
        %10 = arith.cmpi slt, %8, %arg5 : index
        %11 = arith.ori %9, %10 : i1
        %12 = scf.if %11 -> (f32) {
          %13 = memref.load %0[%8, %arg7] : memref<?x7xf32>
          scf.yield %13 : f32
        } else {
          scf.yield %cst : f32
        }
        moe.yield %12 : f32
      }
      moe.yield %4 : f32
    }
    return
  }

  func.func @bf16_h1023_vector8(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %arg3: index, %arg4: index, %arg5: index) {
    %cst = arith.constant 0.000000e+00 : f32
    %c1023 = arith.constant 1023 : index
    %c64 = arith.constant 64 : index
    %c0 = arith.constant 0 : index
    %0 = moe.view %arg0[%arg4, %c1023] : !llvm.ptr -> memref<?x1023xbf16>
    %1 = arith.muli %arg3, %c64 : index
    %2 = moe.view %arg1[%1] : !llvm.ptr -> memref<?xi32>
    %3 = moe.view %arg2[%arg3, %c1023] : !llvm.ptr -> memref<?x1023xbf16>
    moe.compute %3[%arg3, %c1023] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 128, vector = 8, unroll = 8>} : memref<?x1023xbf16> {
    ^bb0(%arg6: index, %arg7: index):
      %4 = moe.sum %c64 : f32 {
      ^bb0(%arg8: index):
        %6 = arith.muli %arg6, %c64 : index
        %7 = arith.addi %6, %arg8 : index
        %8 = memref.load %2[%7] : memref<?xi32>
        %9 = arith.index_cast %8 : i32 to index
        %10 = arith.cmpi eq, %arg5, %c0 : index
        %11 = arith.cmpi slt, %9, %arg5 : index
        %12 = arith.ori %10, %11 : i1
        %13 = scf.if %12 -> (f32) {
          %14 = memref.load %0[%9, %arg7] : memref<?x1023xbf16>
          %15 = arith.extf %14 : bf16 to f32
          scf.yield %15 : f32
        } else {
          scf.yield %cst : f32
        }
        moe.yield %13 : f32
      }
      %5 = arith.truncf %4 : f32 to bf16
      moe.yield %5 : bf16
    }
    return
  }

}
