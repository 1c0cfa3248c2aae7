// moe-version-row-loops on a GPU loop along a row (select-versions=false, as the GPU pipeline runs it).
// @gathers (B2's shape, top-2): the thread's loop along the row loads each term's row index and tests its
// bounds inside the loop; term 1's test sits in the branch of its live test. The index loads (a tensor the
// function only reads, at indices from outside the loop) move before the loop, under a branch that skips
// it when it would not run (the lane starts past the row), and so do the pure ops of the branches that
// depend on nothing in the loop. The loop then runs in a version without branches, both gathers issued
// back to back, when every row is inside and term 1 live. When every row is inside but term 1 is skipped,
// a second copy runs: without the bounds checks, with term 1's live test (moe-guard-loads then makes its
// load a predicated one: GUARD). The original loop runs otherwise: for a row that failed a check, so it
// only reports (its loads, arithmetic and output stores would hold registers the whole kernel pays for).
// @written: the index tensor is also written (no llvm.readonly): its load stays in the loop, no version.
// @carried: below.
// RUN: moec-opt %s --moe-version-row-loops="select-versions=false" --canonicalize | FileCheck %s
// RUN: moec-opt %s --moe-version-row-loops="select-versions=false" --canonicalize --moe-guard-loads | FileCheck %s --check-prefix=GUARD

// CHECK-LABEL: func.func @gathers
// CHECK:      %[[RUNS:.*]] = arith.cmpi slt, %arg6, %c64 : index
// CHECK-NEXT: scf.if %[[RUNS]] {
// CHECK:        memref.load
// CHECK:        memref.load
// CHECK:        scf.if %{{.*}} {
// CHECK-NEXT:     scf.for %[[H:.*]] = %arg6 to %c64 step %c32 {
// CHECK-NEXT:       %[[A:.*]] = vector.load %{{.*}}[%{{.*}}, %[[H]]] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
// CHECK-NEXT:       %[[B:.*]] = vector.load %{{.*}}[%{{.*}}, %[[H]]] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
// CHECK-NEXT:       %[[S:.*]] = arith.addf %[[A]], %[[B]] : vector<4xf32>
// CHECK-NEXT:       vector.store %[[S]], %{{.*}}[%arg5, %[[H]]] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   } else {
// CHECK-NEXT:     %[[SKIPPED:.*]] = arith.xori %arg7, %true : i1
// CHECK-NEXT:     %[[INSIDE1:.*]] = arith.ori %{{.*}}, %[[SKIPPED]] : i1
// CHECK-NEXT:     %[[CHECKS:.*]] = arith.andi %{{.*}}, %[[INSIDE1]] : i1
// CHECK-NEXT:     scf.if %[[CHECKS]] {
// CHECK-NEXT:       scf.for %[[H2:.*]] = %arg6 to %c64 step %c32 {
// CHECK-NEXT:         vector.load %{{.*}}[%{{.*}}, %[[H2]]] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
// CHECK-NEXT:         scf.if %arg7 -> (vector<4xf32>) {
// CHECK-NEXT:           vector.load %{{.*}}[%{{.*}}, %[[H2]]] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
// CHECK-NEXT:           scf.yield
// CHECK-NEXT:         } else {
// CHECK-NEXT:           scf.yield
// CHECK-NEXT:         }
// CHECK-NEXT:         arith.addf
// CHECK-NEXT:         vector.store {{.*}} : memref<?x64xf32>, vector<4xf32>
// CHECK-NEXT:       }
// CHECK-NEXT:     } else {
// CHECK-NEXT:       scf.for
// CHECK-NOT:          vector.
// CHECK:              memref.store %{{.*}}, %{{.*}}[%c0] : memref<2xi64>
// CHECK-NOT:          vector.
// CHECK-NOT:          scf.index_switch
// CHECK:              return
// GUARD-LABEL: func.func @gathers
// GUARD:       scf.for %[[H2:.*]] = %arg6 to %c64 step %c32 {
// GUARD:       scf.for %[[H2:.*]] = %arg6 to %c64 step %c32 {
// GUARD-NEXT:    %[[A:.*]] = vector.load %{{.*}}[%{{.*}}, %[[H2]]] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
// GUARD-NEXT:    %[[B:.*]] = moe.guarded_load %{{.*}}[%{{.*}}, %[[H2]]] if %arg7 readonly : memref<?x64xf32>, vector<4xf32>
// GUARD-NEXT:    arith.addf %[[A]], %[[B]] : vector<4xf32>
func.func @gathers(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %ip: !llvm.ptr {llvm.noalias, llvm.readonly},
                   %op: !llvm.ptr {llvm.noalias}, %sp: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>},
                   %rows: index, %n: index, %lane: index, %live: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : vector<4xf32>
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xf32>
  %entries = arith.muli %n, %c2 : index
  %idx = moe.view %ip[%entries] : !llvm.ptr -> memref<?xi32>
  %out = moe.view %op[%n, %c64] : !llvm.ptr -> memref<?x64xf32>
  %status = moe.view %sp[%c2] : !llvm.ptr -> memref<2xi64>
  %first = arith.muli %n, %c2 : index
  %second = arith.addi %first, %c1 : index
  scf.for %h = %lane to %c64 step %c32 {
    %i0 = memref.load %idx[%first] : memref<?xi32>
    %r0 = arith.index_cast %i0 : i32 to index
    %nonneg0 = arith.cmpi sge, %r0, %c0 : index
    %below0 = arith.cmpi slt, %r0, %rows : index
    %inside0 = arith.andi %nonneg0, %below0 : i1
    %a = scf.if %inside0 -> (vector<4xf32>) {
      %v = vector.load %x[%r0, %h] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
      scf.yield %v : vector<4xf32>
    } else {
      memref.store %one, %status[%c0] : memref<2xi64>
      scf.yield %zero : vector<4xf32>
    }
    %i1 = memref.load %idx[%second] : memref<?xi32>
    %r1 = arith.index_cast %i1 : i32 to index
    %b = scf.if %live -> (vector<4xf32>) {
      %nonneg1 = arith.cmpi sge, %r1, %c0 : index
      %below1 = arith.cmpi slt, %r1, %rows : index
      %inside1 = arith.andi %nonneg1, %below1 : i1
      %w = scf.if %inside1 -> (vector<4xf32>) {
        %v = vector.load %x[%r1, %h] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
        scf.yield %v : vector<4xf32>
      } else {
        memref.store %one, %status[%c0] : memref<2xi64>
        scf.yield %zero : vector<4xf32>
      }
      scf.yield %w : vector<4xf32>
    } else {
      scf.yield %zero : vector<4xf32>
    }
    %s = arith.addf %a, %b : vector<4xf32>
    vector.store %s, %out[%n, %h] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
  }
  return
}

