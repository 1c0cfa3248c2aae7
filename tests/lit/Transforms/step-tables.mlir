// moe-step-tables marks moe.step_table each fold that a GPU row runs along (its accumulator varies along the
// row) and whose steps are known before the row's loop (a constant, or a list's count, of at most 4096
// steps, computed before the domain or by a row-invariant op). moe-lower-to-gpu then fills the marked folds'
// tables in the row's prologue (gpu-step-tables.mlir).
// RUN: moec-opt %s --moe-step-tables | FileCheck %s
// A fold over a moe.compact's list: marked where the list is built once per row (moe-hoist-row-invariants
// marks the compact), not where it is built anew for each element.
// RUN: moec-opt %S/compact-predicated-folds-gpu.mlir --moe-compact-predicated-folds=target=gpu --moe-hoist-row-invariants --moe-step-tables | FileCheck %s --check-prefix=LIST
// RUN: moec-opt %S/compact-predicated-folds-gpu.mlir --moe-compact-predicated-folds=target=gpu --moe-step-tables | FileCheck %s --check-prefix=LIST-PER-ELEMENT
// The attribute's verifier cases are in Dialect/attributes.mlir.

// CHECK-LABEL: func.func @along_the_row
// CHECK: moe.fold %c8, %cst {moe.step_table} : f32
// CHECK-LABEL: func.func @same_for_every_element
// CHECK-NOT: moe.step_table
// CHECK-LABEL: func.func @too_many_steps
// CHECK-NOT: moe.step_table
// CHECK-LABEL: func.func @row_group
// CHECK-NOT: moe.step_table
// CHECK-LABEL: func.func @points
// CHECK-NOT: moe.step_table
// CHECK: return

// LIST: moe.compact {{.*}}moe.row_invariant
// LIST: moe.fold {{.*}}{moe.step_table}
// LIST-PER-ELEMENT: moe.compact
// LIST-PER-ELEMENT-NOT: moe.step_table

