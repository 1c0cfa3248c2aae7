// moe-compact-predicated-folds on C2's combine (f32, E = 40, K = 2, H = 16, CPU schedule): the fold over
// all E experts, whose step leaves the accumulator alone where the row map holds -1, becomes a moe.compact
// of the live experts and a fold over that list in the same order. With moe-hoist-row-invariants the list
// is built once per row (a stack array, branch-free), and each vector along h folds only over the list.
// RUN: moec-opt %s --moe-compact-predicated-folds | FileCheck %s --check-prefix=SPLIT
// RUN: moec-opt %s --moe-compact-predicated-folds --moe-hoist-row-invariants --moe-lower-to-loops --canonicalize | FileCheck %s --check-prefix=LOOPS
// RUN: moec-opt %s --moe-compact-predicated-folds | moec-opt | FileCheck %s --check-prefix=SPLIT
// moe-compress-lists (the CPU pipeline's where the host has AVX-512) marks the list, whose predicate
// vectorizes along e, moe.compress_lanes = 16; moe-lower-to-loops then tests 16 entries at a
// time: a vector load of the row map, the live lanes' indices compressed to the list's end, the end moved
// by the mask's popcount; entries 32 to 39 run one at a time after it, from its count. With E = 32 nothing
// is left for them. Unmarked (the LOOPS run above), the list is built one entry at a time.
// RUN: moec-opt %s --moe-compact-predicated-folds --moe-compress-lists | FileCheck %s --check-prefix=MARK
// RUN: moec-opt %s --moe-compact-predicated-folds --moe-compress-lists=lanes=8 | FileCheck %s --check-prefix=MARK8
// RUN: not moec-opt %s --moe-compact-predicated-folds --moe-compress-lists=lanes=12 2>&1 | FileCheck %s --check-prefix=BADLANES
// RUN: moec-opt %s --moe-compact-predicated-folds --moe-hoist-row-invariants --moe-compress-lists --moe-lower-to-loops --canonicalize | FileCheck %s --check-prefix=LANES
// RUN: sed -e 's/40/32/g' %s | moec-opt --moe-compact-predicated-folds --moe-hoist-row-invariants --moe-compress-lists --moe-lower-to-loops --canonicalize | FileCheck %s --check-prefix=LANES32
// RUN: moec-opt %s --moe-compact-predicated-folds --moe-hoist-row-invariants --moe-compress-lists=lanes=8 --moe-lower-to-loops --canonicalize | FileCheck %s --check-prefix=LANES8
// RUN: not moec-opt %s --moe-compact-predicated-folds=target=npu 2>&1 | FileCheck %s --check-prefix=BADTARGET
// RUN: not moec-opt %s --moe-short-lists=target=npu 2>&1 | FileCheck %s --check-prefix=BADSHORT
// BADTARGET: moe-compact-predicated-folds: target must be cpu or gpu, not 'npu'
// BADSHORT: moe-short-lists: target must be cpu or gpu, not 'npu'
// MARK: moe.compact %c40 {moe.compress_lanes = 16 : i64} : memref<40xi32>
// MARK8: moe.compact %c40 {moe.compress_lanes = 8 : i64} : memref<40xi32>
// BADLANES: lanes must be a power of two from 2 to 64, not 12
// LANES8: scf.for %{{.*}} = %c0 to %c40 step %c8
// LANES8: vector.load %{{.*}} : memref<?x40xi32>, vector<8xi32>
// LANES8: llvm.call_intrinsic "llvm.experimental.vector.compress"
// LANES8-NOT: memref.store %{{.*}} : memref<40xi32>
// E = 8 is no longer than the unroll (8): unrolled fully, it keeps its branches, unless moe-short-lists (the CPU
// pipeline's, whose loop lowering adds a short list's steps directly) compacts it because its live step
// adds an f32 term; a live step that does something else (a maximum) is kept as it is even then.
// RUN: sed -e 's/40/8/g' %s | moec-opt --moe-compact-predicated-folds | FileCheck %s --check-prefix=SHORT
// RUN: sed -e 's/40/8/g' %s | moec-opt --moe-compact-predicated-folds --moe-short-lists | FileCheck %s --check-prefix=SHORT-ON
// RUN: sed -e 's/40/8/g' -e 's/arith.addf %arg13, %12/arith.maximumf %arg13, %12/' %s | moec-opt --moe-compact-predicated-folds --moe-short-lists | FileCheck %s --check-prefix=SHORT

