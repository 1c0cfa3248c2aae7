// Integer-sum folds that a converged warp would compute alike are split over its 32 lanes. A3's data
// gradient with routing_map and probs (f32, E = 4, H = 64, GPU schedule): rows are (token, expert) pairs,
// and the prefix count over the routing map is row-invariant, so it runs in the row's prologue, where
// each warp is converged on one row: lane l counts entries l, l + 32, ..., and a shuffle tree (64-bit
// sums as two 32-bit halves) adds the lanes' counts. Along the row nothing is split.
// RUN: moec-opt %s --moe-hoist-row-invariants --moe-lower-to-gpu --canonicalize | FileCheck %s
// Without the hoisting the fold runs along the row, where lanes diverge: no split.
// RUN: moec-opt %s --moe-lower-to-gpu --canonicalize | FileCheck %s --check-prefix=ALONG

// CHECK: gpu.func @moe_token_unpermute_with_routing_map_grad__5_permuted_tokens_grad
// CHECK: %[[LANE:.*]] = arith.remui %thread_id_x{{.*}}, %c32 : index
// CHECK: %[[PART:.*]] = scf.for %{{.*}} = %[[LANE]] to %{{.*}} step %c32 iter_args
// CHECK: arith.index_cast %[[PART]] : index to i64
// CHECK-COUNT-10: gpu.shuffle  xor
// CHECK: scf.if
// CHECK: vector.load
// CHECK: vector.store
// CHECK-NOT: gpu.shuffle

// ALONG-NOT: gpu.shuffle
// ALONG: vector.store

module attributes {moe.dtype = "f32", moe.op = "moe_token_unpermute_with_routing_map_grad"} {
  func.func @moe_token_unpermute_with_routing_map_grad__5_permuted_tokens_grad(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "unpermuted_tokens_grad">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "out_index">}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permute_token_id">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "routing_map">}, %arg4: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permuted_tokens">}, %arg5: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "probs">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "permuted_tokens_grad">}, %arg7: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "probs_grad">}, %arg8: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg9: index {moe.arg = #moe.arg<dim, "Tk">}, %arg10: index {moe.arg = #moe.arg<dim, "R">}) {
    %c5 = arith.constant 5 : index
    %cst = arith.constant 0.000000e+00 : f32
    %true = arith.constant true
    %c0_i32 = arith.constant 0 : i32
    %c3 = arith.constant 3 : index
    %c2 = arith.constant 2 : index
    %c0_i8 = arith.constant 0 : i8
    %c1 = arith.constant 1 : index
    %c1_i64 = arith.constant 1 : i64
    %c-9223372036854775808 = arith.constant -9223372036854775808 : index
    %c-1 = arith.constant -1 : index
    %c6 = arith.constant 6 : index
    %c4 = arith.constant 4 : index
    %c64 = arith.constant 64 : index
    %c0 = arith.constant 0 : index
    %0 = moe.view %arg8[%c6] : !llvm.ptr -> memref<6xi64>
    %1 = moe.view %arg6[%arg10, %c64] : !llvm.ptr -> memref<?x64xf32>
    %2 = moe.view %arg3[%arg9, %c4] : !llvm.ptr -> memref<?x4xi8>
    %3 = moe.view %arg1[%arg10] : !llvm.ptr -> memref<?xi32>
    %4 = moe.view %arg0[%arg9, %c64] : !llvm.ptr -> memref<?x64xf32>
    %5 = moe.view %arg5[%arg9, %c4] : !llvm.ptr -> memref<?x4xf32>
    %6 = arith.cmpi eq, %arg9, %c0 : index
    %7 = arith.cmpi eq, %arg9, %c-1 : index
    %8 = arith.cmpi eq, %arg10, %c-9223372036854775808 : index
    %9 = arith.andi %7, %8 : i1
    %10 = arith.ori %6, %9 : i1
    scf.if %10 {
      memref.store %c1_i64, %0[%c0] : memref<6xi64>
      %13 = arith.index_cast %arg10 : index to i64
      memref.store %13, %0[%c1] : memref<6xi64>
    }
    %11 = arith.select %10, %c1, %arg9 : index
    %12 = arith.divsi %arg10, %11 : index
    moe.scatter %1[%arg9, %c4, %c64] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 4, unroll = 8>} : memref<?x64xf32> {
    ^bb0(%arg11: index, %arg12: index, %arg13: index):
      %13 = moe.fold %arg12, %c0 : index {
      ^bb0(%arg14: index, %arg15: index):
        %28 = memref.load %2[%arg11, %arg14] : memref<?x4xi8>
        %29 = arith.cmpi ne, %28, %c0_i8 : i8
        %30 = arith.addi %arg15, %c1 : index
        %31 = arith.select %29, %30, %arg15 : index
        moe.yield %31 : index
      }
      %14 = memref.load %2[%arg11, %arg12] : memref<?x4xi8>
      %15 = arith.cmpi ne, %14, %c0_i8 : i8
      %16 = arith.cmpi slt, %13, %12 : index
      %17 = arith.andi %15, %16 : i1
      %18 = scf.if %17 -> (index) {
        %28 = arith.muli %arg11, %12 : index
        %29 = arith.addi %28, %13 : index
        %30 = arith.cmpi sge, %29, %c0 : index
        %31 = arith.cmpi slt, %29, %arg10 : index
        %32 = arith.andi %30, %31 : i1
        %33 = scf.if %32 -> (i32) {
          %35 = memref.load %3[%29] : memref<?xi32>
          scf.yield %35 : i32
        } else {
          %35 = arith.cmpi slt, %29, %c0 : index
          %36 = arith.cmpi sge, %29, %arg10 : index
          %37 = arith.ori %35, %36 : i1
          %38 = arith.select %37, %c1, %c0 : index
          %39 = arith.select %37, %29, %c0 : index
          %40 = arith.index_cast %38 : index to i64
          memref.store %40, %0[%c2] : memref<6xi64>
          %41 = arith.index_cast %39 : index to i64
          memref.store %41, %0[%c3] : memref<6xi64>
          scf.yield %c0_i32 : i32
        }
        %34 = arith.index_cast %33 : i32 to index
        scf.yield %34 : index
      } else {
        scf.yield %c-1 : index
      }
      %19 = arith.cmpi sge, %18, %c0 : index
      %20 = arith.select %19, %18, %c0 : index
      %21 = scf.if %19 -> (f32) {
        %28 = memref.load %4[%arg11, %arg13] : memref<?x64xf32>
        %29 = memref.load %5[%arg11, %arg12] : memref<?x4xf32>
        %30 = arith.mulf %28, %29 : f32
        scf.yield %30 : f32
      } else {
        scf.yield %cst : f32
      }
      %22 = arith.cmpi sge, %20, %c0 : index
      %23 = arith.cmpi slt, %20, %arg10 : index
      %24 = arith.andi %22, %23 : i1
      %25 = arith.xori %24, %true : i1
      %26 = arith.andi %19, %25 : i1
      scf.if %26 {
        %28 = arith.cmpi slt, %20, %c0 : index
        %29 = arith.cmpi sge, %20, %arg10 : index
        %30 = arith.ori %28, %29 : i1
        %31 = arith.select %30, %c1, %c0 : index
        %32 = arith.select %30, %20, %c0 : index
        %33 = arith.index_cast %31 : index to i64
        memref.store %33, %0[%c4] : memref<6xi64>
        %34 = arith.index_cast %32 : index to i64
        memref.store %34, %0[%c5] : memref<6xi64>
      }
      %27 = arith.andi %19, %24 : i1
      moe.write %21 to [%20, %arg13] if %27 : f32
    }
    return
  }
}