module attributes {moe.dtype = "f32", moe.op = "step_tables"} {
  // Each step reads row r = rowmap[t, k] of x along h: its rowmap entry is per-step work the table holds.
  func.func @along_the_row(%x: !llvm.ptr, %map: !llvm.ptr, %y: !llvm.ptr, %t: index) {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %cst = arith.constant 0.000000e+00 : f32
    %out = moe.view %y[%t, %c64] : !llvm.ptr -> memref<?x64xf32>
    %rows = moe.view %map[%t, %c8] : !llvm.ptr -> memref<?x8xi32>
    %in = moe.view %x[%t, %c64] : !llvm.ptr -> memref<?x64xf32>
    moe.compute %out[%t, %c64] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 4, unroll = 8>} : memref<?x64xf32> {
    ^bb0(%n: index, %h: index):
      %sum = moe.fold %c8, %cst : f32 {
      ^bb0(%k: index, %acc: f32):
        %e = memref.load %rows[%n, %k] : memref<?x8xi32>
        %r = arith.index_cast %e : i32 to index
        %v = memref.load %in[%r, %h] : memref<?x64xf32>
        %s = arith.addf %acc, %v : f32
        moe.yield %s : f32
      }
      moe.yield %sum : f32
    }
    return
  }

  // A fold whose steps read nothing along h computes one value per row: no table.
  func.func @same_for_every_element(%map: !llvm.ptr, %y: !llvm.ptr, %t: index) {
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %cst = arith.constant 0.000000e+00 : f32
    %out = moe.view %y[%t, %c64] : !llvm.ptr -> memref<?x64xf32>
    %rows = moe.view %map[%t, %c8] : !llvm.ptr -> memref<?x8xi32>
    moe.compute %out[%t, %c64] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 4, unroll = 8>} : memref<?x64xf32> {
    ^bb0(%n: index, %h: index):
      %sum = moe.fold %c8, %cst : f32 {
      ^bb0(%k: index, %acc: f32):
        %e = memref.load %rows[%n, %k] : memref<?x8xi32>
        %f = arith.sitofp %e : i32 to f32
        %s = arith.addf %acc, %f : f32
        moe.yield %s : f32
      }
      moe.yield %sum : f32
    }
    return
  }

  // 8192 steps would not fit the block's shared memory.
  func.func @too_many_steps(%x: !llvm.ptr, %map: !llvm.ptr, %y: !llvm.ptr, %t: index) {
    %c8192 = arith.constant 8192 : index
    %c64 = arith.constant 64 : index
    %cst = arith.constant 0.000000e+00 : f32
    %out = moe.view %y[%t, %c64] : !llvm.ptr -> memref<?x64xf32>
    %rows = moe.view %map[%t, %c8192] : !llvm.ptr -> memref<?x8192xi32>
    %in = moe.view %x[%t, %c64] : !llvm.ptr -> memref<?x64xf32>
    moe.compute %out[%t, %c64] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 4, unroll = 8>} : memref<?x64xf32> {
    ^bb0(%n: index, %h: index):
      %sum = moe.fold %c8192, %cst : f32 {
      ^bb0(%k: index, %acc: f32):
        %e = memref.load %rows[%n, %k] : memref<?x8192xi32>
        %r = arith.index_cast %e : i32 to index
        %v = memref.load %in[%r, %h] : memref<?x64xf32>
        %s = arith.addf %acc, %v : f32
        moe.yield %s : f32
      }
      moe.yield %sum : f32
    }
    return
  }

  // A row group runs its rows a block each (moe-group-rows), not a row per warp: no tables.
  func.func @row_group(%x: !llvm.ptr, %map: !llvm.ptr, %y: !llvm.ptr, %t: index) {
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %cst = arith.constant 0.000000e+00 : f32
    %out = moe.view %y[%t, %c64] : !llvm.ptr -> memref<?x64xf32>
    %rows = moe.view %map[%t, %c8] : !llvm.ptr -> memref<?x8xi32>
    %in = moe.view %x[%t, %c64] : !llvm.ptr -> memref<?x64xf32>
    moe.compute %out[%t, %c64] {moe.row_group, schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 4, unroll = 8>} : memref<?x64xf32> {
    ^bb0(%n: index, %h: index):
      %sum = moe.fold %c8, %cst : f32 {
      ^bb0(%k: index, %acc: f32):
        %e = memref.load %rows[%n, %k] : memref<?x8xi32>
        %r = arith.index_cast %e : i32 to index
        %v = memref.load %in[%r, %h] : memref<?x64xf32>
        %s = arith.addf %acc, %v : f32
        moe.yield %s : f32
      }
      moe.yield %sum : f32
    }
    return
  }

  // A point domain (a dot product per point) runs a warp per point: its fold, though it varies with the point's
  // last index, runs on the warp, not along a row.
  func.func @points(%x: !llvm.ptr, %map: !llvm.ptr, %y: !llvm.ptr, %t: index) {
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %zero = arith.constant 0 : index
    %out = moe.view %y[%t, %c8] : !llvm.ptr -> memref<?x8xf32>
    %rows = moe.view %map[%t, %c8] : !llvm.ptr -> memref<?x8xi32>
    %in = moe.view %x[%t, %c64] : !llvm.ptr -> memref<?x64xf32>
    moe.compute %out[%t, %c8] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 4, unroll = 8>} : memref<?x8xf32> {
    ^bb0(%n: index, %e: index):
      %k = moe.fold %c8, %zero : index {
      ^bb0(%j: index, %count: index):
        %m = memref.load %rows[%n, %e] : memref<?x8xi32>
        %i = arith.index_cast %m : i32 to index
        %c = arith.addi %count, %i : index
        moe.yield %c : index
      }
      %sum = moe.sum %c64 : f32 {
      ^bb0(%j: index):
        %v = memref.load %in[%k, %j] : memref<?x64xf32>
        moe.yield %v : f32
      }
      moe.yield %sum : f32
    }
    return
  }
}

