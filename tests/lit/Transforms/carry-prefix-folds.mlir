// moe-carry-prefix-folds (CPU): A3's slot number, a count of the routing map's experts before e.
// @rows: rows (t, e) with the fold marked row-invariant and bounded by the last row index e;
// @elements: rows t that run one element e at a time (vector 1), the fold bounded by the contiguous index.
// Each gets a stack cell (the last point's indices, the fold's value) and an scf.if: step e - 1 inline on
// the kept value when the point before was (t, e - 1), else the whole fold from the init. @uses_e's steps read e
// itself, so they cannot continue, and @vector's row runs 8 elements at a time: both stay.
// RUN: moec-opt %s --moe-carry-prefix-folds | FileCheck %s
// RUN: moec-opt %s --moe-carry-prefix-folds --moe-lower-to-loops --canonicalize | FileCheck %s --check-prefix=LOOPS

// CHECK-LABEL: func.func @rows(
// CHECK: %[[CELL:.*]] = memref.alloca() : memref<2xindex>
// CHECK: %[[VALUE:.*]] = memref.alloca() : memref<1xindex>
// CHECK: memref.store %{{.*}}, %[[CELL]]
// CHECK: moe.compute
// CHECK-NEXT: ^bb0(%[[T:.*]]: index, %[[E:.*]]: index, %[[H:.*]]: index):
// CHECK: %[[PREV:.*]] = arith.subi %[[E]], %{{.*}} {moe.row_invariant} : index
// CHECK: %[[KEPT_T:.*]] = memref.load %[[CELL]]
// CHECK: arith.cmpi eq, %[[KEPT_T]], %[[T]]
// CHECK: %[[KEPT_E:.*]] = memref.load %[[CELL]]
// CHECK: arith.cmpi eq, %[[KEPT_E]], %[[PREV]]
// CHECK: %[[CONT:.*]] = arith.andi
// CHECK: %[[KEPT:.*]] = memref.load %[[VALUE]]
// CHECK: %[[K:.*]] = scf.if %[[CONT]] -> (index) {
// CHECK-NEXT: %[[BIT:.*]] = memref.load %{{.*}}[%[[T]], %[[PREV]]] : memref<?x4xi8>
// CHECK: arith.addi %[[KEPT]], %{{.*}} : index
// CHECK: scf.yield
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[ALL:.*]] = moe.fold %[[E]], %{{.*}} : index {
// CHECK: scf.yield %[[ALL]] : index
// CHECK-NEXT: } {moe.row_invariant}
// CHECK: memref.store %[[T]], %[[CELL]]
// CHECK: memref.store %[[E]], %[[CELL]]
// CHECK: memref.store %[[K]], %[[VALUE]]

// CHECK-LABEL: func.func @elements(
// CHECK: memref.alloca() : memref<2xindex>
// CHECK: moe.compute
// CHECK-NEXT: ^bb0(%[[T2:.*]]: index, %[[E2:.*]]: index):
// CHECK: scf.if %{{.*}} -> (index) {
// CHECK: } else {
// CHECK-NEXT: moe.fold %[[E2]], %{{.*}} : index {

// CHECK-LABEL: func.func @uses_e(
// CHECK-NOT: memref.alloca
// CHECK: moe.fold %{{.*}}, %{{.*}} {moe.row_invariant}
// CHECK-LABEL: func.func @vector(
// CHECK-NOT: memref.alloca
// CHECK: return

// Lowered, @rows runs one step inline when the row before ran last, else the whole fold (8 steps a loop
// iteration, then the rest).
// LOOPS-LABEL: func.func @rows(
// LOOPS: memref.alloca() : memref<2xindex>
// LOOPS: scf.for %[[ROW:.*]] = %arg
// LOOPS: scf.if %{{.*}} -> (index) {
// LOOPS-NOT: scf.for
// LOOPS: } else {
// LOOPS: scf.for %{{.*}} = %c0 to %{{.*}} step %c8 iter_args

module {
  func.func @rows(%map: !llvm.ptr {moe.arg = #moe.arg<tensor, "map">, llvm.readonly}, %dy: !llvm.ptr {moe.arg = #moe.arg<tensor, "dy">},
                  %T: index {moe.arg = #moe.arg<dim, "T">}) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %c0_i8 = arith.constant 0 : i8
    %m = moe.view %map[%T, %c4] : !llvm.ptr -> memref<?x4xi8>
    %out = moe.view %dy[%T, %c4, %c16] : !llvm.ptr -> memref<?x4x16xf32>
    moe.compute %out[%T, %c4, %c16] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x4x16xf32> {
    ^bb0(%t: index, %e: index, %h: index):
      %k = moe.fold %e, %c0 {moe.row_invariant} : index {
      ^bb0(%j: index, %n: index):
        %b = memref.load %m[%t, %j] : memref<?x4xi8>
        %set = arith.cmpi ne, %b, %c0_i8 : i8
        %n1 = arith.addi %n, %c1 : index
        %r = arith.select %set, %n1, %n : index
        moe.yield %r : index
      }
      %k64 = arith.index_cast %k {moe.row_invariant} : index to i64
      %kf = arith.sitofp %k64 {moe.row_invariant} : i64 to f32
      moe.yield %kf : f32
    }
    return
  }
  func.func @elements(%map: !llvm.ptr {moe.arg = #moe.arg<tensor, "map">, llvm.readonly}, %dy: !llvm.ptr {moe.arg = #moe.arg<tensor, "dy">},
                      %T: index {moe.arg = #moe.arg<dim, "T">}) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c0_i8 = arith.constant 0 : i8
    %m = moe.view %map[%T, %c4] : !llvm.ptr -> memref<?x4xi8>
    %out = moe.view %dy[%T, %c4] : !llvm.ptr -> memref<?x4xf32>
    moe.compute %out[%T, %c4] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 1, unroll = 8>} : memref<?x4xf32> {
    ^bb0(%t: index, %e: index):
      %k = moe.fold %e, %c0 : index {
      ^bb0(%j: index, %n: index):
        %b = memref.load %m[%t, %j] : memref<?x4xi8>
        %set = arith.cmpi ne, %b, %c0_i8 : i8
        %n1 = arith.addi %n, %c1 : index
        %r = arith.select %set, %n1, %n : index
        moe.yield %r : index
      }
      %k64 = arith.index_cast %k : index to i64
      %kf = arith.sitofp %k64 : i64 to f32
      moe.yield %kf : f32
    }
    return
  }
  func.func @uses_e(%map: !llvm.ptr {moe.arg = #moe.arg<tensor, "map">, llvm.readonly}, %dy: !llvm.ptr {moe.arg = #moe.arg<tensor, "dy">},
                    %T: index {moe.arg = #moe.arg<dim, "T">}) {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %out = moe.view %dy[%T, %c4, %c16] : !llvm.ptr -> memref<?x4x16xf32>
    moe.compute %out[%T, %c4, %c16] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x4x16xf32> {
    ^bb0(%t: index, %e: index, %h: index):
      %k = moe.fold %e, %c0 {moe.row_invariant} : index {
      ^bb0(%j: index, %n: index):
        %r = arith.addi %n, %e : index
        moe.yield %r : index
      }
      %k64 = arith.index_cast %k {moe.row_invariant} : index to i64
      %kf = arith.sitofp %k64 {moe.row_invariant} : i64 to f32
      moe.yield %kf : f32
    }
    return
  }
  func.func @vector(%map: !llvm.ptr {moe.arg = #moe.arg<tensor, "map">, llvm.readonly}, %dy: !llvm.ptr {moe.arg = #moe.arg<tensor, "dy">},
                    %T: index {moe.arg = #moe.arg<dim, "T">}) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c0_i8 = arith.constant 0 : i8
    %m = moe.view %map[%T, %c4] : !llvm.ptr -> memref<?x4xi8>
    %out = moe.view %dy[%T, %c4] : !llvm.ptr -> memref<?x4xf32>
    moe.compute %out[%T, %c4] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x4xf32> {
    ^bb0(%t: index, %e: index):
      %k = moe.fold %e, %c0 : index {
      ^bb0(%j: index, %n: index):
        %b = memref.load %m[%t, %j] : memref<?x4xi8>
        %set = arith.cmpi ne, %b, %c0_i8 : i8
        %n1 = arith.addi %n, %c1 : index
        %r = arith.select %set, %n1, %n : index
        moe.yield %r : index
      }
      %k64 = arith.index_cast %k : index to i64
      %kf = arith.sitofp %k64 : i64 to f32
      moe.yield %kf : f32
    }
    return
  }
}
