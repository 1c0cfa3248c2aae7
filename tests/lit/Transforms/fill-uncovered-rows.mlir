// moe-fill-uncovered-rows on A3 without probs (H = 16, f32): @fill zero-fills all R rows of the output and
// @scatter then writes the routed rows. Afterwards every kernel takes a workspace pointer after the status
// buffer, @scatter marks the rows it writes (under its write guard, and only for rows inside the output),
// and the fill runs last, as a scatter of the rows nothing marked. @other fills a second output that no
// scatter writes, and @point's output is written one element per domain point (its row index varies along
// h), so neither changes.
// RUN: moec-opt %s --moe-fill-uncovered-rows | FileCheck %s
// RUN: moec-opt %s --moe-fill-uncovered-rows --moe-schedule=target=cpu --moe-hoist-row-invariants --moe-lower-to-loops --canonicalize | FileCheck %s --check-prefix=LOOPS

// CHECK: module attributes {moe.workspace = ["dy"]}
// CHECK: func.func @scatter({{.*}}, %{{.*}}: !llvm.ptr {moe.arg = #moe.arg<status>}, %[[WS:.*]]: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<workspace>}, %{{.*}}: index {moe.arg = #moe.arg<dim, "T">}, %[[R:.*]]: index {moe.arg = #moe.arg<dim, "R">})
// CHECK: %[[BASE:.*]] = llvm.getelementptr %[[WS]]
// CHECK: %[[COVERED:.*]] = moe.view %[[BASE]][%[[R]]] : !llvm.ptr -> memref<?xi8>
// CHECK: moe.scatter
// CHECK: %[[ROW:.*]] = arith.index_cast
// CHECK: %[[LIVE:.*]] = arith.cmpi sge, %[[ROW]]
// CHECK: %[[INSIDE:.*]] = arith.cmpi ult, %[[ROW]], %[[R]] : index
// CHECK: %[[MARK:.*]] = arith.andi %[[LIVE]], %[[INSIDE]] : i1
// CHECK: scf.if %[[MARK]] {
// CHECK: memref.store %{{.*}}, %[[COVERED]][%[[ROW]]] : memref<?xi8>
// CHECK: moe.write %{{.*}} to [%[[ROW]], %{{.*}}] if %[[LIVE]] : f32

// CHECK: func.func @fill(
// CHECK-SAME: moe.arg = #moe.arg<workspace>
// CHECK: %[[COVERED2:.*]] = moe.view %{{.*}} : !llvm.ptr -> memref<?xi8>
// CHECK: moe.scatter %{{.*}}[%{{.*}}, %c16] : memref<?x16xf32> {
// CHECK-NEXT: ^bb0(%[[I:.*]]: index, %[[H:.*]]: index):
// CHECK: %[[BYTE:.*]] = memref.load %[[COVERED2]][%[[I]]] : memref<?xi8>
// CHECK: %[[UNWRITTEN:.*]] = arith.cmpi eq, %[[BYTE]], %{{.*}} : i8
// CHECK: moe.write %{{.*}} to [%[[I]], %[[H]]] if %[[UNWRITTEN]] : f32

// CHECK: func.func @other(
// CHECK: moe.compute
// CHECK: func.func @point_fill(
// CHECK: moe.compute
// CHECK: func.func @point(
// CHECK-NOT: memref<?xi8>
// CHECK: return

// After lowering, the fill skips a marked row before its loop along h.
// LOOPS: func.func @fill(
// LOOPS: scf.for %[[ROW:.*]] = %{{.*}} to %{{.*}} step %c1 {
// LOOPS: %[[BYTE:.*]] = memref.load %{{.*}}[%[[ROW]]] : memref<?xi8>
// LOOPS: %[[UNWRITTEN:.*]] = arith.cmpi eq, %[[BYTE]], %c0_i8 : i8
// LOOPS: scf.if %[[UNWRITTEN]] {
// LOOPS: vector.store

