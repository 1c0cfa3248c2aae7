// moe-widen-rounded-folds on C2 without mixed precision (bf16, E = 8, K = 2, H = 16, CPU schedule): the
// fold accumulates in bf16, widening its accumulator at the start of each live step and rounding it back at
// the end. Carried as f32, the step reads the accumulator itself, the live branch yields the rounded sum
// widened again (f32(bf16(s)): a rounding in f32 registers), the skipping branch yields the accumulator
// as it is, and the fold's result is rounded to bf16 once, after it.
// RUN: moec-opt %s --moe-widen-rounded-folds | FileCheck %s --check-prefix=WIDE
// RUN: moec-opt %s --moe-widen-rounded-folds | moec-opt | FileCheck %s --check-prefix=WIDE
// The widened live step adds a term to the f32 accumulator, so the CPU's short-fold compaction takes it
// (and the loop lowering then adds the live steps directly); carried in bf16 it does not (on the CPU; the GPU's
// short lists run any fold's live steps and take it: lower-to-gpu-short-lists.mlir).
// RUN: moec-opt %s --moe-widen-rounded-folds --moe-compact-predicated-folds --moe-short-lists | FileCheck %s --check-prefix=SHORT
// RUN: moec-opt %s --moe-compact-predicated-folds --moe-short-lists | FileCheck %s --check-prefix=NARROW
// unchecked-roundings: the step's rounding of acc + a bf16 term, read back only by the accumulator, is
// marked moe.nan_unchecked (a NaN there keeps its low 16 bits zero: moe-expand-unchecked-roundings); the
// rounding of the fold's result keeps its NaN case. Without the option, or when a term is not a widened
// bf16 value (here f32 from an integer: its low bits are not known to be zero), nothing is marked.
// RUN: moec-opt %s --moe-widen-rounded-folds=unchecked-roundings=true | FileCheck %s --check-prefix=MARK
// RUN: moec-opt %s --moe-widen-rounded-folds | FileCheck %s --check-prefix=NOMARK
// RUN: sed -e 's/%14 = arith.extf %13 : bf16 to f32/%14 = arith.sitofp %5 : i32 to f32/' %s \
// RUN:   | moec-opt --moe-widen-rounded-folds=unchecked-roundings=true | FileCheck %s --check-prefix=NOMARK
// A fold that never widens its accumulator (here: a live step that ignores it) is left alone.
// RUN: sed -e 's/%15 = arith.addf %9, %14 : f32/%15 = arith.addf %14, %14 : f32/' -e 's/%9 = arith.extf %arg13 : bf16 to f32/%9 = arith.constant 1.0 : f32/' %s | moec-opt --moe-widen-rounded-folds | FileCheck %s --check-prefix=KEEP

// WIDE: %[[INIT:.*]] = arith.extf %cst : bf16 to f32
// WIDE: %[[FOLD:.*]] = moe.fold %c8, %[[INIT]] : f32 {
// WIDE-NEXT: ^bb0(%{{.*}}: index, %[[ACC:.*]]: f32):
// WIDE-NOT: arith.extf %[[ACC]]
// WIDE: %[[STEP:.*]] = scf.if %{{.*}} -> (f32) {
// WIDE-NEXT: scf.yield %[[ACC]] : f32
// WIDE-NEXT: } else {
// WIDE: %[[SUM:.*]] = arith.addf %[[ACC]], %{{.*}} : f32
// WIDE-NEXT: %[[ROUNDED:.*]] = arith.truncf %[[SUM]] : f32 to bf16
// WIDE-NEXT: %[[WIDENED:.*]] = arith.extf %[[ROUNDED]] : bf16 to f32
// WIDE-NEXT: scf.yield %[[WIDENED]] : f32
// WIDE: moe.yield %[[STEP]] : f32
// WIDE: %[[RESULT:.*]] = arith.truncf %[[FOLD]] : f32 to bf16
// WIDE-NEXT: moe.yield %[[RESULT]] : bf16

