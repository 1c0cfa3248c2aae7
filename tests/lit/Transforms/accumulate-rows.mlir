// moe-accumulate-rows, then moe-lower-to-loops (CPU): C2's combine (f32, E = 40, H = 20, vector 8, after
// moe-compact-predicated-folds and moe-hoist-row-invariants) is a fold over the row's list of live experts,
// which moe-accumulate-rows marks moe.accumulated_row. Instead of every step for each vector of the row, the steps run over the whole row into f32 accumulators
// on the stack (an alloca of H floats, set to the init): passes of 8 steps, the last one masked;
// a step's row-invariant work (the list entry, the row index, its check) runs once per pass, and each
// element adds its terms in step order, so results are unchanged. A last loop along the row reads the
// accumulators and stores. A row with 1 to 8 live steps (C2's K of E) skips the accumulators: each step's
// row-invariant work once per row (for step min(j, count - 1), so a step past the count reads what a live
// one reads), then for each vector the init plus step 0's term and step j's where j < count, in order: every
// step is computed and a select on the row's `j < count` keeps or drops it, in a version per power of two of
// steps (1, 2, 4, 8): a row runs the least that holds its count, so it computes at most twice its terms.
// RUN: moec-opt %s --moe-accumulate-rows | FileCheck %s --check-prefix=MARK
// RUN: moec-opt %s --moe-accumulate-rows --moe-lower-to-loops --moe-streaming-stores | FileCheck %s
// RUN: moec-opt %s --moe-lower-to-loops | FileCheck %s --check-prefix=OFF
// A row of scalars (vector 1) has no vectors to accumulate for: the fold stays unmarked.
// RUN: sed -e 's/vector = 8/vector = 1/' %s | moec-opt --moe-accumulate-rows | FileCheck %s --check-prefix=SCALAR
// MARK: moe.fold %{{.*}} {moe.accumulated_row} : f32
// SCALAR-NOT: moe.accumulated_row
// A list of 2 experts (a short fold compacted: moe-short-lists) runs at most 2
// steps directly, not 8.
// RUN: sed -e 's/memref<40xi32>/memref<2xi32>/g' -e 's/moe.compact %c40/moe.compact %c2/' %s | moec-opt --moe-accumulate-rows --moe-lower-to-loops --moe-streaming-stores | FileCheck %s --check-prefix=SHORT