module {
  func.func @fill(%g: !llvm.ptr {moe.arg = #moe.arg<tensor, "g">, llvm.readonly}, %idx: !llvm.ptr {moe.arg = #moe.arg<tensor, "idx">, llvm.readonly},
                  %dy: !llvm.ptr {moe.arg = #moe.arg<tensor, "dy">}, %o: !llvm.ptr {moe.arg = #moe.arg<tensor, "other">}, %pt: !llvm.ptr {moe.arg = #moe.arg<tensor, "pt">},
                  %status: !llvm.ptr {moe.arg = #moe.arg<status>}, %T: index {moe.arg = #moe.arg<dim, "T">}, %R: index {moe.arg = #moe.arg<dim, "R">}) {
    %c16 = arith.constant 16 : index
    %zero = arith.constant 0.0 : f32
    %out = moe.view %dy[%R, %c16] : !llvm.ptr -> memref<?x16xf32>
    moe.compute %out[%R, %c16] : memref<?x16xf32> {
    ^bb0(%i: index, %h: index):
      moe.yield %zero : f32
    }
    return
  }
  func.func @scatter(%g: !llvm.ptr {moe.arg = #moe.arg<tensor, "g">, llvm.readonly}, %idx: !llvm.ptr {moe.arg = #moe.arg<tensor, "idx">, llvm.readonly},
                     %dy: !llvm.ptr {moe.arg = #moe.arg<tensor, "dy">}, %o: !llvm.ptr {moe.arg = #moe.arg<tensor, "other">}, %pt: !llvm.ptr {moe.arg = #moe.arg<tensor, "pt">},
                     %status: !llvm.ptr {moe.arg = #moe.arg<status>}, %T: index {moe.arg = #moe.arg<dim, "T">}, %R: index {moe.arg = #moe.arg<dim, "R">}) {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %out = moe.view %dy[%R, %c16] : !llvm.ptr -> memref<?x16xf32>
    %gv = moe.view %g[%T, %c16] : !llvm.ptr -> memref<?x16xf32>
    %iv = moe.view %idx[%T] : !llvm.ptr -> memref<?xi32>
    moe.scatter %out[%T, %c16] : memref<?x16xf32> {
    ^bb0(%t: index, %h: index):
      %r32 = memref.load %iv[%t] : memref<?xi32>
      %row = arith.index_cast %r32 : i32 to index
      %live = arith.cmpi sge, %row, %c0 : index
      %v = memref.load %gv[%t, %h] : memref<?x16xf32>
      moe.write %v to [%row, %h] if %live : f32
    }
    return
  }
  func.func @other(%g: !llvm.ptr {moe.arg = #moe.arg<tensor, "g">, llvm.readonly}, %idx: !llvm.ptr {moe.arg = #moe.arg<tensor, "idx">, llvm.readonly},
                   %dy: !llvm.ptr {moe.arg = #moe.arg<tensor, "dy">}, %o: !llvm.ptr {moe.arg = #moe.arg<tensor, "other">}, %pt: !llvm.ptr {moe.arg = #moe.arg<tensor, "pt">},
                   %status: !llvm.ptr {moe.arg = #moe.arg<status>}, %T: index {moe.arg = #moe.arg<dim, "T">}, %R: index {moe.arg = #moe.arg<dim, "R">}) {
    %c16 = arith.constant 16 : index
    %zero = arith.constant 0.0 : f32
    %out = moe.view %o[%R, %c16] : !llvm.ptr -> memref<?x16xf32>
    moe.compute %out[%R, %c16] : memref<?x16xf32> {
    ^bb0(%i: index, %h: index):
      moe.yield %zero : f32
    }
    return
  }
  func.func @point_fill(%g: !llvm.ptr {moe.arg = #moe.arg<tensor, "g">, llvm.readonly}, %idx: !llvm.ptr {moe.arg = #moe.arg<tensor, "idx">, llvm.readonly},
                        %dy: !llvm.ptr {moe.arg = #moe.arg<tensor, "dy">}, %o: !llvm.ptr {moe.arg = #moe.arg<tensor, "other">}, %pt: !llvm.ptr {moe.arg = #moe.arg<tensor, "pt">},
                        %status: !llvm.ptr {moe.arg = #moe.arg<status>}, %T: index {moe.arg = #moe.arg<dim, "T">}, %R: index {moe.arg = #moe.arg<dim, "R">}) {
    %c16 = arith.constant 16 : index
    %zero = arith.constant 0.0 : f32
    %out = moe.view %pt[%T, %c16] : !llvm.ptr -> memref<?x16xf32>
    moe.compute %out[%T, %c16] : memref<?x16xf32> {
    ^bb0(%i: index, %h: index):
      moe.yield %zero : f32
    }
    return
  }
  func.func @point(%g: !llvm.ptr {moe.arg = #moe.arg<tensor, "g">, llvm.readonly}, %idx: !llvm.ptr {moe.arg = #moe.arg<tensor, "idx">, llvm.readonly},
                   %dy: !llvm.ptr {moe.arg = #moe.arg<tensor, "dy">}, %o: !llvm.ptr {moe.arg = #moe.arg<tensor, "other">}, %pt: !llvm.ptr {moe.arg = #moe.arg<tensor, "pt">},
                   %status: !llvm.ptr {moe.arg = #moe.arg<status>}, %T: index {moe.arg = #moe.arg<dim, "T">}, %R: index {moe.arg = #moe.arg<dim, "R">}) {
    %c16 = arith.constant 16 : index
    %out = moe.view %pt[%T, %c16] : !llvm.ptr -> memref<?x16xf32>
    %gv = moe.view %g[%T, %c16] : !llvm.ptr -> memref<?x16xf32>
    moe.scatter %out[%T, %c16] : memref<?x16xf32> {
    ^bb0(%t: index, %h: index):
      %v = memref.load %gv[%t, %h] : memref<?x16xf32>
      moe.write %v to [%h, %t] : f32
    }
    return
  }
}
