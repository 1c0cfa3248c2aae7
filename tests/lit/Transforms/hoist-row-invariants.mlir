// moe-hoist-row-invariants on the A3 non-pad data gradient (E = 4, H = 16, f32): the prefix count over the
// routing map, the out_index load and the write guard depend on the row (t, e) only, so they are marked,
// and the lowering computes them once per row and runs the loop along h only for live rows. The load
// along h and the product stay in the loop.
// RUN: moec-opt %s --moe-hoist-row-invariants | FileCheck %s --check-prefix=MARK
// RUN: moec-opt %s --moe-hoist-row-invariants --moe-lower-to-loops --canonicalize | FileCheck %s --check-prefix=LOOPS
// RUN: moec-opt %s --moe-lower-to-loops --canonicalize | FileCheck %s --check-prefix=PLAIN

// MARK: moe.scatter
// MARK: moe.fold {{.*}} {moe.row_invariant} : index {
// MARK: memref.load {{.*}} {moe.row_invariant} : memref<?x4xi8>
// MARK: } {moe.row_invariant}
// MARK: arith.cmpi sge, {{.*}} {moe.row_invariant} : index
// MARK: %[[V:.*]] = scf.if
// MARK-NOT: moe.row_invariant
// MARK: moe.write %[[V]] to [{{.*}}] if {{.*}} {moe.row_guard} : f32

// Once per row: the fold (its loop), then the guard around the loop along h, which has no fold inside.
// LOOPS: scf.for %[[ROW:.*]] = %{{.*}} to
// LOOPS: scf.for {{.*}} iter_args
// LOOPS: %[[LIVE:.*]] = arith.cmpi sge
// LOOPS: scf.if %[[LIVE]] {
// LOOPS-NEXT: scf.for {{.*}} step %c8 {
// LOOPS-NOT: iter_args
// LOOPS-NOT: scf.if
// LOOPS: vector.load
// LOOPS-NOT: scf.for
// LOOPS: vector.store
// LOOPS-NOT: moe.row_invariant

// Without the pass the prefix count runs inside the loop along h, once per vector.
// PLAIN: scf.for {{.*}} step %c8 {
// PLAIN: scf.for {{.*}} iter_args
// PLAIN: vector.store

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