// CHECK-LABEL: func.func @written
// CHECK:      scf.for
// CHECK-NEXT:   memref.load
// CHECK:        scf.if
// CHECK-NOT:  scf.for
func.func @written(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %ip: !llvm.ptr {llvm.noalias},
                   %op: !llvm.ptr {llvm.noalias}, %sp: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>},
                   %rows: index, %n: index, %lane: index) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %c2 = arith.constant 2 : index
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : vector<4xf32>
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xf32>
  %idx = moe.view %ip[%n] : !llvm.ptr -> memref<?xi32>
  %out = moe.view %op[%n, %c64] : !llvm.ptr -> memref<?x64xf32>
  %status = moe.view %sp[%c2] : !llvm.ptr -> memref<2xi64>
  scf.for %h = %lane to %c64 step %c32 {
    %i0 = memref.load %idx[%n] : memref<?xi32>
    %r0 = arith.index_cast %i0 : i32 to index
    %nonneg0 = arith.cmpi sge, %r0, %c0 : index
    %below0 = arith.cmpi slt, %r0, %rows : index
    %inside0 = arith.andi %nonneg0, %below0 : i1
    %a = scf.if %inside0 -> (vector<4xf32>) {
      %v = vector.load %x[%r0, %h] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
      scf.yield %v : vector<4xf32>
    } else {
      memref.store %one, %status[%c0] : memref<2xi64>
      scf.yield %zero : vector<4xf32>
    }
    vector.store %a, %out[%n, %h] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
  }
  return
}

// @carried: a loop with an accumulator, its index load moved out: the branch that skips the loop when it
// would not run yields the loop's result, or the accumulator's initial value. A row that fails the check runs
// a loop that only reports it and carries nothing: its sum would only be written to the incomplete output
// (held across the loop, A3's 64 partial sums set its kernel's registers).
// CHECK-LABEL: func.func @carried
// CHECK:      %[[RUNS:.*]] = arith.cmpi slt, %arg4, %c64 : index
// CHECK-NEXT: %[[SUM:.*]] = scf.if %[[RUNS]] -> (vector<4xf32>) {
// CHECK-NEXT:   memref.load
// CHECK:          scf.for {{.*}} iter_args
// CHECK:        } else {
// CHECK-NEXT:     scf.for %{{.*}} = %arg4 to %c64 step %c32 {
// CHECK-NEXT:       memref.store %c1_i64
// CHECK-NEXT:     }
// CHECK-NEXT:     scf.yield %cst : vector<4xf32>
// CHECK-NEXT:   }
// CHECK:      } else {
// CHECK-NEXT:   scf.yield %cst : vector<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: vector.store %[[SUM]]
func.func @carried(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %ip: !llvm.ptr {llvm.noalias, llvm.readonly},
                   %sp: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %rows: index, %lane: index,
                   %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : vector<4xf32>
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xf32>
  %idx = moe.view %ip[%c1] : !llvm.ptr -> memref<?xi32>
  %status = moe.view %sp[%c2] : !llvm.ptr -> memref<2xi64>
  %sum = scf.for %h = %lane to %c64 step %c32 iter_args(%acc = %zero) -> (vector<4xf32>) {
    %i0 = memref.load %idx[%c0] : memref<?xi32>
    %r0 = arith.index_cast %i0 : i32 to index
    %nonneg = arith.cmpi sge, %r0, %c0 : index
    %below = arith.cmpi slt, %r0, %rows : index
    %inside = arith.andi %nonneg, %below : i1
    %a = scf.if %inside -> (vector<4xf32>) {
      %v = vector.load %x[%r0, %h] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
      scf.yield %v : vector<4xf32>
    } else {
      memref.store %one, %status[%c0] : memref<2xi64>
      scf.yield %zero : vector<4xf32>
    }
    %s = arith.addf %acc, %a : vector<4xf32>
    scf.yield %s : vector<4xf32>
  }
  vector.store %sum, %out[%c0] {alignment = 16 : i64} : memref<4xf32>, vector<4xf32>
  return
}

