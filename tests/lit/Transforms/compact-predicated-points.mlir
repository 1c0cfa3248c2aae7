// moe-compact-predicated-points (CPU): a point kernel over (t, e < 4) numbers its point by the count of
// map[t, j] != 0 for j < e, and a point whose map[t, e] is 0 writes 0.0 and does nothing else.
// @live_points: the body gets the row's list of live points (the count's predicate, j the list's index),
// the count is marked moe.live_rank and the domain moe.dead_value = 0.0. The clone on which the pass checks
// the dead points leaves no constant behind (the `false` it puts in for the point's test).
// @dead_reads: a dead point writes probs[t, e], not a constant: unchanged.
// @other_map: the point's own test reads another map than the count's: unchanged.
// @first_expert: the point's own test reads map[t, 0], not map[t, e]: unchanged.
// @body_row: the count's steps read map[t', j] with t' computed in the body; the list is built before
// the body runs, so it may use only the outer indices and values from outside the domain: unchanged.
// RUN: moec-opt %s --moe-compact-predicated-points | FileCheck %s
// RUN: moec-opt %s --moe-compact-predicated-points --moe-lower-to-loops --canonicalize | FileCheck %s --check-prefix=LOOPS

// CHECK-LABEL: func.func @live_points(
// CHECK-NOT: arith.constant false
// CHECK: moe.scatter %{{.*}} {moe.dead_value = 0.000000e+00 : f32, schedule
// CHECK-NEXT: ^bb0(%[[T:.*]]: index, %[[E:.*]]: index):
// CHECK-NEXT: %{{.*}}, %{{.*}} = moe.compact %c4 {moe.live_list} : memref<4xi32> {
// CHECK-NEXT: ^bb0(%[[J:.*]]: index):
// CHECK-NEXT: %[[B:.*]] = memref.load %{{.*}}[%[[T]], %[[J]]] : memref<?x4xi8>
// CHECK-NEXT: %[[P:.*]] = arith.cmpi ne, %[[B]], %{{.*}} : i8
// CHECK-NEXT: moe.yield %[[P]] : i1
// CHECK: moe.fold %[[E]], %{{.*}} {moe.live_rank} : index

// CHECK-LABEL: func.func @dead_reads(
// CHECK-NOT: arith.constant false
// CHECK-NOT: moe.live_list
// CHECK-NOT: moe.dead_value
// CHECK-LABEL: func.func @other_map(
// CHECK-NOT: moe.live_list
// CHECK-NOT: moe.dead_value
// CHECK-LABEL: func.func @first_expert(
// CHECK-NOT: moe.live_list
// CHECK-NOT: moe.dead_value
// CHECK-LABEL: func.func @body_row(
// CHECK-NOT: moe.live_list
// CHECK-NOT: moe.dead_value
// CHECK: return

// Lowered, @live_points runs a loop over its range's rows: 0.0 stored to the row's elements in the range,
// the list built (no count computed: no moe.fold's loop), and the points visited from it, the count their
// position in the list.
// LOOPS-LABEL: func.func @live_points(
// LOOPS: scf.for %[[ROW:.*]] = %{{.*}} to %{{.*}} step %c1
// LOOPS: scf.for %[[FILL:.*]] = %{{.*}} to %{{.*}} step %c1 {
// LOOPS-NEXT: memref.store %{{.*}}, %{{.*}}[%[[ROW]], %[[FILL]]] : memref<?x4xf32>
// LOOPS: memref.store %{{.*}}, %[[LIST:.*]][%{{.*}}] : memref<4xi32>
// LOOPS-NOT: moe.fold
// LOOPS: scf.for %[[RANK:.*]] = %c0 to %{{.*}} step %c1 {
// LOOPS-NEXT: %[[ENTRY:.*]] = memref.load %[[LIST]][%[[RANK]]] : memref<4xi32>
// LOOPS-NEXT: %[[POINT:.*]] = arith.index_cast %[[ENTRY]] : i32 to index
// LOOPS: vector.load %{{.*}}[%[[RANK]], %{{.*}}] {{.*}}: memref<4x64xf32>, vector<32xf32>
// LOOPS: memref.store %{{.*}}, %{{.*}}[%[[ROW]], %[[POINT]]] : memref<?x4xf32>
// LOOPS-LABEL: func.func @dead_reads(

