// moe-version-row-loops on CPU loops along a row.
// @terms (B2's shape, top-2, compacted): term 0's row is bounds-checked (the else branch reports into the
// status buffer), term 1 is added when the row has two live terms (`count > 1`, else the sum passes on).
// The loop runs in a version without either branch when the row is inside and the term live, checked
// once before the loop; the original loop runs otherwise. @carried: a loop with an accumulator yields it
// through the version choice (the canonicalizer folds the original's branch, known false there).
// @both_work: neither side of the branch is usual (both read): no version.
// @varying: the condition changes along the loop: no version. @count, @written, @read_elsewhere: below.
// RUN: moec-opt %s --moe-version-row-loops --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @terms
// CHECK:      scf.for %[[N:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:        %[[LIVE:.*]] = arith.cmpi ugt, %{{.*}}, %c1 : index
// CHECK:        %[[USUAL:.*]] = arith.andi %[[INSIDE:.*]], %[[LIVE]] : i1
// CHECK-NEXT:   scf.if %[[USUAL]] {
// CHECK-NEXT:     scf.for %[[H:.*]] = %c0 to %c64 step %c16 {
// CHECK-NEXT:       %[[A:.*]] = vector.load %arg0[%[[R0:.*]], %[[H]]] : memref<?x64xf32>, vector<16xf32>
// CHECK-NEXT:       %[[B:.*]] = vector.load %arg0[%[[R1:.*]], %[[H]]] : memref<?x64xf32>, vector<16xf32>
// CHECK-NEXT:       %[[S:.*]] = arith.addf %[[A]], %[[B]] : vector<16xf32>
// CHECK-NEXT:       vector.store %[[S]], %arg2[%[[N]], %[[H]]] : memref<?x64xf32>, vector<16xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   } else {
// CHECK-NEXT:     scf.for %[[H2:.*]] = %c0 to %c64 step %c16 {
// CHECK-NEXT:       scf.if %[[INSIDE]] -> (vector<16xf32>) {
// CHECK:            } else {
// CHECK:              memref.store %{{.*}}, %arg3[%c0] : memref<2xi64>
// CHECK:            scf.if %[[LIVE]] -> (vector<16xf32>) {
// CHECK:            vector.store
// CHECK-NEXT:     }
// CHECK-NEXT:   }
func.func @terms(%x: memref<?x64xf32>, %idx: memref<?xi32>, %out: memref<?x64xf32>,
                 %status: memref<2xi64> {moe.arg = #moe.arg<status>}, %rows: index, %begin: index, %end: index,
                 %counts: memref<?xindex>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : vector<16xf32>
  scf.for %n = %begin to %end step %c1 {
    %first = arith.muli %n, %c2 : index
    %i0 = memref.load %idx[%first] : memref<?xi32>
    %r0 = arith.index_cast %i0 : i32 to index
    %nonneg = arith.cmpi sge, %r0, %c0 : index
    %below = arith.cmpi slt, %r0, %rows : index
    %inside = arith.andi %nonneg, %below : i1
    %second = arith.addi %first, %c1 : index
    %i1 = memref.load %idx[%second] : memref<?xi32>
    %r1 = arith.index_cast %i1 : i32 to index
    %count = memref.load %counts[%n] : memref<?xindex>
    scf.for %h = %c0 to %c64 step %c16 {
      %a = scf.if %inside -> (vector<16xf32>) {
        %v = vector.load %x[%r0, %h] : memref<?x64xf32>, vector<16xf32>
        scf.yield %v : vector<16xf32>
      } else {
        memref.store %one, %status[%c0] : memref<2xi64>
        scf.yield %zero : vector<16xf32>
      }
      %live = arith.cmpi ugt, %count, %c1 : index
      %s = scf.if %live -> (vector<16xf32>) {
        %v = vector.load %x[%r1, %h] : memref<?x64xf32>, vector<16xf32>
        %t = arith.addf %a, %v : vector<16xf32>
        scf.yield %t : vector<16xf32>
      } else {
        scf.yield %a : vector<16xf32>
      }
      vector.store %s, %out[%n, %h] : memref<?x64xf32>, vector<16xf32>
    }
  }
  return
}

// CHECK-LABEL: func.func @carried
// CHECK:      %[[SUM:.*]] = scf.if %[[INSIDE:.*]] -> (vector<16xf32>) {
// CHECK-NEXT:   %[[FAST:.*]] = scf.for %{{.*}} = %c0 to %c64 step %c16 iter_args(%[[ACC:[^ ]*]] = %{{[^)]*}})
// CHECK-SAME:     -> (vector<16xf32>) {
// CHECK-NEXT:     %[[V:.*]] = vector.load
// CHECK-NEXT:     %[[T:.*]] = arith.addf %[[ACC]], %[[V]] : vector<16xf32>
// CHECK-NEXT:     scf.yield %[[T]] : vector<16xf32>
// CHECK-NEXT:   }
// CHECK-NEXT:   scf.yield %[[FAST]] : vector<16xf32>
// CHECK-NEXT: } else {
// CHECK-NEXT:   %[[SLOW:.*]] = scf.for
// CHECK-NEXT:     memref.store %{{.*}}, %arg3[%c0] : memref<2xi64>
// CHECK:        scf.yield %[[SLOW]] : vector<16xf32>
// CHECK:      vector.store %[[SUM]], %arg2[%c0] : memref<16xf32>, vector<16xf32>
func.func @carried(%x: memref<?x64xf32>, %row: index, %out: memref<16xf32>,
                   %status: memref<2xi64> {moe.arg = #moe.arg<status>}, %rows: index) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : vector<16xf32>
  %inside = arith.cmpi ult, %row, %rows : index
  %sum = scf.for %h = %c0 to %c64 step %c16 iter_args(%acc = %zero) -> (vector<16xf32>) {
    %v = scf.if %inside -> (vector<16xf32>) {
      %l = vector.load %x[%row, %h] : memref<?x64xf32>, vector<16xf32>
      scf.yield %l : vector<16xf32>
    } else {
      memref.store %one, %status[%c0] : memref<2xi64>
      scf.yield %zero : vector<16xf32>
    }
    %t = arith.addf %acc, %v : vector<16xf32>
    scf.yield %t : vector<16xf32>
  }
  vector.store %sum, %out[%c0] : memref<16xf32>, vector<16xf32>
  return
}

// CHECK-LABEL: func.func @both_work
// CHECK:     scf.for
// CHECK-NOT: scf.for
// CHECK:     return
func.func @both_work(%x: memref<?x64xf32>, %y: memref<?x64xf32>, %out: memref<?x64xf32>, %pick: i1, %n: index) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  scf.for %h = %c0 to %c64 step %c16 {
    %v = scf.if %pick -> (vector<16xf32>) {
      %l = vector.load %x[%n, %h] : memref<?x64xf32>, vector<16xf32>
      scf.yield %l : vector<16xf32>
    } else {
      %l = vector.load %y[%n, %h] : memref<?x64xf32>, vector<16xf32>
      scf.yield %l : vector<16xf32>
    }
    vector.store %v, %out[%n, %h] : memref<?x64xf32>, vector<16xf32>
  }
  return
}

// CHECK-LABEL: func.func @varying
// CHECK:     scf.for
// CHECK-NOT: scf.for
// CHECK:     return
func.func @varying(%x: memref<?x64xf32>, %out: memref<?x64xf32>, %n: index,
                   %status: memref<2xi64> {moe.arg = #moe.arg<status>}) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %c48 = arith.constant 48 : index
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : vector<16xf32>
  scf.for %h = %c0 to %c64 step %c16 {
    %inside = arith.cmpi ult, %h, %c48 : index
    %v = scf.if %inside -> (vector<16xf32>) {
      %l = vector.load %x[%n, %h] : memref<?x64xf32>, vector<16xf32>
      scf.yield %l : vector<16xf32>
    } else {
      memref.store %one, %status[%c0] : memref<2xi64>
      scf.yield %zero : vector<16xf32>
    }
    vector.store %v, %out[%n, %h] : memref<?x64xf32>, vector<16xf32>
  }
  return
}

// @count (a compacted top-3 fold): terms 1 and 2 run when the row's live count exceeds 1 and 2, each term's
// row is bounds-checked inside its branch. The count selects a version per value, clamped to [1, 3] (up to 1
// only term 0 is live, from 3 on every term), each without branches; the bounds checks must hold only for the
// live terms (term 2's check or count <= 2, ...).
// CHECK-LABEL: func.func @count
// CHECK-DAG:  %[[DEAD1:.*]] = arith.cmpi ule, %[[COUNT:.*]], %c1 : index
// CHECK-DAG:  %[[OK1:.*]] = arith.ori %[[IN1:.*]], %[[DEAD1]] : i1
// CHECK-DAG:  %[[DEAD2:.*]] = arith.cmpi ule, %[[COUNT]], %c2 : index
// CHECK-DAG:  %[[OK2:.*]] = arith.ori %[[IN2:.*]], %[[DEAD2]] : i1
// CHECK:      %[[BOTH:.*]] = arith.andi %[[OK1]], %[[OK2]] : i1
// CHECK-NEXT: scf.if %[[BOTH]] {
// CHECK-NEXT:   %[[LEAST:.*]] = arith.maxui %[[COUNT]], %c1 : index
// CHECK-NEXT:   %[[AT:.*]] = arith.minui %[[LEAST]], %c3 : index
// CHECK-NEXT:   scf.index_switch %[[AT]]
// CHECK-NEXT:   case 1 {
// CHECK-NEXT:     scf.for
// CHECK-NEXT:       %[[B0:.*]] = vector.load
// CHECK-NEXT:       vector.store %[[B0]]
// CHECK-NEXT:     }
// CHECK:      case 2 {
// CHECK-NEXT:     scf.for
// CHECK-NEXT:       vector.load
// CHECK-NEXT:       vector.load
// CHECK-NEXT:       arith.addf
// CHECK-NEXT:       vector.store
// CHECK-NEXT:     }
// CHECK:      default {
// CHECK-NEXT:     scf.for
// CHECK-NEXT:       vector.load
// CHECK-NEXT:       vector.load
// CHECK-NEXT:       arith.addf
// CHECK-NEXT:       vector.load
// CHECK-NEXT:       arith.addf
// CHECK-NEXT:       vector.store
// CHECK-NEXT:     }
// CHECK:      } else {
// CHECK-NEXT:   scf.for
// CHECK:          scf.if %{{.*}} -> (vector<16xf32>) {
func.func @count(%x: memref<?x64xf32>, %out: memref<?x64xf32>, %status: memref<2xi64> {moe.arg = #moe.arg<status>},
                 %n: index, %r0: index, %r1: index, %r2: index, %rows: index, %count: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : vector<16xf32>
  %in1 = arith.cmpi ult, %r1, %rows : index
  %in2 = arith.cmpi ult, %r2, %rows : index
  scf.for %h = %c0 to %c64 step %c16 {
    %a = vector.load %x[%r0, %h] : memref<?x64xf32>, vector<16xf32>
    %live1 = arith.cmpi ugt, %count, %c1 : index
    %s1 = scf.if %live1 -> (vector<16xf32>) {
      %v = scf.if %in1 -> (vector<16xf32>) {
        %l = vector.load %x[%r1, %h] : memref<?x64xf32>, vector<16xf32>
        scf.yield %l : vector<16xf32>
      } else {
        memref.store %one, %status[%c0] : memref<2xi64>
        scf.yield %zero : vector<16xf32>
      }
      %t = arith.addf %a, %v : vector<16xf32>
      scf.yield %t : vector<16xf32>
    } else {
      scf.yield %a : vector<16xf32>
    }
    %live2 = arith.cmpi ugt, %count, %c2 : index
    %s2 = scf.if %live2 -> (vector<16xf32>) {
      %v = scf.if %in2 -> (vector<16xf32>) {
        %l = vector.load %x[%r2, %h] : memref<?x64xf32>, vector<16xf32>
        scf.yield %l : vector<16xf32>
      } else {
        memref.store %one, %status[%c0] : memref<2xi64>
        scf.yield %zero : vector<16xf32>
      }
      %t = arith.addf %s1, %v : vector<16xf32>
      scf.yield %t : vector<16xf32>
    } else {
      scf.yield %s1 : vector<16xf32>
    }
    vector.store %s2, %out[%n, %h] : memref<?x64xf32>, vector<16xf32>
  }
  return
}

// @written (a row of points, A3's probs gradient): each point writes its row when it has one (`if` without
// else), and a copy of it always. The loop runs without the guard when the point's row is written.
// CHECK-LABEL: func.func @written
// CHECK:      scf.if %arg4 {
// CHECK-NEXT:   scf.for
// CHECK-NEXT:     %[[V:.*]] = vector.load
// CHECK-NEXT:     vector.store %[[V]], %arg1
// CHECK-NEXT:     vector.store %[[V]], %arg2
// CHECK-NEXT:   }
// CHECK-NEXT: } else {
// CHECK-NEXT:   scf.for
// CHECK-NEXT:     %[[W:.*]] = vector.load
// CHECK-NEXT:     vector.store %[[W]], %arg2
// CHECK-NEXT:   }
func.func @written(%x: memref<?x64xf32>, %out: memref<?x64xf32>, %copy: memref<?x64xf32>, %n: index, %writes: i1) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  scf.for %h = %c0 to %c64 step %c16 {
    %v = vector.load %x[%n, %h] : memref<?x64xf32>, vector<16xf32>
    scf.if %writes {
      vector.store %v, %out[%n, %h] : memref<?x64xf32>, vector<16xf32>
    }
    vector.store %v, %copy[%n, %h] : memref<?x64xf32>, vector<16xf32>
  }
  return
}

// @read_elsewhere: as @count, but term 2's bounds condition is also read outside its branch (a select that
// runs for every count). The copies read it as true, so it must hold whatever the count (no `or count <= 2`);
// term 1's check is still needed only where term 1 is live.
// CHECK-LABEL: func.func @read_elsewhere
// CHECK-DAG:  %[[IN1:.*]] = arith.cmpi ult, %arg5, %arg7 : index
// CHECK-DAG:  %[[IN2:.*]] = arith.cmpi ult, %arg6, %arg7 : index
// CHECK-DAG:  %[[DEAD1:.*]] = arith.cmpi ule, %arg8, %c1 : index
// CHECK-NOT:  arith.cmpi ule, %arg8, %c2
// CHECK:      %[[OK1:.*]] = arith.ori %[[IN1]], %[[DEAD1]] : i1
// CHECK-NEXT: %[[BOTH:.*]] = arith.andi %[[OK1]], %[[IN2]] : i1
// CHECK-NEXT: scf.if %[[BOTH]] {
// CHECK:        scf.index_switch
func.func @read_elsewhere(%x: memref<?x64xf32>, %out: memref<?x64xf32>, %status: memref<2xi64> {moe.arg = #moe.arg<status>},
                          %n: index, %r0: index, %r1: index, %r2: index, %rows: index, %count: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : vector<16xf32>
  %in1 = arith.cmpi ult, %r1, %rows : index
  %in2 = arith.cmpi ult, %r2, %rows : index
  scf.for %h = %c0 to %c64 step %c16 {
    %a = vector.load %x[%r0, %h] : memref<?x64xf32>, vector<16xf32>
    %live1 = arith.cmpi ugt, %count, %c1 : index
    %s1 = scf.if %live1 -> (vector<16xf32>) {
      %v = scf.if %in1 -> (vector<16xf32>) {
        %l = vector.load %x[%r1, %h] : memref<?x64xf32>, vector<16xf32>
        scf.yield %l : vector<16xf32>
      } else {
        memref.store %one, %status[%c0] : memref<2xi64>
        scf.yield %zero : vector<16xf32>
      }
      %t = arith.addf %a, %v : vector<16xf32>
      scf.yield %t : vector<16xf32>
    } else {
      scf.yield %a : vector<16xf32>
    }
    %live2 = arith.cmpi ugt, %count, %c2 : index
    %s2 = scf.if %live2 -> (vector<16xf32>) {
      %v = scf.if %in2 -> (vector<16xf32>) {
        %l = vector.load %x[%r2, %h] : memref<?x64xf32>, vector<16xf32>
        scf.yield %l : vector<16xf32>
      } else {
        memref.store %one, %status[%c0] : memref<2xi64>
        scf.yield %zero : vector<16xf32>
      }
      %t = arith.addf %s1, %v : vector<16xf32>
      scf.yield %t : vector<16xf32>
    } else {
      scf.yield %s1 : vector<16xf32>
    }
    %picked = arith.select %in2, %s2, %a : vector<16xf32>
    vector.store %picked, %out[%n, %h] : memref<?x64xf32>, vector<16xf32>
  }
  return
}
