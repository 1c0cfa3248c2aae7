// moe-compact-predicated-folds for the GPU where a block's warps all run one row (compact-predicated-folds-gpu.mlir's
// C2, with one row of 128 threads a block): the block builds one list of the row's live experts, not one per
// warp, each warp loading its runs of 32 experts (40 experts: 2 runs, warps 0 and 1; warps 2 and 3 have none).
// A warp records each run's ballot; after a block barrier it places its runs' live experts after those of the
// runs before (the population counts of their ballots), each lane at the live lanes below it; the list's length
// is every run's count; a second barrier, and every vector along h folds over the list. Each shared buffer is
// 16-byte aligned: after the 2-word ballots the next buffer would otherwise start 8 bytes into a 16-byte word,
// where LLVM's vector reads of its entries fault.
// RUN: moec-opt %s --moe-compact-predicated-folds=target=gpu --moe-hoist-row-invariants --moe-lower-to-gpu --canonicalize | FileCheck %s

// CHECK: gpu.func @moe_unpermute__0_hidden_states({{.*}}) workgroup(%[[LIST:arg[0-9]+]] : memref<40xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[BALLOTS:arg[0-9]+]] : memref<2xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}
// CHECK: %[[WARP:.*]] = arith.divui %thread_id_x{{.*}}, %c32 : index
// CHECK: scf.for %[[CHUNK:.*]] = %[[WARP]] to %c2 step %c4 {
// CHECK: %[[LIVE:.*]] = scf.if %{{.*}} -> (i1)
// CHECK: %[[MASK:.*]] = nvvm.vote.sync ballot %c-1_i32, %[[LIVE]] -> i32
// CHECK: memref.store %[[MASK]], %[[BALLOTS]][%[[CHUNK]]]
// CHECK: gpu.barrier
// CHECK: scf.for %[[SECOND:.*]] = %[[WARP]] to %c2 step %c4 {
// CHECK: scf.for %[[BEFORE:.*]] = %c0 to %[[SECOND]] step %c1 iter_args
// CHECK: memref.load %[[BALLOTS]][%[[BEFORE]]]
// CHECK: math.ctpop
// CHECK: memref.load %[[BALLOTS]][%[[SECOND]]]
// CHECK: math.ctpop
// CHECK: memref.store %{{.*}}, %[[LIST]][%{{.*}}] : memref<40xi32, #gpu.address_space<workgroup>>
// CHECK: scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args
// CHECK: memref.load %[[BALLOTS]]
// CHECK: gpu.barrier
// CHECK-NOT: nvvm.bar.warp.sync
// CHECK: memref.load %[[LIST]][%{{.*}}] : memref<40xi32, #gpu.address_space<workgroup>>
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
    moe.compute %0[%arg8, %c16] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 128, vector = 4, unroll = 8>} : memref<?x16xf32> {
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