module {
  func.func @live_points(%map: !llvm.ptr {moe.arg = #moe.arg<tensor, "map">, llvm.readonly},
                         %xs: !llvm.ptr {moe.arg = #moe.arg<tensor, "x">, llvm.readonly},
                         %gs: !llvm.ptr {moe.arg = #moe.arg<tensor, "g">, llvm.readonly},
                         %pg: !llvm.ptr {moe.arg = #moe.arg<tensor, "pg">}, %T: index {moe.arg = #moe.arg<dim, "T">}) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c64 = arith.constant 64 : index
    %c0_i8 = arith.constant 0 : i8
    %zero = arith.constant 0.0 : f32
    %m = moe.view %map[%T, %c4] : !llvm.ptr -> memref<?x4xi8>
    %x = moe.view %xs[%c4, %c64] : !llvm.ptr -> memref<?x64xf32>
    %g = moe.view %gs[%T, %c64] : !llvm.ptr -> memref<?x64xf32>
    %out = moe.view %pg[%T, %c4] : !llvm.ptr -> memref<?x4xf32>
    moe.scatter %out[%T, %c4] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 1, vector = 1, unroll = 8>} : memref<?x4xf32> {
    ^bb0(%t: index, %e: index):
      %k = moe.fold %e, %c0 : index {
      ^bb0(%j: index, %n: index):
        %b = memref.load %m[%t, %j] : memref<?x4xi8>
        %set = arith.cmpi ne, %b, %c0_i8 : i8
        %n1 = arith.addi %n, %c1 : index
        %r = arith.select %set, %n1, %n : index
        moe.yield %r : index
      }
      %own = memref.load %m[%t, %e] : memref<?x4xi8>
      %live = arith.cmpi ne, %own, %c0_i8 : i8
      %s = scf.if %live -> (f32) {
        %dot = moe.sum %c64 : f32 {
        ^bb0(%j: index):
          %a = memref.load %x[%k, %j] : memref<?x64xf32>
          %w = memref.load %g[%t, %j] : memref<?x64xf32>
          %p = arith.mulf %a, %w : f32
          moe.yield %p : f32
        }
        scf.yield %dot : f32
      } else {
        scf.yield %zero : f32
      }
      moe.write %s to [%t, %e] : f32
    }
    return
  }
  func.func @dead_reads(%map: !llvm.ptr {moe.arg = #moe.arg<tensor, "map">, llvm.readonly},
                        %xs: !llvm.ptr {moe.arg = #moe.arg<tensor, "x">, llvm.readonly},
                        %ps: !llvm.ptr {moe.arg = #moe.arg<tensor, "probs">, llvm.readonly},
                        %pg: !llvm.ptr {moe.arg = #moe.arg<tensor, "pg">}, %T: index {moe.arg = #moe.arg<dim, "T">}) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c64 = arith.constant 64 : index
    %c0_i8 = arith.constant 0 : i8
    %m = moe.view %map[%T, %c4] : !llvm.ptr -> memref<?x4xi8>
    %x = moe.view %xs[%c4, %c64] : !llvm.ptr -> memref<?x64xf32>
    %probs = moe.view %ps[%T, %c4] : !llvm.ptr -> memref<?x4xf32>
    %out = moe.view %pg[%T, %c4] : !llvm.ptr -> memref<?x4xf32>
    moe.scatter %out[%T, %c4] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 1, vector = 1, unroll = 8>} : memref<?x4xf32> {
    ^bb0(%t: index, %e: index):
      %k = moe.fold %e, %c0 : index {
      ^bb0(%j: index, %n: index):
        %b = memref.load %m[%t, %j] : memref<?x4xi8>
        %set = arith.cmpi ne, %b, %c0_i8 : i8
        %n1 = arith.addi %n, %c1 : index
        %r = arith.select %set, %n1, %n : index
        moe.yield %r : index
      }
      %own = memref.load %m[%t, %e] : memref<?x4xi8>
      %live = arith.cmpi ne, %own, %c0_i8 : i8
      %s = scf.if %live -> (f32) {
        %dot = moe.sum %c64 : f32 {
        ^bb0(%j: index):
          %a = memref.load %x[%k, %j] : memref<?x64xf32>
          moe.yield %a : f32
        }
        scf.yield %dot : f32
      } else {
        %v = memref.load %probs[%t, %e] : memref<?x4xf32>
        scf.yield %v : f32
      }
      moe.write %s to [%t, %e] : f32
    }
    return
  }
  func.func @other_map(%map: !llvm.ptr {moe.arg = #moe.arg<tensor, "map">, llvm.readonly},
                       %map2: !llvm.ptr {moe.arg = #moe.arg<tensor, "map2">, llvm.readonly},
                       %xs: !llvm.ptr {moe.arg = #moe.arg<tensor, "x">, llvm.readonly},
                       %pg: !llvm.ptr {moe.arg = #moe.arg<tensor, "pg">}, %T: index {moe.arg = #moe.arg<dim, "T">}) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c64 = arith.constant 64 : index
    %c0_i8 = arith.constant 0 : i8
    %zero = arith.constant 0.0 : f32
    %m = moe.view %map[%T, %c4] : !llvm.ptr -> memref<?x4xi8>
    %m2 = moe.view %map2[%T, %c4] : !llvm.ptr -> memref<?x4xi8>
    %x = moe.view %xs[%c4, %c64] : !llvm.ptr -> memref<?x64xf32>
    %out = moe.view %pg[%T, %c4] : !llvm.ptr -> memref<?x4xf32>
    moe.scatter %out[%T, %c4] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 1, vector = 1, unroll = 8>} : memref<?x4xf32> {
    ^bb0(%t: index, %e: index):
      %k = moe.fold %e, %c0 : index {
      ^bb0(%j: index, %n: index):
        %b = memref.load %m[%t, %j] : memref<?x4xi8>
        %set = arith.cmpi ne, %b, %c0_i8 : i8
        %n1 = arith.addi %n, %c1 : index
        %r = arith.select %set, %n1, %n : index
        moe.yield %r : index
      }
      %own = memref.load %m2[%t, %e] : memref<?x4xi8>
      %live = arith.cmpi ne, %own, %c0_i8 : i8
      %s = scf.if %live -> (f32) {
        %dot = moe.sum %c64 : f32 {
        ^bb0(%j: index):
          %a = memref.load %x[%k, %j] : memref<?x64xf32>
          moe.yield %a : f32
        }
        scf.yield %dot : f32
      } else {
        scf.yield %zero : f32
      }
      moe.write %s to [%t, %e] : f32
    }
    return
  }
  func.func @first_expert(%map: !llvm.ptr {moe.arg = #moe.arg<tensor, "map">, llvm.readonly},
                       %xs: !llvm.ptr {moe.arg = #moe.arg<tensor, "x">, llvm.readonly},
                       %pg: !llvm.ptr {moe.arg = #moe.arg<tensor, "pg">}, %T: index {moe.arg = #moe.arg<dim, "T">}) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c64 = arith.constant 64 : index
    %c0_i8 = arith.constant 0 : i8
    %zero = arith.constant 0.0 : f32
    %m = moe.view %map[%T, %c4] : !llvm.ptr -> memref<?x4xi8>
    %x = moe.view %xs[%c4, %c64] : !llvm.ptr -> memref<?x64xf32>
    %out = moe.view %pg[%T, %c4] : !llvm.ptr -> memref<?x4xf32>
    moe.scatter %out[%T, %c4] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 1, vector = 1, unroll = 8>} : memref<?x4xf32> {
    ^bb0(%t: index, %e: index):
      %k = moe.fold %e, %c0 : index {
      ^bb0(%j: index, %n: index):
        %b = memref.load %m[%t, %j] : memref<?x4xi8>
        %set = arith.cmpi ne, %b, %c0_i8 : i8
        %n1 = arith.addi %n, %c1 : index
        %r = arith.select %set, %n1, %n : index
        moe.yield %r : index
      }
      %own = memref.load %m[%t, %c0] : memref<?x4xi8>
      %live = arith.cmpi ne, %own, %c0_i8 : i8
      %s = scf.if %live -> (f32) {
        %dot = moe.sum %c64 : f32 {
        ^bb0(%j: index):
          %a = memref.load %x[%k, %j] : memref<?x64xf32>
          moe.yield %a : f32
        }
        scf.yield %dot : f32
      } else {
        scf.yield %zero : f32
      }
      moe.write %s to [%t, %e] : f32
    }
    return
  }
  func.func @body_row(%map: !llvm.ptr {moe.arg = #moe.arg<tensor, "map">, llvm.readonly},
                         %xs: !llvm.ptr {moe.arg = #moe.arg<tensor, "x">, llvm.readonly},
                         %gs: !llvm.ptr {moe.arg = #moe.arg<tensor, "g">, llvm.readonly},
                         %pg: !llvm.ptr {moe.arg = #moe.arg<tensor, "pg">}, %T: index {moe.arg = #moe.arg<dim, "T">}) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c64 = arith.constant 64 : index
    %c0_i8 = arith.constant 0 : i8
    %zero = arith.constant 0.0 : f32
    %m = moe.view %map[%T, %c4] : !llvm.ptr -> memref<?x4xi8>
    %x = moe.view %xs[%c4, %c64] : !llvm.ptr -> memref<?x64xf32>
    %g = moe.view %gs[%T, %c64] : !llvm.ptr -> memref<?x64xf32>
    %out = moe.view %pg[%T, %c4] : !llvm.ptr -> memref<?x4xf32>
    moe.scatter %out[%T, %c4] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 1, vector = 1, unroll = 8>} : memref<?x4xf32> {
    ^bb0(%t0: index, %e: index):
      %t = arith.addi %t0, %c0 : index
      %k = moe.fold %e, %c0 : index {
      ^bb0(%j: index, %n: index):
        %b = memref.load %m[%t, %j] : memref<?x4xi8>
        %set = arith.cmpi ne, %b, %c0_i8 : i8
        %n1 = arith.addi %n, %c1 : index
        %r = arith.select %set, %n1, %n : index
        moe.yield %r : index
      }
      %own = memref.load %m[%t, %e] : memref<?x4xi8>
      %live = arith.cmpi ne, %own, %c0_i8 : i8
      %s = scf.if %live -> (f32) {
        %dot = moe.sum %c64 : f32 {
        ^bb0(%j: index):
          %a = memref.load %x[%k, %j] : memref<?x64xf32>
          %w = memref.load %g[%t, %j] : memref<?x64xf32>
          %p = arith.mulf %a, %w : f32
          moe.yield %p : f32
        }
        scf.yield %dot : f32
      } else {
        scf.yield %zero : f32
      }
      moe.write %s to [%t, %e] : f32
    }
    return
  }
}