// LANES: %[[LIST:.*]] = memref.alloca() : memref<40xi32>
// LANES: %[[N16:.*]] = scf.for %[[K:.*]] = %c0 to %c32 step %c16 iter_args(%[[END:.*]] = %c0) -> (index) {
// LANES-NEXT: vector.load %{{.*}}[%{{.*}}, %[[K]]] {{.*}} : memref<?x40xi32>, vector<16xi32>
// LANES: %[[LIVE:.*]] = arith.xori %{{.*}} : vector<16xi1>
// LANES: %[[KS:.*]] = arith.addi %{{.*}}, %{{.*}} : vector<16xi32>
// LANES-NEXT: %[[PACKED:.*]] = llvm.call_intrinsic "llvm.experimental.vector.compress"(%[[KS]], %[[LIVE]], %{{.*}})
// LANES-NEXT: vector.store %[[PACKED]], %[[LIST]][%[[END]]] : memref<40xi32>, vector<16xi32>
// LANES-NEXT: %[[BITS:.*]] = vector.bitcast %[[LIVE]] : vector<16xi1> to vector<1xi16>
// LANES-NEXT: %[[WORD:.*]] = vector.extract %[[BITS]][0]
// LANES-NEXT: %[[POP:.*]] = math.ctpop %[[WORD]] : i16
// LANES-NEXT: %[[COUNT:.*]] = arith.index_castui %[[POP]]
// LANES-NEXT: %[[NEXT:.*]] = arith.addi %[[END]], %[[COUNT]]
// LANES-NEXT: scf.yield %[[NEXT]]
// LANES: memref.load %{{.*}}[%{{.*}}, %c32] : memref<?x40xi32>
// LANES: memref.store %c32_i32, %[[LIST]][%[[N16]]] : memref<40xi32>
// LANES: memref.store %c39_i32, %[[LIST]]
// LANES32: scf.for %{{.*}} = %c0 to %c32 step %c16
// LANES32: vector.store
// LANES32-NOT: memref.store %{{.*}} : memref<32xi32>

// SHORT-NOT: moe.compact
// SHORT: moe.fold %c8
// SHORT-ON: %[[LIST:.*]], %[[N:.*]] = moe.compact %c8 : memref<8xi32> {
// SHORT-ON: moe.fold %[[N]], %{{.*}} : f32 {

// SPLIT: %[[LIST:.*]], %[[N:.*]] = moe.compact %c40 : memref<40xi32> {
// SPLIT-NEXT: ^bb0(%[[E:.*]]: index):
// SPLIT-NEXT: memref.load %{{.*}}[%{{.*}}, %[[E]]] : memref<?x40xi32>
// SPLIT: %[[DEAD:.*]] = arith.cmpi slt
// SPLIT: %[[LIVE:.*]] = arith.xori %[[DEAD]]
// SPLIT-NEXT: moe.yield %[[LIVE]] : i1
// SPLIT: moe.fold %[[N]], %{{.*}} : f32 {
// SPLIT-NEXT: ^bb0(%[[I:.*]]: index, %[[ACC:.*]]: f32):
// SPLIT-NEXT: memref.load %[[LIST]][%[[I]]] : memref<40xi32>
// SPLIT-NOT: scf.yield %[[ACC]] : f32
// SPLIT: arith.addf %[[ACC]]
// SPLIT: moe.yield

// LOOPS: %[[STACK:.*]] = memref.alloca() : memref<40xi32>
// LOOPS: scf.for %[[ROW:.*]] = %{{.*}} to
// LOOPS: %[[COUNT:.*]] = scf.for {{.*}} iter_args
// LOOPS: memref.store %{{.*}}, %[[STACK]][%{{.*}}] : memref<40xi32>
// LOOPS: arith.select
// LOOPS: scf.for %{{.*}} = %c0 to %c16 step %c8 {
// LOOPS: memref.load %[[STACK]]
// LOOPS: vector.load
// LOOPS: vector.store

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
    moe.compute %0[%arg8, %c16] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x16xf32> {
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
