// A short list on the GPU (C2's combine at Mixtral's 8 experts, f32, 4 rows of 32 threads a block): with
// moe-short-lists, moe-compact-predicated-folds' sibling, compacts a fold of at most the unroll's steps too, and
// moe-lower-to-gpu runs the row's loop along h in one version per power of two of live steps: a row with
// none writes the init; one with at most 2 takes the version whose fold runs 2 steps, each reading the
// step table at min(j, count - 1) (only entries a live step wrote) and adding its term where j < count;
// then 4; then all 8. A token routed to 2 of 8 experts then gathers 2 rows per vector, not 8 behind their
// tests. A list of at most 32 entries takes one ballot, lane k testing entry k (lanes past the bound test
// the last entry again, and are not live): each live lane then writes the step table's row at its place for
// its own entry, with what its test loaded, without reading the list back.
// RUN: moec-opt %s --moe-compact-predicated-folds=target=gpu --moe-short-lists=target=gpu --moe-hoist-row-invariants --moe-step-tables --moe-lower-to-gpu --canonicalize | FileCheck %s
// A short list's steps load their weights themselves (C2 weighted at Mixtral: each live expert's prob): the step
// table has no f32 column, so the row's prologue does not wait for a load that depends on the row index.
// RUN: moec emit moe_unpermute --target ptx --arch sm_90 --dtype bf16 --dim E=8 --dim K=2 --dim H=4096 --attr using_weighted_combine=1 --emit loops -o %t.loops
// RUN: FileCheck %s --check-prefix=WEIGHTS < %t.loops
// WEIGHTS: gpu.func @moe_unpermute__0_hidden_states
// WEIGHTS-NOT: xf32, #gpu.address_space<workgroup>>
// WEIGHTS: %[[PROBS:.*]] = moe.view %arg3[%arg7] : !llvm.ptr -> memref<?xf32>
// WEIGHTS-NOT: xf32, #gpu.address_space<workgroup>>
// WEIGHTS: scf.for
// WEIGHTS: memref.load %[[PROBS]][%{{.*}}] : memref<?xf32>
// WEIGHTS: gpu.func @moe_unpermute__1_expert_prob_topk
// Without mixed precision the GPU's fold accumulates in bf16 itself, each step T(f32(acc) + x): a short list
// too (before, only the CPU's f32-carried form counted as adding a term, and C2 kept its 8 tested steps).
// RUN: moec emit moe_unpermute --target ptx --arch sm_90 --dtype bf16 --dim E=8 --dim K=2 --dim H=4096 --attr using_mix_precision=0 --emit moe -o %t.mix0.moe
// RUN: FileCheck %s --check-prefix=IN-T < %t.mix0.moe
// IN-T: func.func @moe_unpermute__0_hidden_states
// IN-T: %{{.*}}, %[[COUNT:.*]] = moe.compact %c8 {moe.row_invariant} : memref<8xi32>
// IN-T: moe.fold %[[COUNT]], %{{.*}} : bf16
// IN-T: arith.extf %{{.*}} : bf16 to f32
// IN-T: arith.addf
// IN-T: arith.truncf %{{.*}} : f32 to bf16
// Without moe-short-lists the fold keeps its 8 tested steps, and the loop along h has no versions.
// RUN: moec-opt %s --moe-compact-predicated-folds=target=gpu --moe-hoist-row-invariants --moe-step-tables --moe-lower-to-gpu --canonicalize | FileCheck %s --check-prefix=LONG

// CHECK: %[[ENTRY:.*]] = arith.minui %{{.*}}, %c7 : index
// CHECK: memref.load %{{.*}}[%{{.*}}, %[[ENTRY]]] : memref<?x8xi32>
// CHECK: %[[LIVE:.*]] = arith.andi
// CHECK: nvvm.vote.sync ballot %c-1_i32, %[[LIVE]] -> i32
// CHECK: math.ctpop
// CHECK: nvvm.bar.warp.sync %c-1_i32
// CHECK: math.ctpop
// CHECK-NEXT: %[[COUNT:.*]] = arith.index_castui
// CHECK: scf.if %[[LIVE]] -> (i1) {
// CHECK-NEXT: memref.load %{{.*}}[%{{.*}}, %[[ENTRY]]] : memref<?x8xi32>
// CHECK: nvvm.bar.warp.sync %c-1_i32
// CHECK: %[[NONE:.*]] = arith.cmpi ule, %[[COUNT]], %c0 : index
// CHECK: scf.if %[[NONE]] {
// CHECK:   scf.for
// CHECK:     vector.store %cst
// CHECK: } else {
// CHECK:   %[[TWO:.*]] = arith.cmpi ule, %[[COUNT]], %c2 : index
// CHECK:   scf.if %[[TWO]] {
// CHECK:     scf.for
// CHECK:       %[[LAST:.*]] = arith.subi %[[COUNT]], %c1 : index
// CHECK:       %[[LIVE0:.*]] = arith.cmpi ugt, %[[COUNT]], %c0 : index
// CHECK:       scf.if %[[LIVE0]] -> (vector<4xf32>)
// CHECK:         vector.load
// CHECK:       %[[AT1:.*]] = arith.minui %[[LAST]], %c1 : index
// CHECK:       memref.load %{{.*}}[%{{.*}}] : memref<{{.*}}xi32, #gpu.address_space<workgroup>>
// CHECK:       %[[LIVE1:.*]] = arith.cmpi ugt, %[[COUNT]], %c1 : index
// CHECK:       scf.if %[[LIVE1]] -> (vector<4xf32>)
// CHECK:         vector.load
// CHECK-NOT:     vector.load
// CHECK:       vector.store
// CHECK:   } else {
// CHECK:     arith.cmpi ule, %[[COUNT]], %c4 : index
// CHECK-COUNT-4: vector.load
// CHECK:     } else {
// CHECK-COUNT-8: vector.load

// LONG-NOT: arith.cmpi ule
// LONG: scf.for
// LONG-COUNT-8: vector.load
// LONG-NOT: vector.load
// LONG: vector.store

module attributes {moe.dtype = "f32", moe.op = "moe_unpermute"} {
  func.func @moe_unpermute__0_hidden_states(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "hidden_states_unzipped">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "zipped_expertwise_rowmap">}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "expert_routemap_topk">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "token_prob_unzipped">}, %arg4: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "hidden_states">}, %arg5: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "expert_prob_topk">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg7: index {moe.arg = #moe.arg<dim, "R">}, %arg8: index {moe.arg = #moe.arg<dim, "Tk">}, %arg9: index {moe.arg = #moe.arg<attr, "total_zipped_tokens">}) {
    %cst = arith.constant 0.000000e+00 : f32
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %0 = moe.view %arg4[%arg8, %c16] : !llvm.ptr -> memref<?x16xf32>
    %1 = moe.view %arg1[%arg8, %c8] : !llvm.ptr -> memref<?x8xi32>
    %2 = moe.view %arg0[%arg7, %c16] : !llvm.ptr -> memref<?x16xf32>
    %3 = moe.view %arg6[%c2] : !llvm.ptr -> memref<2xi64>
    moe.compute %0[%arg8, %c16] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 4, unroll = 8>} : memref<?x16xf32> {
    ^bb0(%arg10: index, %arg11: index):
      %4 = moe.fold %c8, %cst : f32 {
      ^bb0(%arg12: index, %arg13: f32):
        %5 = memref.load %1[%arg10, %arg12] : memref<?x8xi32>
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
