// moe-lower-to-gpu's step tables (gpu-step-tables.mlir's C2 weighted) where the step computes the check of its
// row before the branch that skips an unrouted expert, and tests it only inside that branch: at an unrouted
// expert's step the column holds the check of row -1, false, though the step never runs the check. The vote
// of the check's column is then not exact (no moe.exact_check_vote): a row whose vote is false may have failed
// no check, so moe-version-row-loops keeps the whole original loop for it.
// RUN: moec-opt %s --moe-step-tables --moe-lower-to-gpu --canonicalize | FileCheck %s
// CHECK-NOT: moe.exact_check_vote
// CHECK: nvvm.vote.sync  all %{{[a-z0-9_-]+}}, %{{[0-9]+}} -> i1
// CHECK-NOT: moe.exact_check_vote

module attributes {moe.dtype = "f32", moe.op = "moe_unpermute"} {
  func.func @moe_unpermute__0_hidden_states(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "hidden_states_unzipped">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "zipped_expertwise_rowmap">}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "expert_routemap_topk">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "token_prob_unzipped">}, %arg4: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "hidden_states">}, %arg5: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "expert_prob_topk">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg7: index {moe.arg = #moe.arg<dim, "R">}, %arg8: index {moe.arg = #moe.arg<dim, "Tk">}, %arg9: index {moe.arg = #moe.arg<attr, "total_zipped_tokens">}) {
    %c3 = arith.constant 3 : index
    %c2 = arith.constant 2 : index
    %cst = arith.constant 0.000000e+00 : f32
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %0 = moe.view %arg4[%arg8, %c64] : !llvm.ptr -> memref<?x64xf32>
    %1 = moe.view %arg1[%arg8, %c8] : !llvm.ptr -> memref<?x8xi32>
    %2 = moe.view %arg0[%arg7, %c64] : !llvm.ptr -> memref<?x64xf32>
    %3 = moe.view %arg6[%c4] : !llvm.ptr -> memref<4xi64>
    %4 = moe.view %arg3[%arg7] : !llvm.ptr -> memref<?xf32>
    moe.compute %0[%arg8, %c64] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 4, unroll = 8>} : memref<?x64xf32> {
    ^bb0(%arg10: index, %arg11: index):
      %5 = moe.fold %c8, %cst : f32 {
      ^bb0(%arg12: index, %arg13: f32):
        %6 = memref.load %1[%arg10, %arg12] : memref<?x8xi32>
        %7 = arith.index_cast %6 : i32 to index
        %8 = arith.cmpi slt, %7, %c0 : index
        %10 = arith.cmpi sge, %7, %c0 : index
        %11 = arith.cmpi slt, %7, %arg7 : index
        %12 = arith.andi %10, %11 : i1
        %9 = scf.if %8 -> (f32) {
          scf.yield %arg13 : f32
        } else {
          %13 = scf.if %12 -> (f32) {
            %19 = memref.load %2[%7, %arg11] : memref<?x64xf32>
            scf.yield %19 : f32
          } else {
            %19 = arith.cmpi slt, %7, %c0 : index
            %20 = arith.cmpi sge, %7, %arg7 : index
            %21 = arith.ori %19, %20 : i1
            %22 = arith.select %21, %c1, %c0 : index
            %23 = arith.select %21, %7, %c0 : index
            %24 = arith.index_cast %22 : index to i64
            memref.store %24, %3[%c0] : memref<4xi64>
            %25 = arith.index_cast %23 : index to i64
            memref.store %25, %3[%c1] : memref<4xi64>
            scf.yield %cst : f32
          }
          %14 = arith.cmpi sge, %7, %c0 : index
          %15 = arith.cmpi slt, %7, %arg7 : index
          %16 = arith.andi %14, %15 : i1
          %17 = scf.if %16 -> (f32) {
            %19 = memref.load %4[%7] : memref<?xf32>
            scf.yield %19 : f32
          } else {
            %19 = arith.cmpi slt, %7, %c0 : index
            %20 = arith.cmpi sge, %7, %arg7 : index
            %21 = arith.ori %19, %20 : i1
            %22 = arith.select %21, %c1, %c0 : index
            %23 = arith.select %21, %7, %c0 : index
            %24 = arith.index_cast %22 : index to i64
            memref.store %24, %3[%c2] : memref<4xi64>
            %25 = arith.index_cast %23 : index to i64
            memref.store %25, %3[%c3] : memref<4xi64>
            scf.yield %cst : f32
          }
          %18 = math.fma %13, %17, %arg13 : f32
          scf.yield %18 : f32
        }
        moe.yield %9 : f32
      }
      moe.yield %5 : f32
    }
    return
  }
}