// CHECK-LABEL: func.func @moe_unpermute__0_hidden_states
// CHECK: %[[ACC:.*]] = memref.alloca() : memref<20xf32>
// CHECK: scf.for %[[ROW:.*]] = %{{.*}} to
// The list of live experts (moe.compact) is built once per row: a loop storing into the list.
// CHECK: %[[COUNT:.*]] = scf.for {{.*}} -> (index)
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<40xi32>
// CHECK: %[[FEW:.*]] = arith.cmpi sle, %[[COUNT]], %c8{{[_0-9]*}} : index
// CHECK: scf.if %[[FEW]] {
// No live step: the init for each vector, nothing read. Each vector store branches on whether the output
// takes streaming stores (aligned and large: tested once per call, moe-streaming-stores).
// CHECK: %[[NONE:.*]] = arith.cmpi slt, %[[COUNT]], %c1{{[_0-9]*}} : index
// CHECK: scf.if %[[NONE]] {
// CHECK-NOT: memref.load
// CHECK: scf.for
// CHECK-NEXT: %[[ZERO:.*]] = vector.broadcast
// CHECK-NEXT: scf.if %[[STREAM:[0-9a-z_]+]] {
// CHECK-NEXT: vector.store %[[ZERO]], %{{.*}} {alignment = 16 : i64, nontemporal = true}
// CHECK-NEXT: } else {
// CHECK-NEXT: vector.store %[[ZERO]], %{{.*}} {alignment = 4 : i64}
// CHECK-NOT: memref.load
// CHECK: } else {
// CHECK: %[[LAST:.*]] = arith.subi %[[COUNT]], %{{.*}} : index
// CHECK-COUNT-8: arith.minui %{{.*}}, %[[LAST]] : index
// One step: no select.
// CHECK: %[[FITS1:.*]] = arith.cmpi ule, %[[COUNT]], %c1{{[_0-9]*}} : index
// CHECK-NEXT: scf.if %[[FITS1]] {
// CHECK: scf.for %[[DH1:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT: %[[INIT1:.*]] = vector.broadcast
// CHECK: %[[ONE:.*]] = arith.addf %[[INIT1]], %{{.*}} : vector<8xf32>
// CHECK-NOT: arith.select
// CHECK: vector.store %[[ONE]]
// Two steps: the second under a select.
// CHECK: %[[FITS2:.*]] = arith.cmpi ule, %[[COUNT]], %c2{{[_0-9]*}} : index
// CHECK-NEXT: scf.if %[[FITS2]] {
// CHECK: scf.for %[[DH:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT: %[[INIT:.*]] = vector.broadcast
// CHECK: %[[T0:.*]] = arith.addf %[[INIT]], %{{.*}} : vector<8xf32>
// CHECK: %[[LIVE1:.*]] = arith.cmpi ult, %{{.*}}, %[[COUNT]] : index
// CHECK-NOT: scf.if %[[LIVE1]]
// CHECK: %[[T1:.*]] = arith.addf %[[T0]], %{{.*}} : vector<8xf32>
// CHECK: %[[MASK1:.*]] = vector.broadcast %[[LIVE1]] : i1 to vector<8xi1>
// CHECK: %[[TWO:.*]] = arith.select %[[MASK1]], %[[T1]], %[[T0]] : vector<8xi1>, vector<8xf32>
// CHECK-NEXT: scf.if %[[STREAM]] {
// CHECK-NEXT: vector.store %[[TWO]]
// Then 4 steps, and 8.
// CHECK: arith.cmpi ule, %[[COUNT]], %c4{{[_0-9]*}} : index
// CHECK: scf.for
// CHECK-COUNT-3: arith.select %{{.*}} : vector<8xi1>, vector<8xf32>
// CHECK-NEXT: scf.if %[[STREAM]] {
// CHECK-COUNT-7: arith.select %{{.*}} : vector<8xi1>, vector<8xf32>
// CHECK-NEXT: scf.if %[[STREAM]] {
// CHECK-NOT: memref<20xf32>
// The accumulators start at the fold's init: vectors over [0, 16), then elements over [16, 20).
// CHECK: scf.for %[[H0:.*]] = %{{.*}} to %c16{{[_0-9]*}} step
// CHECK-NEXT: vector.broadcast
// CHECK-NEXT: vector.store %{{.*}}, %[[ACC]][%[[H0]]] : memref<20xf32>, vector<8xf32>
// CHECK: scf.for %[[H1:.*]] = %c16{{[_0-9]*}} to %c20 step
// CHECK-NEXT: memref.store %{{.*}}, %[[ACC]][%[[H1]]] : memref<20xf32>
// Passes of 8 steps: 8 list entries and row indices, then one loop along the row adding the 8 terms in order.
// CHECK: scf.for %[[PASS:.*]] = %{{.*}} to %[[WHOLE:.*]] step %[[EIGHT:.*]] {
// CHECK-COUNT-8: memref.load %{{.*}}[%{{.*}}] : memref<40xi32>
// CHECK: scf.for %[[H:.*]] = %{{.*}} to %c16{{[_0-9]*}} step
// CHECK-NEXT: %[[OLD:.*]] = vector.load %[[ACC]][%[[H]]] : memref<20xf32>, vector<8xf32>
// CHECK: arith.addf %[[OLD]], %{{.*}} : vector<8xf32>
// CHECK-COUNT-7: arith.addf %{{.*}} : vector<8xf32>
// CHECK-NOT: arith.select
// CHECK: vector.store %{{.*}}, %[[ACC]][%[[H]]] : memref<20xf32>, vector<8xf32>
// Then the steps left, in one pass of 8 whose steps past the count redo the last one's work (clamped) and
// are dropped by a select.
// CHECK: %[[REST:.*]] = arith.cmpi ult, %[[WHOLE]], %[[COUNT]] : index
// CHECK-NEXT: scf.if %[[REST]] {
// CHECK-COUNT-7: arith.minui %{{.*}}, %{{.*}} : index
// CHECK: scf.for %[[HR:.*]] = %{{.*}} to %c16{{[_0-9]*}} step
// CHECK-NEXT: vector.load %[[ACC]][%[[HR]]] : memref<20xf32>, vector<8xf32>
// CHECK-COUNT-7: arith.select %{{.*}} : vector<8xi1>, vector<8xf32>
// CHECK-NEXT: vector.store %{{.*}}, %[[ACC]][%[[HR]]] : memref<20xf32>, vector<8xf32>
// The rest of the body for each vector: the accumulators are the fold's value.
// CHECK: memref.store %{{.*}}, %[[ACC]][%{{.*}}] : memref<20xf32>
// CHECK: scf.for
// CHECK-NEXT: vector.load %[[ACC]][%{{.*}}] : memref<20xf32>, vector<8xf32>
// CHECK-NEXT: scf.if %[[STREAM]] {
// CHECK-NEXT: vector.store %{{.*}} {alignment = 16 : i64, nontemporal = true} : memref<?x20xf32>, vector<8xf32>

