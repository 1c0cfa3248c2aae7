// A guarded scatter (the A3 non-pad data gradient, E = 4, H = 16, f32): rows of (t, e), vectors along h,
// and the write under its guard.
// RUN: moec-opt %s --moe-lower-to-loops --moe-streaming-stores | FileCheck %s
// RUN: moec-opt %s | moec-opt | FileCheck %s --check-prefix=ROUNDTRIP

// ROUNDTRIP: moe.scatter
// ROUNDTRIP: moe.fold
// ROUNDTRIP: moe.write {{.*}} to [{{.*}}] if {{.*}} : f32

// CHECK-LABEL: func.func @moe_token_unpermute_with_routing_map_grad__5_permuted_tokens_grad
// CHECK-SAME: moe.arg = #moe.arg<row_begin>
// CHECK: scf.for
// CHECK: scf.for {{.*}} step %c8
// CHECK: %[[V:.*]] = scf.if %[[LIVE:.*]] -> (vector<8xf32>)
// CHECK: scf.if %[[LIVE]] {
// CHECK-NEXT: scf.if %{{.*}} {
// CHECK-NEXT: vector.store %[[V]], {{.*}} {alignment = 32 : i64, nontemporal = true} : memref<?x16xf32>, vector<8xf32>
// CHECK-NEXT: } else {
// CHECK-NEXT: vector.store %[[V]], {{.*}} {alignment = 4 : i64} : memref<?x16xf32>, vector<8xf32>
// CHECK-NOT: moe.

module attributes {moe.dtype = "f32", moe.op = "moe_token_unpermute_with_routing_map_grad"} {
  func.func @moe_token_unpermute_with_routing_map_grad__5_permuted_tokens_grad(%arg0: !llvm.ptr {moe.arg = #moe.arg<tensor, "unpermuted_tokens_grad">}, %arg1: !llvm.ptr {moe.arg = #moe.arg<tensor, "out_index">}, %arg2: !llvm.ptr {moe.arg = #moe.arg<tensor, "permute_token_id">}, %arg3: !llvm.ptr {moe.arg = #moe.arg<tensor, "routing_map">}, %arg4: !llvm.ptr {moe.arg = #moe.arg<tensor, "permuted_tokens">}, %arg5: !llvm.ptr {moe.arg = #moe.arg<tensor, "probs">}, %arg6: !llvm.ptr {moe.arg = #moe.arg<tensor, "permuted_tokens_grad">}, %arg7: !llvm.ptr {moe.arg = #moe.arg<tensor, "probs_grad">}, %arg8: index {moe.arg = #moe.arg<dim, "Tk">}, %arg9: index {moe.arg = #moe.arg<dim, "R">}) {
    %c-1 = arith.constant -1 : index
    %cst = arith.constant 0.000000e+00 : f32
    %c1 = arith.constant 1 : index
    %c0_i8 = arith.constant 0 : i8
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %0 = moe.view %arg6[%arg9, %c16] : !llvm.ptr -> memref<?x16xf32>
    %1 = moe.view %arg3[%arg8, %c4] : !llvm.ptr -> memref<?x4xi8>
    %2 = moe.view %arg1[%arg9] : !llvm.ptr -> memref<?xi32>
    %3 = moe.view %arg0[%arg8, %c16] : !llvm.ptr -> memref<?x16xf32>
    %4 = moe.view %arg5[%arg8, %c4] : !llvm.ptr -> memref<?x4xf32>
    %5 = arith.divsi %arg9, %arg8 : index
    moe.scatter %0[%arg8, %c4, %c16] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x16xf32> {
    ^bb0(%arg10: index, %arg11: index, %arg12: index):
      %6 = moe.fold %arg11, %c0 : index {
      ^bb0(%arg13: index, %arg14: index):
        %15 = memref.load %1[%arg10, %arg13] : memref<?x4xi8>
        %16 = arith.cmpi ne, %15, %c0_i8 : i8
        %17 = arith.addi %arg14, %c1 : index
        %18 = arith.select %16, %17, %arg14 : index
        moe.yield %18 : index
      }
      %7 = memref.load %1[%arg10, %arg11] : memref<?x4xi8>
      %8 = arith.cmpi ne, %7, %c0_i8 : i8
      %9 = arith.cmpi slt, %6, %5 : index
      %10 = arith.andi %8, %9 : i1
      %11 = scf.if %10 -> (index) {
        %15 = arith.muli %arg10, %5 : index
        %16 = arith.addi %15, %6 : index
        %17 = memref.load %2[%16] : memref<?xi32>
        %18 = arith.index_cast %17 : i32 to index
        scf.yield %18 : index
      } else {
        scf.yield %c-1 : index
      }
      %12 = arith.cmpi sge, %11, %c0 : index
      %13 = arith.select %12, %11, %c0 : index
      %14 = scf.if %12 -> (f32) {
        %15 = memref.load %3[%arg10, %arg12] : memref<?x16xf32>
        %16 = memref.load %4[%arg10, %arg11] : memref<?x4xf32>
        %17 = arith.mulf %15, %16 : f32
        scf.yield %17 : f32
      } else {
        scf.yield %cst : f32
      }
      moe.write %14 to [%13, %arg12] if %12 : f32
    }
    return
  }}
