// moe-compact-predicated-folds for the GPU (C2's combine, f32, E = 40, 4 rows of 32 threads a block): each
// warp builds its row's list of live experts in shared memory in the row's prologue, 32 experts at a time
// (a ballot, then each live lane's place from the population count of the live lanes below it; 40 is not a
// multiple of 32, so lanes past the bound test nothing), then a warp barrier; every vector along h then
// folds over the list. Four warps of 40 entries: a 160-entry workgroup buffer (then the steps' tables:
// gpu-step-tables.mlir).
// RUN: moec-opt %s --moe-compact-predicated-folds=target=gpu --moe-hoist-row-invariants --moe-lower-to-gpu --canonicalize | FileCheck %s
// A fold only compacts on the GPU when the list can be built in the prologue, where the warp is converged.
// RUN: moec-opt %s --moe-compact-predicated-folds=target=gpu | FileCheck %s --check-prefix=SPLIT

// SPLIT: moe.compact %c40 : memref<40xi32>

// CHECK: gpu.func @moe_unpermute__0_hidden_states({{.*}}) workgroup(%[[LISTS:arg[0-9]+]] : memref<160xi32, #gpu.address_space<workgroup>>
// CHECK: scf.for %{{.*}} = %c0 to %c40 step %c32 iter_args
// CHECK: %[[INSIDE:.*]] = arith.cmpi ult
// CHECK: %[[LIVE:.*]] = scf.if %[[INSIDE]] -> (i1)
// CHECK: nvvm.vote.sync ballot %c-1_i32, %[[LIVE]] -> i32
// CHECK: math.ctpop
// CHECK: scf.if %[[LIVE]] {
// CHECK: memref.store %{{.*}}, %[[LISTS]][%{{.*}}] : memref<160xi32, #gpu.address_space<workgroup>>
// CHECK: math.ctpop
// CHECK: nvvm.bar.warp.sync %c-1_i32
// CHECK: scf.for
// CHECK: memref.load %[[LISTS]][%{{.*}}] : memref<160xi32, #gpu.address_space<workgroup>>
// CHECK: vector.load

module attributes {moe.dtype = "f32", moe.op = "moe_unpermute"} {
  func.func @moe_unpermute__0_hidden_states(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "hidden_states_unzipped">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "zipped_expertwise_rowmap">}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "expert_routemap_topk">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "token_prob_unzipped">}, %arg4: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "hidden_states">}, %arg5: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "expert_prob_topk">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg7: index {moe.arg = #moe.arg<dim, "R">}, %arg8: index {moe.arg = #moe.arg<dim, "Tk">}, %arg9: index {moe.arg = #moe.arg<attr, "total_zipped_tokens">}) {
    %cst = arith.constant 0.000000e+00 : f32
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c0 = arith.constant 0 : index
    %c40 = arith.constant 40 : index
    %c16 = arith.constant 16 : index
    %0 = moe.view %arg4[%arg8, %c16] : !llvm.ptr -> memref<?x16xf32>
    %1 = moe.view %arg1[%arg8, %c40] : !llvm.ptr -> memref<?x40xi32>
    %2 = moe.view %arg0[%arg7, %c16] : !llvm.ptr -> memref<?x16xf32>
    %3 = moe.view %arg6[%c2] : !llvm.ptr -> memref<2xi64>
    moe.compute %0[%arg8, %c16] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 4, unroll = 8>} : memref<?x16xf32> {
    ^bb0(%arg10: index, %arg11: index):
      %4 = moe.fold %c40, %cst : f32 {
      ^bb0(%arg12: index, %arg13: f32):
        %5 = memref.load %1[%arg10, %arg12] : memref<?x40xi32>
        %6 = arith.index_cast %5 : i32 to index
        %7 = arith.cmpi slt, %6, %c0 : index
        %8 = scf.if %7 -> (f32) {
          scf.yield %arg13 : f32
        } else {
          %9 = arith.cmpi sge, %6, %c0 : index
          %10 = arith.cmpi slt, %6, %arg7 : index
          %11 = arith.andi %9, %10 : i1
          %12 = scf.if %11 -> (f32) {
            %14 = memref.load %2[%6, %arg11] : memref<?x16xf32>
            scf.yield %14 : f32
          } else {
            %14 = arith.cmpi slt, %6, %c0 : index
            %15 = arith.cmpi sge, %6, %arg7 : index
            %16 = arith.ori %14, %15 : i1
            %17 = arith.select %16, %c1, %c0 : index
            %18 = arith.select %16, %6, %c0 : index
            %19 = arith.index_cast %17 : index to i64
            memref.store %19, %3[%c0] : memref<2xi64>
            %20 = arith.index_cast %18 : index to i64
            memref.store %20, %3[%c1] : memref<2xi64>
            scf.yield %cst : f32
          }
          %13 = arith.addf %arg13, %12 : f32
          scf.yield %13 : f32
        }
        moe.yield %8 : f32
      }
      moe.yield %4 : f32
    }
    return
  }
}