// Off: the fold runs inside the loop along the row, with a vector accumulator.
// OFF-NOT: memref<20xf32>
// OFF: scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>)

module attributes {moe.dtype = "f32", moe.op = "moe_unpermute"} {
  func.func @moe_unpermute__0_hidden_states(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "hidden_states_unzipped">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "zipped_expertwise_rowmap">}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "expert_routemap_topk">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "token_prob_unzipped">}, %arg4: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "hidden_states">}, %arg5: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "expert_prob_topk">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg7: index {moe.arg = #moe.arg<dim, "R">}, %arg8: index {moe.arg = #moe.arg<dim, "Tk">}, %arg9: index {moe.arg = #moe.arg<attr, "total_zipped_tokens">}) {
    %cst = arith.constant 0.000000e+00 : f32
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c0 = arith.constant 0 : index
    %c40 = arith.constant 40 : index
    %c20 = arith.constant 20 : index
    %0 = moe.view %arg4[%arg8, %c20] : !llvm.ptr -> memref<?x20xf32>
    %1 = moe.view %arg1[%arg8, %c40] : !llvm.ptr -> memref<?x40xi32>
    %2 = moe.view %arg0[%arg7, %c20] : !llvm.ptr -> memref<?x20xf32>
    %3 = moe.view %arg6[%c2] : !llvm.ptr -> memref<2xi64>
    moe.compute %0[%arg8, %c20] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x20xf32> {
    ^bb0(%arg10: index, %arg11: index):
      %list, %count = moe.compact %c40 {moe.row_invariant} : memref<40xi32> {
      ^bb0(%arg12: index):
        %5 = memref.load %1[%arg10, %arg12] : memref<?x40xi32>
        %6 = arith.index_cast %5 : i32 to index
        %7 = arith.cmpi slt, %6, %c0 : index
        %true = arith.constant true
        %8 = arith.xori %7, %true : i1
        moe.yield %8 : i1
      }
      %4 = moe.fold %count, %cst : f32 {
      ^bb0(%arg12: index, %arg13: f32):
        %5 = memref.load %list[%arg12] : memref<40xi32>
        %6 = arith.index_cast %5 : i32 to index
        %7 = memref.load %1[%arg10, %6] : memref<?x40xi32>
        %8 = arith.index_cast %7 : i32 to index
        %9 = arith.cmpi slt, %8, %c0 : index
        %10 = arith.cmpi sge, %8, %c0 : index
        %11 = arith.cmpi slt, %8, %arg7 : index
        %12 = arith.andi %10, %11 : i1
        %13 = scf.if %12 -> (f32) {
          %15 = memref.load %2[%8, %arg11] : memref<?x20xf32>
          scf.yield %15 : f32
        } else {
          %15 = arith.cmpi slt, %8, %c0 : index
          %16 = arith.cmpi sge, %8, %arg7 : index
          %17 = arith.ori %15, %16 : i1
          %18 = arith.select %17, %c1, %c0 : index
          %19 = arith.select %17, %8, %c0 : index
          %20 = arith.index_cast %18 : index to i64
          memref.store %20, %3[%c0] : memref<2xi64>
          %21 = arith.index_cast %19 : index to i64
          memref.store %21, %3[%c1] : memref<2xi64>
          scf.yield %cst : f32
        }
        %14 = arith.addf %arg13, %13 : f32
        moe.yield %14 : f32
      }
      moe.yield %4 : f32
    }
    return
  }
}

// SHORT: %[[FEW:.*]] = arith.cmpi sle, %{{.*}}, %c2{{[_0-9]*}} : index
// SHORT: scf.if %[[FEW]] {
// SHORT: } else {
// SHORT-COUNT-2: arith.minui
// SHORT-NOT: arith.minui
// SHORT: scf.for
