// moe-version-row-loops on a GPU fold over table entries (C2's shape): each step reads its gathered row and
// the row's bounds check from shared-memory tables that the row's prologue wrote, the check or'ed with
// "true at every step" (%all, from the prologue: moe-lower-to-gpu's step tables). The check is then no
// condition of the row, but its `or` has one: where %all holds, a copy of the loop runs without the branch,
// its gathers back to back; the original runs otherwise and reports the error.
// @mixed: an `or` of two values from inside the loop decides nothing for the row: no version.
// RUN: moec-opt %s --moe-version-row-loops="select-versions=false" --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @table
// CHECK:      scf.if %arg6 -> (vector<4xf32>) {
// CHECK-NEXT:   scf.for %[[J:.*]] = %c0 to %arg5 step %c1 iter_args(%[[ACC:.*]] = %{{.*}}) -> (vector<4xf32>) {
// CHECK-NEXT:     %[[R:.*]] = memref.load %arg3[%[[J]]] : memref<16xi32>
// CHECK-NEXT:     %[[RI:.*]] = arith.index_cast %[[R]] : i32 to index
// CHECK-NEXT:     %[[V:.*]] = vector.load %{{.*}}[%[[RI]], %arg7] : memref<?x64xf32>, vector<4xf32>
// CHECK-NEXT:     %[[S:.*]] = arith.addf %[[ACC]], %[[V]] : vector<4xf32>
// CHECK-NEXT:     scf.yield %[[S]] : vector<4xf32>
// CHECK-NEXT:   }
// CHECK:      } else {
// CHECK:        scf.for
// CHECK:          memref.load %arg4
// CHECK:          scf.if
// CHECK:            memref.store %{{.*}}, %{{.*}}[%c0] : memref<2xi64>
// CHECK-LABEL: func.func @mixed
// CHECK-NOT:  scf.if %{{.*}} -> (vector<4xf32>) {
// CHECK:      scf.for
// CHECK:        scf.if %{{.*}} -> (vector<4xf32>) {
func.func @table(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %op: !llvm.ptr {llvm.noalias},
                 %sp: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %rowsTable: memref<16xi32>,
                 %checkTable: memref<16xi32>, %count: index, %all: i1, %h: index, %rows: index, %t: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : vector<4xf32>
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xf32>
  %out = moe.view %op[%t, %c64] : !llvm.ptr -> memref<?x64xf32>
  %status = moe.view %sp[%c2] : !llvm.ptr -> memref<2xi64>
  %sum = scf.for %j = %c0 to %count step %c1 iter_args(%acc = %zero) -> (vector<4xf32>) {
    %r = memref.load %rowsTable[%j] : memref<16xi32>
    %ri = arith.index_cast %r : i32 to index
    %word = memref.load %checkTable[%j] : memref<16xi32>
    %bit = arith.trunci %word : i32 to i1
    %inside = arith.ori %all, %bit : i1
    %v = scf.if %inside -> (vector<4xf32>) {
      %g = vector.load %x[%ri, %h] : memref<?x64xf32>, vector<4xf32>
      scf.yield %g : vector<4xf32>
    } else {
      memref.store %one, %status[%c0] : memref<2xi64>
      scf.yield %zero : vector<4xf32>
    }
    %s = arith.addf %acc, %v : vector<4xf32>
    scf.yield %s : vector<4xf32>
  }
  vector.store %sum, %out[%t, %h] : memref<?x64xf32>, vector<4xf32>
  return
}

func.func @mixed(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %op: !llvm.ptr {llvm.noalias},
                 %sp: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %rowsTable: memref<16xi32>,
                 %checkTable: memref<16xi32>, %count: index, %h: index, %rows: index, %t: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : vector<4xf32>
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xf32>
  %out = moe.view %op[%t, %c64] : !llvm.ptr -> memref<?x64xf32>
  %status = moe.view %sp[%c2] : !llvm.ptr -> memref<2xi64>
  %sum = scf.for %j = %c0 to %count step %c1 iter_args(%acc = %zero) -> (vector<4xf32>) {
    %r = memref.load %rowsTable[%j] : memref<16xi32>
    %ri = arith.index_cast %r : i32 to index
    %word = memref.load %checkTable[%j] : memref<16xi32>
    %bit = arith.trunci %word : i32 to i1
    %nonneg = arith.cmpi sge, %ri, %c0 : index
    %inside = arith.ori %nonneg, %bit : i1
    %v = scf.if %inside -> (vector<4xf32>) {
      %g = vector.load %x[%ri, %h] : memref<?x64xf32>, vector<4xf32>
      scf.yield %g : vector<4xf32>
    } else {
      memref.store %one, %status[%c0] : memref<2xi64>
      scf.yield %zero : vector<4xf32>
    }
    %s = arith.addf %acc, %v : vector<4xf32>
    scf.yield %s : vector<4xf32>
  }
  vector.store %sum, %out[%t, %h] : memref<?x64xf32>, vector<4xf32>
  return
}
