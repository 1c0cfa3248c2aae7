// moe-interleave-reductions, then moe-lower-to-loops, on a point kernel (CPU): the A3 probs gradient
// (E = 4, H = 1024, f32: rows of a page) does not vectorize along e but runs a dot product over H per (t, e)
// point, so the kernel's range is of points. The pass marks it moe.interleaved_points = 4; the lowering then
// has a live point (row >= 0) save what its dot product and write need in slot %pending of small stack
// arrays; four saved points run their dot products in one loop along j, four vectors of 32 partial sums;
// the points left waiting at the end of the range run one at a time. A point that is not live writes its 0
// at once. Unmarked (--disable interleave-reductions: the pass does not run), a point at a time.
// RUN: moec-opt %s --moe-interleave-reductions | FileCheck %s --check-prefix=MARK
// RUN: moec-opt %s --moe-interleave-reductions --moe-lower-to-loops | FileCheck %s
// RUN: moec-opt %s --moe-lower-to-loops | FileCheck %s --check-prefix=OFF
// RUN: moec-opt %s --moe-interleave-reductions=points=2 --moe-lower-to-loops | FileCheck %s --check-prefix=TWO
// Rows shorter than a page (H = 512 f32) stay a point at a time.
// RUN: sed -e 's/1024/512/g' %s | moec-opt --moe-interleave-reductions | FileCheck %s --check-prefix=SHORT
// RUN: not moec-opt %s --moe-interleave-reductions=points=9 2>&1 | FileCheck %s --check-prefix=BADPOINTS

// MARK: moe.scatter %{{.*}} {moe.interleaved_points = 4 : i64, schedule =
// SHORT-NOT: moe.interleaved_points
// BADPOINTS: points must be 2 to 8, not 9
// TWO: memref.alloca() : memref<2xindex>
// TWO: arith.cmpi eq, %{{.*}}, %c2
// TWO: iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (vector<32xf32>, vector<32xf32>)
// TWO-NOT: -> (vector<32xf32>, vector<32xf32>, vector<32xf32>

// CHECK-LABEL: func.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad
// CHECK: %[[SLOT:.*]] = memref.alloca() : memref<4xindex>
// The range is of points: Tk * 4 of them.
// CHECK: %[[POINTS:.*]] = arith.muli %{{.*}}, %c4
// CHECK: %[[END:.*]] = arith.minsi %{{.*}}, %[[POINTS]]
// CHECK: %[[WAITING:.*]] = scf.for %{{.*}} = %{{.*}} to %[[END]] step %{{.*}} iter_args(%[[PENDING:.*]] = %{{.*}}) -> (index)
// CHECK: %[[LIVE:.*]] = scf.if %{{.*}} -> (index) {
// CHECK: memref.store %{{.*}}, %[[SLOT]][%[[PENDING]]] : memref<4xindex>
// CHECK: %[[NEXT:.*]] = arith.addi %[[PENDING]], %c1{{[_0-9]*}}
// CHECK: %[[FULL:.*]] = arith.cmpi eq, %[[NEXT]], %c4{{[_0-9]*}}
// CHECK: scf.if %[[FULL]] {
// CHECK: scf.for %{{.*}} = %{{[0-9a-z_]+}} to %{{[0-9a-z_]+}} step %c32{{[_0-9]*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>)
// CHECK-COUNT-4: vector.reduction <add>, %{{.*}} : vector<32xf32> into f32
// CHECK-COUNT-4: memref.store %{{.*}} : memref<?x4xf32>
// CHECK: arith.select %[[FULL]], %c0{{.*}}, %[[NEXT]]
// CHECK: } else {
// CHECK: memref.store %{{.*}} : memref<?x4xf32>
// CHECK: scf.yield %[[PENDING]]
// The points left waiting, one at a time.
// CHECK: scf.for %{{.*}} = %c0{{[_0-9]*}} to %[[WAITING]] step %c1{{[_0-9]*}}
// CHECK: scf.for %{{.*}} = %{{[0-9a-z_]+}} to %{{[0-9a-z_]+}} step %c32{{[_0-9]*}} iter_args(%{{.*}} = %{{.*}}) -> (vector<32xf32>)