// @nested_check (C2's single-row copy): the copied row's check sits in the branch of a condition that is not
// the row's usual one either way (both sides load). A row that takes the other side never runs the check, but
// the copy is taken only where it holds: the original loop runs for rows that failed no check, and keeps its
// loads and stores.
// CHECK-LABEL: func.func @nested_check
// CHECK:        scf.for
// CHECK:          vector.store
// CHECK:      } else {
// CHECK-NEXT:   scf.for
// CHECK:          memref.store %{{.*}}, %{{.*}}[%c0] : memref<2xi64>
// CHECK:          vector.load %{{.*}}[%arg5, %{{.*}}]
// CHECK:          vector.store
func.func @nested_check(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %ip: !llvm.ptr {llvm.noalias, llvm.readonly},
                        %op: !llvm.ptr {llvm.noalias}, %sp: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>},
                        %rows: index, %n: index, %lane: index, %single: i1) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : vector<4xf32>
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xf32>
  %idx = moe.view %ip[%n] : !llvm.ptr -> memref<?xi32>
  %out = moe.view %op[%n, %c64] : !llvm.ptr -> memref<?x64xf32>
  %status = moe.view %sp[%c2] : !llvm.ptr -> memref<2xi64>
  scf.for %h = %lane to %c64 step %c32 {
    %i0 = memref.load %idx[%c0] : memref<?xi32>
    %r0 = arith.index_cast %i0 : i32 to index
    %nonneg0 = arith.cmpi sge, %r0, %c0 : index
    %below0 = arith.cmpi slt, %r0, %rows : index
    %inside0 = arith.andi %nonneg0, %below0 : i1
    %a = scf.if %single -> (vector<4xf32>) {
      %c = scf.if %inside0 -> (vector<4xf32>) {
        %v = vector.load %x[%r0, %h] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
        scf.yield %v : vector<4xf32>
      } else {
        memref.store %one, %status[%c0] : memref<2xi64>
        scf.yield %zero : vector<4xf32>
      }
      scf.yield %c : vector<4xf32>
    } else {
      %v = vector.load %x[%n, %h] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
      scf.yield %v : vector<4xf32>
    }
    vector.store %a, %out[%n, %h] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
  }
  return
}

// @warp_wide (a block list's loop, were its ballot stored under `lane == 0`): the loop holds a vote, which
// every lane of the warp must run together. Copies chosen by `lane == 0` would each hold the vote, run by
// only some of the lanes, so the loop is not versioned.
// CHECK-LABEL: func.func @warp_wide
// CHECK:        scf.for
// CHECK:          nvvm.vote.sync
// CHECK:          scf.if
// CHECK-NOT:    scf.for
// CHECK:        return
func.func @warp_wide(%ip: !llvm.ptr {llvm.noalias, llvm.readonly}, %op: !llvm.ptr {llvm.noalias},
                     %lane: index, %runs: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c0_i32 = arith.constant 0 : i32
  %all = arith.constant -1 : i32
  %idx = moe.view %ip[%c8] : !llvm.ptr -> memref<8xi32>
  %out = moe.view %op[%c8] : !llvm.ptr -> memref<8xi32>
  %first = arith.cmpi eq, %lane, %c0 : index
  scf.for %r = %c0 to %runs step %c1 {
    %v = memref.load %idx[%r] : memref<8xi32>
    %live = arith.cmpi sgt, %v, %c0_i32 : i32
    %mask = nvvm.vote.sync ballot %all, %live -> i32
    scf.if %first {
      memref.store %mask, %out[%r] : memref<8xi32>
    }
  }
  return
}