// MARK: %[[SUM:.*]] = arith.addf %{{.*}}, %{{.*}} : f32
// MARK-NEXT: %[[ROUNDED:.*]] = arith.truncf %[[SUM]] {moe.nan_unchecked} : f32 to bf16
// MARK-NEXT: %[[WIDENED:.*]] = arith.extf %[[ROUNDED]] : bf16 to f32
// MARK: %[[RESULT:.*]] = arith.truncf %{{.*}} : f32 to bf16
// MARK-NEXT: moe.yield %[[RESULT]] : bf16
// NOMARK-NOT: moe.nan_unchecked

// SHORT: moe.compact %c8 : memref<8xi32>
// SHORT: moe.fold %{{.*}} : f32 {
// NARROW-NOT: moe.compact
// KEEP-NOT: : f32 {
// KEEP: moe.fold %c8, %cst : bf16 {

module attributes {moe.dtype = "bf16", moe.op = "moe_unpermute"} {
  func.func @moe_unpermute__0_hidden_states(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "hidden_states_unzipped">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "zipped_expertwise_rowmap">}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "expert_routemap_topk">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "token_prob_unzipped">}, %arg4: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "hidden_states">}, %arg5: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "expert_prob_topk">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg7: index {moe.arg = #moe.arg<dim, "R">}, %arg8: index {moe.arg = #moe.arg<dim, "Tk">}, %arg9: index {moe.arg = #moe.arg<attr, "total_zipped_tokens">}) {
    %cst = arith.constant 0.000000e+00 : bf16
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %0 = moe.view %arg4[%arg8, %c16] : !llvm.ptr -> memref<?x16xbf16>
    %1 = moe.view %arg1[%arg8, %c8] : !llvm.ptr -> memref<?x8xi32>
    %2 = moe.view %arg0[%arg7, %c16] : !llvm.ptr -> memref<?x16xbf16>
    %3 = moe.view %arg6[%c2] : !llvm.ptr -> memref<2xi64>
    moe.compute %0[%arg8, %c16] {schedule = #moe.schedule<rowsPerBlock = 1024, threads = 1, vector = 16, unroll = 8>} : memref<?x16xbf16> {
    ^bb0(%arg10: index, %arg11: index):
      %4 = moe.fold %c8, %cst : bf16 {
      ^bb0(%arg12: index, %arg13: bf16):
        %5 = memref.load %1[%arg10, %arg12] : memref<?x8xi32>
        %6 = arith.index_cast %5 : i32 to index
        %7 = arith.cmpi slt, %6, %c0 : index
        %8 = scf.if %7 -> (bf16) {
          scf.yield %arg13 : bf16
        } else {
          %9 = arith.extf %arg13 : bf16 to f32
          %10 = arith.cmpi sge, %6, %c0 : index
          %11 = arith.cmpi slt, %6, %arg7 : index
          %12 = arith.andi %10, %11 : i1
          %13 = scf.if %12 -> (bf16) {
            %17 = memref.load %2[%6, %arg11] : memref<?x16xbf16>
            scf.yield %17 : bf16
          } else {
            %17 = arith.cmpi slt, %6, %c0 : index
            %18 = arith.cmpi sge, %6, %arg7 : index
            %19 = arith.ori %17, %18 : i1
            %20 = arith.select %19, %c1, %c0 : index
            %21 = arith.select %19, %6, %c0 : index
            %22 = arith.index_cast %20 : index to i64
            memref.store %22, %3[%c0] : memref<2xi64>
            %23 = arith.index_cast %21 : index to i64
            memref.store %23, %3[%c1] : memref<2xi64>
            scf.yield %cst : bf16
          }
          %14 = arith.extf %13 : bf16 to f32
          %15 = arith.addf %9, %14 : f32
          %16 = arith.truncf %15 : f32 to bf16
          scf.yield %16 : bf16
        }
        moe.yield %8 : bf16
      }
      moe.yield %4 : bf16
    }
    return
  }
}