// OFF-NOT: memref<4xindex>
// OFF: scf.for %{{.*}} = %{{[0-9a-z_]+}} to %{{[0-9a-z_]+}} step %c32{{[_0-9]*}} iter_args(%{{.*}} = %{{.*}}) -> (vector<32xf32>)
// OFF-NOT: -> (vector<32xf32>, vector<32xf32>

module attributes {moe.dtype = "f32", moe.op = "moe_token_unpermute_with_routing_map_grad"} {
  func.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad(%arg0: !llvm.ptr {moe.arg = #moe.arg<tensor, "unpermuted_tokens_grad">}, %arg1: !llvm.ptr {moe.arg = #moe.arg<tensor, "out_index">}, %arg2: !llvm.ptr {moe.arg = #moe.arg<tensor, "permute_token_id">}, %arg3: !llvm.ptr {moe.arg = #moe.arg<tensor, "routing_map">}, %arg4: !llvm.ptr {moe.arg = #moe.arg<tensor, "permuted_tokens">}, %arg5: !llvm.ptr {moe.arg = #moe.arg<tensor, "probs">}, %arg6: !llvm.ptr {moe.arg = #moe.arg<tensor, "permuted_tokens_grad">}, %arg7: !llvm.ptr {moe.arg = #moe.arg<tensor, "probs_grad">}, %arg8: index {moe.arg = #moe.arg<dim, "Tk">}, %arg9: index {moe.arg = #moe.arg<dim, "R">}) {
    %c-1 = arith.constant -1 : index
    %cst = arith.constant 0.000000e+00 : f32
    %c1 = arith.constant 1 : index
    %c0_i8 = arith.constant 0 : i8
    %c0 = arith.constant 0 : index
    %c1024 = arith.constant 1024 : index
    %c4 = arith.constant 4 : index
    %0 = moe.view %arg7[%arg8, %c4] : !llvm.ptr -> memref<?x4xf32>
    %1 = moe.view %arg3[%arg8, %c4] : !llvm.ptr -> memref<?x4xi8>
    %2 = moe.view %arg1[%arg9] : !llvm.ptr -> memref<?xi32>
    %3 = moe.view %arg4[%arg9, %c1024] : !llvm.ptr -> memref<?x1024xf32>
    %4 = moe.view %arg0[%arg8, %c1024] : !llvm.ptr -> memref<?x1024xf32>
    %5 = arith.divsi %arg9, %arg8 : index
    moe.scatter %0[%arg8, %c4] {schedule = #moe.schedule<rowsPerBlock = 16, threads = 1, vector = 1, unroll = 8>} : memref<?x4xf32> {
    ^bb0(%arg10: index, %arg11: index):
      %6 = moe.fold %arg11, %c0 : index {
      ^bb0(%arg12: index, %arg13: index):
        %14 = memref.load %1[%arg10, %arg12] : memref<?x4xi8>
        %15 = arith.cmpi ne, %14, %c0_i8 : i8
        %16 = arith.addi %arg13, %c1 : index
        %17 = arith.select %15, %16, %arg13 : index
        moe.yield %17 : index
      }
      %7 = memref.load %1[%arg10, %arg11] : memref<?x4xi8>
      %8 = arith.cmpi ne, %7, %c0_i8 : i8
      %9 = arith.cmpi slt, %6, %5 : index
      %10 = arith.andi %8, %9 : i1
      %11 = scf.if %10 -> (index) {
        %14 = arith.muli %arg10, %5 : index
        %15 = arith.addi %14, %6 : index
        %16 = memref.load %2[%15] : memref<?xi32>
        %17 = arith.index_cast %16 : i32 to index
        scf.yield %17 : index
      } else {
        scf.yield %c-1 : index
      }
      %12 = arith.cmpi sge, %11, %c0 : index
      %13 = scf.if %12 -> (f32) {
        %14 = moe.sum %c1024 : f32 {
        ^bb0(%arg12: index):
          %15 = memref.load %3[%11, %arg12] : memref<?x1024xf32>
          %16 = memref.load %4[%arg10, %arg12] : memref<?x1024xf32>
          %17 = arith.mulf %15, %16 : f32
          moe.yield %17 : f32
        }
        scf.yield %14 : f32
      } else {
        scf.yield %cst : f32
      }
      moe.write %13 to [%arg10, %arg11] : f32
    }
    return
  }}
