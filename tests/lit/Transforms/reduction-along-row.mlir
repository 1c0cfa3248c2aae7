// The lowerings of a moe.scatter whose body folds a prefix count and reduces along its own index (a dot
// product over H): the A3 probs gradient, specialized to E = 4, H = 16, f32.
// RUN: moec-opt %s --moe-schedule=target=cpu --moe-lower-to-loops | FileCheck %s --check-prefix=CPU
// RUN: not moec-opt %s --moe-lower-to-loops 2>&1 | FileCheck %s --check-prefix=UNSCHEDULED
// RUN: moec-opt %s --moe-schedule=target=gpu --moe-lower-to-gpu | FileCheck %s --check-prefix=GPU
// RUN: moec-opt %s --moe-schedule=target=gpu | FileCheck %s --check-prefix=SCHED
// RUN: moec-opt %s --moe-schedule="target=gpu vector=1 unroll=2 rows-per-block=4" | FileCheck %s --check-prefix=FORCED

// UNSCHEDULED: error: 'moe.scatter' op has no schedule; run moe-schedule first

// On the host, a range of (t, e) points (a point kernel); the fold becomes a loop over j < e; the dot product keeps 32 f32 partial sums
// (four independent chains of AVX2 additions), here 16 as H = 16 is shorter, adds them horizontally, then
// runs the scalar remainder; the write is a plain store.
// CPU-LABEL: func.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad
// CPU: scf.for {{.*}} to %{{[0-9a-z_]+}} step
// CPU: vector.load {{.*}} : memref<?x16xf32>, vector<16xf32>
// CPU: vector.load {{.*}} : memref<?x16xf32>, vector<16xf32>
// CPU: vector.reduction <add>, {{.*}} : vector<16xf32> into f32
// CPU: memref.store {{.*}} : memref<?x4xf32>
// CPU-NOT: moe.

// On the device, a warp per (t, e) point; lanes split the dot product, combine it with a shuffle tree, and lane 0
// stores.
// SCHED: moe.scatter {{.*}} {schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 8>}
// The vector width and unroll place each element in a partial sum, which fixes the order of the additions:
// a requested schedule changes only the points per block, so every schedule gives the same bits.
// FORCED: moe.scatter {{.*}} {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 4, unroll = 8>}
// GPU-LABEL: gpu.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad
// GPU-SAME: known_block_size = array<i32: 32, 8, 1>
// A warp per (t, e) point: the guard bounds the point index by Tk * E points, not by the Tk rows.
// GPU: %[[ROWS:.*]] = arith.muli %{{.*}}, %arg8 : index
// GPU-NEXT: %[[POINTS:.*]] = arith.muli %[[ROWS]], %c4 : index
// GPU-NEXT: %{{.*}} = arith.cmpi ult, %{{.*}}, %[[POINTS]] : index
// GPU: %[[LEADER:.*]] = arith.cmpi eq, %thread_id_x
// GPU: vector.load {{.*}} {alignment = 16 : i64} : memref<?x16xf32>, vector<4xf32>
// GPU: vector.reduction <add>
// GPU: gpu.shuffle  xor {{.*}}, %c16_i32
// GPU: gpu.shuffle  xor {{.*}}, %c8_i32
// GPU: gpu.shuffle  xor {{.*}}, %c4_i32
// GPU: gpu.shuffle  xor {{.*}}, %c2_i32
// GPU: gpu.shuffle  xor {{.*}}, %c1_i32
// GPU: scf.if %[[LEADER]]
// GPU-NEXT: memref.store

module attributes {moe.dtype = "f32", moe.op = "moe_token_unpermute_with_routing_map_grad"} {
  func.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad(%arg0: !llvm.ptr {moe.arg = #moe.arg<tensor, "unpermuted_tokens_grad">}, %arg1: !llvm.ptr {moe.arg = #moe.arg<tensor, "out_index">}, %arg2: !llvm.ptr {moe.arg = #moe.arg<tensor, "permute_token_id">}, %arg3: !llvm.ptr {moe.arg = #moe.arg<tensor, "routing_map">}, %arg4: !llvm.ptr {moe.arg = #moe.arg<tensor, "permuted_tokens">}, %arg5: !llvm.ptr {moe.arg = #moe.arg<tensor, "probs">}, %arg6: !llvm.ptr {moe.arg = #moe.arg<tensor, "permuted_tokens_grad">}, %arg7: !llvm.ptr {moe.arg = #moe.arg<tensor, "probs_grad">}, %arg8: index {moe.arg = #moe.arg<dim, "Tk">}, %arg9: index {moe.arg = #moe.arg<dim, "R">}) {
    %c-1 = arith.constant -1 : index
    %cst = arith.constant 0.000000e+00 : f32
    %c1 = arith.constant 1 : index
    %c0_i8 = arith.constant 0 : i8
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c4 = arith.constant 4 : index
    %0 = moe.view %arg7[%arg8, %c4] : !llvm.ptr -> memref<?x4xf32>
    %1 = moe.view %arg3[%arg8, %c4] : !llvm.ptr -> memref<?x4xi8>
    %2 = moe.view %arg1[%arg9] : !llvm.ptr -> memref<?xi32>
    %3 = moe.view %arg4[%arg9, %c16] : !llvm.ptr -> memref<?x16xf32>
    %4 = moe.view %arg0[%arg8, %c16] : !llvm.ptr -> memref<?x16xf32>
    %5 = arith.divsi %arg9, %arg8 : index
    moe.scatter %0[%arg8, %c4] : memref<?x4xf32> {
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
        %14 = moe.sum %c16 : f32 {
        ^bb0(%arg12: index):
          %15 = memref.load %3[%11, %arg12] : memref<?x16xf32>
          %16 = memref.load %4[%arg10, %arg12] : memref<?x16xf32>
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
