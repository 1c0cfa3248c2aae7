// moe-compact-predicated-folds on a moe.sum: B2's gradient in drop/pad mode with top-16 (f32, H = 16). A
// term is 0.0 where the row index is -1 (dropped), and adding +0.0 to a sum that starts at +0.0 changes
// nothing, so the sum runs over a list of the live slots, built once per token. Top-16 is longer than the
// unroll factor (8); a top-8 sum unrolls fully and keeps its branches (second RUN, same input with 8).
// RUN: moec-opt %s --moe-compact-predicated-folds | FileCheck %s
// RUN: moec-opt %s --moe-compact-predicated-folds --moe-hoist-row-invariants --moe-lower-to-loops --canonicalize | FileCheck %s --check-prefix=LOOPS
// RUN: sed -e 's/%c16 : f32/%c8 : f32/' %s | moec-opt --moe-compact-predicated-folds | FileCheck %s --check-prefix=SHORT

// CHECK: %[[LIST:.*]], %[[N:.*]] = moe.compact %c16 : memref<16xi32> {
// CHECK: arith.cmpi sge
// CHECK: moe.yield %{{.*}} : i1
// CHECK: moe.sum %[[N]] : f32 {
// CHECK-NEXT: ^bb0(%[[I:.*]]: index):
// CHECK-NEXT: memref.load %[[LIST]][%[[I]]] : memref<16xi32>
// CHECK: moe.yield

// LOOPS: memref.alloca() : memref<16xi32>
// LOOPS: scf.for %[[ROW:.*]] = %{{.*}} to
// LOOPS: scf.for {{.*}} iter_args
// LOOPS: scf.for %{{.*}} = %c0 to %c16 step %c8 {
// LOOPS: vector.load
// LOOPS: vector.store

// SHORT-NOT: moe.compact
// SHORT: moe.sum %c8 : f32

module attributes {moe.dtype = "f32", moe.op = "moe_init_routing_v2_grad"} {
  func.func @moe_init_routing_v2_grad(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "grad_expanded_x">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "expanded_row_idx">}, %arg2: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "grad_x">}, %arg3: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg4: index {moe.arg = #moe.arg<dim, "N">}, %arg5: index {moe.arg = #moe.arg<dim, "R">}, %arg6: index {moe.arg = #moe.arg<attr, "active_num">}) {
    %cst = arith.constant 0.000000e+00 : f32
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c8 = arith.constant 8 : index
    %0 = moe.view %arg2[%arg4, %c16] : !llvm.ptr -> memref<?x16xf32>
    %1 = arith.muli %arg4, %c16 : index
    %2 = moe.view %arg1[%1] : !llvm.ptr -> memref<?xi32>
    %3 = moe.view %arg0[%arg5, %c16] : !llvm.ptr -> memref<?x16xf32>
    %4 = moe.view %arg3[%c2] : !llvm.ptr -> memref<2xi64>
    moe.compute %0[%arg4, %c16] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x16xf32> {
    ^bb0(%arg7: index, %arg8: index):
      %5 = moe.sum %c16 : f32 {
      ^bb0(%arg9: index):
        %6 = arith.muli %arg7, %c16 : index
        %7 = arith.addi %6, %arg9 : index
        %8 = memref.load %2[%7] : memref<?xi32>
        %9 = arith.index_cast %8 : i32 to index
        %10 = arith.cmpi sge, %9, %c0 : index
        %11 = scf.if %10 -> (f32) {
          %12 = arith.cmpi sge, %9, %c0 : index
          %13 = arith.cmpi slt, %9, %arg5 : index
          %14 = arith.andi %12, %13 : i1
          %15 = scf.if %14 -> (f32) {
            %16 = memref.load %3[%9, %arg8] : memref<?x16xf32>
            scf.yield %16 : f32
          } else {
            %16 = arith.cmpi slt, %9, %c0 : index
            %17 = arith.cmpi sge, %9, %arg5 : index
            %18 = arith.ori %16, %17 : i1
            %19 = arith.select %18, %c1, %c0 : index
            %20 = arith.select %18, %9, %c0 : index
            %21 = arith.index_cast %19 : index to i64
            memref.store %21, %4[%c0] : memref<2xi64>
            %22 = arith.index_cast %20 : index to i64
            memref.store %22, %4[%c1] : memref<2xi64>
            scf.yield %cst : f32
          }
          scf.yield %15 : f32
        } else {
          scf.yield %cst : f32
        }
        moe.yield %11 : f32
      }
      moe.yield %5 : f32
    }
    return
  }
}
