// moe-group-points on A3's probs_grad with probs (GPU, f32, E = 8, H = 64; the IR `moec emit --target ptx
// --emit moe --disable group-points` prints): the dot product of point (t, e) reads token t's gradient
// row %9[t, j], whatever e, so the kernel is marked a row of points. The GPU lowering runs a token per
// warp, an expert per lane: each lane runs its expert's ops (its slot count, its row; an unrouted expert
// writes its zero at once), a ballot says which experts are live, and a loop takes those in order, each
// one's values from its lane, into 8 slots; when 8 wait (or the row ends) their dot products run in one
// loop along j: the gradient vector loaded once, then each slot's terms under its `active` flag.
// A variant whose terms read only rows that depend on the point (@reads_only_the_point_rows) is not
// marked.
// The drop-and-pad probs_grad (@pad_slots_by_token, same shape) is one-dim, over slots i: slot i's dot
// product reads token permute_token_id[i]'s gradient row, so the token is its key (the slot's row, from
// out_index, is `moe.unique`: never a key). A warp takes a run of 8 slots (moved to start where a token's
// slots start), a lane each; a live slot whose token differs from the waiting slots' runs them first, and a
// batch loads its token's row once, under the token's bounds check.
// RUN: moec-opt %s --moe-group-points | FileCheck %s --check-prefix=MARK
// RUN: moec-opt %s --moe-group-points --moe-lower-to-gpu --canonicalize | FileCheck %s --check-prefix=GPU
// Batches of 4 (register-budget): the mark says so, and a batch waits for 4 points and runs 4 slots.
// RUN: moec-opt %s --moe-group-points=batch=4 | FileCheck %s --check-prefix=MARK4
// RUN: moec-opt %s --moe-group-points=batch=4 --moe-lower-to-gpu --canonicalize | FileCheck %s --check-prefix=GPU4
// RUN: not moec-opt %s --moe-group-points=batch=3 2>&1 | FileCheck %s --check-prefix=BAD

// MARK-LABEL: func.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad
// MARK: moe.scatter {{.*}} {moe.point_rows = 8 : i64, schedule = #moe.schedule<rowsPerBlock = 8, threads = 32
// MARK-LABEL: func.func @reads_only_the_point_rows
// MARK-NOT: moe.point_rows
// MARK: return
// MARK-LABEL: func.func @pad_slots_by_token
// MARK: moe.scatter {{.*}} {moe.point_rows = 8 : i64, schedule
// MARK: %[[TOKEN:.*]] = memref.load %4[%arg12] : memref<?xi32>
// MARK-NEXT: arith.index_cast %[[TOKEN]] {moe.group_key} : i32 to index
// MARK-NOT: moe.group_key
// MARK: moe.write

// MARK4-LABEL: func.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad
// MARK4: moe.scatter {{.*}} {moe.point_rows = 4 : i64, schedule
// GPU4-LABEL: gpu.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad
// GPU4: arith.cmpi eq, %{{.*}}, %c4 : index
// GPU4: scf.for %{{.*}} = %{{.*}} to %c64 step %c128 iter_args(
// GPU4-COUNT-4: scf.if %{{.*}} -> (vector<4xf32>) {
// GPU4-NOT: scf.if %{{.*}} -> (vector<4xf32>) {
// GPU4: scf.yield
// GPU4-LABEL: gpu.func @reads_only_the_point_rows
// BAD: moe-group-points: batch must be a power of two from 2 to 32, got 3

// A warp (thread.y) per token, a lane (thread.x) per expert; the live experts in order, their values from
// their lanes.
// GPU-LABEL: gpu.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad
// GPU: %[[TOKEN:.*]] = arith.addi %{{.*}}, %thread_id_y : index
// GPU: arith.cmpi ult, %thread_id_x, %c8 : index
// GPU: %[[LIVE:.*]] = nvvm.vote.sync  ballot %c-1_i32
// GPU: math.ctpop %[[LIVE]] : i32
// A token's 8 experts are one chunk of lanes: the waiting experts stay in their lanes, a mask of them
// carried by the steps (no slots), and a batch takes each one's values from its lane.
// GPU: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 iter_args(%{{.*}} = %[[LIVE]], %{{.*}} = %c0, %[[WAITING:.*]] = %c0_i32) -> (i32, index, i32) {
// GPU: math.cttz
// GPU-NOT: gpu.shuffle
// GPU: arith.cmpi eq, %{{.*}}, %c8 : index
// GPU: math.cttz
// GPU: gpu.shuffle  idx
// The batch's dot products: one loop along j, the gradient loaded once, each slot's terms under its flag.
// GPU: scf.for %{{.*}} = %{{.*}} to %c64 step %c128 iter_args(
// GPU: vector.load %{{.*}}[%[[TOKEN]], %{{.*}}] {{.*}} : memref<?x64xf32>, vector<4xf32>
// GPU-NOT: vector.load %{{.*}}[%[[TOKEN]]
// GPU-COUNT-8: scf.if %{{.*}} -> (vector<4xf32>) {
// GPU-NOT: vector.load %{{.*}}[%[[TOKEN]]
// GPU: scf.yield
// GPU-LABEL: gpu.func @reads_only_the_point_rows
// GPU-NOT: nvvm.vote.sync
// GPU: gpu.return
// A warp per run of 8 slots, a lane per slot; the batch runs before a live slot of another token. The run
// starts where a token's slots start: at the first slot of [8 w, 8 w + 8) whose token differs from the slot
// before's (else 8 w + 8), and it ends where the next warp's starts, found the same way in [8 w + 8, 8 w + 16).
// Lane l probes slot 8 w - 1 + l's token (lanes 0 to 16), the lane before's by a shuffle up; a ballot of the
// lanes at a start (bits 1-8: 510, bits 9-16: 130560).
// GPU-LABEL: gpu.func @pad_slots_by_token
// GPU: %[[RUNS:.*]] = arith.divui %{{.*}}, %c8 : index
// GPU: arith.cmpi ult, %{{.*}}, %[[RUNS]] : index
// GPU: %[[START:.*]] = arith.muli %{{.*}}, %c8 : index
// GPU: %[[LANE:.*]] = arith.addi %[[START]], %thread_id_x : index
// GPU: %[[PROBED:.*]] = arith.subi %[[LANE]], %c1 : index
// GPU: arith.cmpi ule, %thread_id_x, %c16 : index
// GPU: %[[TOKEN:.*]] = scf.if
// GPU-NEXT: memref.load %{{.*}}[%[[PROBED]]] : memref<?xi32>
// GPU: gpu.shuffle  up
// GPU: arith.cmpi ne, %[[TOKEN]], %{{.*}} : index
// GPU: %[[STARTS:.*]] = nvvm.vote.sync  ballot %c-1_i32
// GPU: arith.andi %[[STARTS]], %c510_i32 : i32
// GPU: %[[FIRST:.*]] = arith.minui %{{.*}}, %arg11 : index
// GPU: arith.andi %[[STARTS]], %c130560_i32 : i32
// GPU: %[[END:.*]] = arith.minui %{{.*}}, %arg11 : index
// GPU: %[[COUNT:.*]] = arith.subi %[[END]], %[[FIRST]] : index
// GPU: scf.for
// GPU: %[[AT:.*]] = arith.addi %{{.*}}, %thread_id_x : index
// GPU: arith.cmpi ult, %[[AT]], %[[COUNT]] : index
// GPU: arith.addi %[[FIRST]], %[[AT]] : index
// GPU: nvvm.vote.sync  ballot
// GPU: arith.cmpi ne, %{{.*}}, %{{.*}} : index
// GPU: arith.cmpi eq, %{{.*}}, %c8 : index
// The token's row once per vector, under its check, then each slot's terms under its flag.
// GPU: scf.for %{{.*}} = %{{.*}} to %c64 step %c128 iter_args(
// GPU: scf.if %{{.*}} -> (vector<4xf32>) {
// GPU-NEXT: vector.load %[[GRAD:[0-9]+]][
// GPU-NOT: vector.load %[[GRAD]][
// GPU-COUNT-8: vector.load %{{[0-9]+}}[
// GPU-NOT: vector.load %[[GRAD]][
// GPU: gpu.return

module attributes {moe.dtype = "f32", moe.op = "moe_token_unpermute_with_routing_map_grad", moe.workspace = ["permuted_tokens_grad"]} {
  func.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "unpermuted_tokens_grad">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "out_index">, moe.unique}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permute_token_id">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "routing_map">}, %arg4: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permuted_tokens">}, %arg5: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "probs">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "permuted_tokens_grad">}, %arg7: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "probs_grad">}, %arg8: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg9: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<workspace>}, %arg10: index {moe.arg = #moe.arg<dim, "Tk">}, %arg11: index {moe.arg = #moe.arg<dim, "R">}) {
    %c0 = arith.constant 0 : index
    %0 = arith.index_cast %c0 : index to i64
    %1 = llvm.getelementptr %arg9[%0] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %2 = moe.view %1[%arg11] : !llvm.ptr -> memref<?xi8>
    %cst = arith.constant 0.000000e+00 : f32
    %c7 = arith.constant 7 : index
    %c6 = arith.constant 6 : index
    %c5 = arith.constant 5 : index
    %c4 = arith.constant 4 : index
    %true = arith.constant true
    %c0_i32 = arith.constant 0 : i32
    %c3 = arith.constant 3 : index
    %c2 = arith.constant 2 : index
    %c0_i8 = arith.constant 0 : i8
    %c1 = arith.constant 1 : index
    %c1_i64 = arith.constant 1 : i64
    %c-9223372036854775808 = arith.constant -9223372036854775808 : index
    %c-1 = arith.constant -1 : index
    %c64 = arith.constant 64 : index
    %c8 = arith.constant 8 : index
    %c0_0 = arith.constant 0 : index
    %3 = moe.view %arg8[%c8] : !llvm.ptr -> memref<8xi64>
    %4 = moe.view %arg7[%arg10, %c8] : !llvm.ptr -> memref<?x8xf32>
    %5 = moe.view %arg3[%arg10, %c8] : !llvm.ptr -> memref<?x8xi8>
    %6 = moe.view %arg1[%arg11] : !llvm.ptr -> memref<?xi32>
    %7 = moe.view %arg6[%arg11, %c64] : !llvm.ptr -> memref<?x64xf32>
    %8 = moe.view %arg4[%arg11, %c64] : !llvm.ptr -> memref<?x64xf32>
    %9 = moe.view %arg0[%arg10, %c64] : !llvm.ptr -> memref<?x64xf32>
    %10 = moe.view %arg5[%arg10, %c8] : !llvm.ptr -> memref<?x8xf32>
    %11 = arith.cmpi eq, %arg10, %c0_0 : index
    %12 = arith.cmpi eq, %arg10, %c-1 : index
    %13 = arith.cmpi eq, %arg11, %c-9223372036854775808 : index
    %14 = arith.andi %12, %13 : i1
    %15 = arith.ori %11, %14 : i1
    scf.if %15 {
      memref.store %c1_i64, %3[%c0_0] : memref<8xi64>
      %18 = arith.index_cast %arg11 : index to i64
      memref.store %18, %3[%c1] : memref<8xi64>
    }
    %16 = arith.select %15, %c1, %arg10 : index
    %17 = arith.divsi %arg11, %16 : index
    moe.scatter %4[%arg10, %c8] {schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 8>} : memref<?x8xf32> {
    ^bb0(%arg12: index, %arg13: index):
      %18 = moe.fold %arg13, %c0_0 : index {
      ^bb0(%arg14: index, %arg15: index):
        %35 = memref.load %5[%arg12, %arg14] : memref<?x8xi8>
        %36 = arith.cmpi ne, %35, %c0_i8 : i8
        %37 = arith.addi %arg15, %c1 : index
        %38 = arith.select %36, %37, %arg15 : index
        moe.yield %38 : index
      }
      %19 = memref.load %5[%arg12, %arg13] : memref<?x8xi8>
      %20 = arith.cmpi ne, %19, %c0_i8 : i8
      %21 = arith.cmpi slt, %18, %17 : index
      %22 = arith.andi %20, %21 : i1
      %23 = scf.if %22 -> (index) {
        %35 = arith.muli %arg12, %17 : index
        %36 = arith.addi %35, %18 : index
        %37 = arith.cmpi sge, %36, %c0_0 : index
        %38 = arith.cmpi slt, %36, %arg11 : index
        %39 = arith.andi %37, %38 : i1
        %40 = scf.if %39 -> (i32) {
          %42 = memref.load %6[%36] : memref<?xi32>
          scf.yield %42 : i32
        } else {
          %42 = arith.cmpi slt, %36, %c0_0 : index
          %43 = arith.cmpi sge, %36, %arg11 : index
          %44 = arith.ori %42, %43 : i1
          %45 = arith.select %44, %c1, %c0_0 : index
          %46 = arith.select %44, %36, %c0_0 : index
          %47 = arith.index_cast %45 : index to i64
          memref.store %47, %3[%c2] : memref<8xi64>
          %48 = arith.index_cast %46 : index to i64
          memref.store %48, %3[%c3] : memref<8xi64>
          scf.yield %c0_i32 : i32
        }
        %41 = arith.index_cast %40 : i32 to index
        scf.yield %41 : index
      } else {
        scf.yield %c-1 : index
      }
      %24 = arith.cmpi sge, %23, %c0_0 : index
      %25 = arith.cmpi sge, %23, %c0_0 : index
      %26 = arith.cmpi slt, %23, %arg11 : index
      %27 = arith.andi %25, %26 : i1
      %28 = arith.xori %27, %true : i1
      %29 = arith.andi %24, %28 : i1
      scf.if %29 {
        %35 = arith.cmpi slt, %23, %c0_0 : index
        %36 = arith.cmpi sge, %23, %arg11 : index
        %37 = arith.ori %35, %36 : i1
        %38 = arith.select %37, %c1, %c0_0 : index
        %39 = arith.select %37, %23, %c0_0 : index
        %40 = arith.index_cast %38 : index to i64
        memref.store %40, %3[%c4] : memref<8xi64>
        %41 = arith.index_cast %39 : index to i64
        memref.store %41, %3[%c5] : memref<8xi64>
      }
      %30 = arith.andi %24, %27 : i1
      %31 = arith.cmpi sge, %23, %c0_0 : index
      %32 = arith.cmpi ult, %23, %arg11 : index
      %33 = arith.andi %30, %32 : i1
      scf.if %33 {
        %c1_i8 = arith.constant 1 : i8
        memref.store %c1_i8, %2[%23] : memref<?xi8>
      }
      %34 = scf.if %31 -> (f32) {
        %35 = moe.sum %c64 : f32 {
        ^bb0(%arg14: index):
          %36 = arith.cmpi sge, %23, %c0_0 : index
          %37 = arith.cmpi slt, %23, %arg11 : index
          %38 = arith.andi %36, %37 : i1
          %39 = scf.if %38 -> (f32) {
            %44 = memref.load %8[%23, %arg14] : memref<?x64xf32>
            scf.yield %44 : f32
          } else {
            %44 = arith.cmpi slt, %23, %c0_0 : index
            %45 = arith.cmpi sge, %23, %arg11 : index
            %46 = arith.ori %44, %45 : i1
            %47 = arith.select %46, %c1, %c0_0 : index
            %48 = arith.select %46, %23, %c0_0 : index
            %49 = arith.index_cast %47 : index to i64
            memref.store %49, %3[%c6] : memref<8xi64>
            %50 = arith.index_cast %48 : index to i64
            memref.store %50, %3[%c7] : memref<8xi64>
            scf.yield %cst : f32
          }
          %40 = memref.load %9[%arg12, %arg14] : memref<?x64xf32>
          %41 = arith.mulf %39, %40 : f32
          %42 = memref.load %10[%arg12, %arg13] : memref<?x8xf32>
          %43 = arith.mulf %40, %42 : f32
          moe.row_store %43 to %7[%23, %arg14] if %30 : f32, memref<?x64xf32>
          moe.yield %41 : f32
        }
        scf.yield %35 : f32
      } else {
        scf.yield %cst : f32
      }
      moe.write %34 to [%arg12, %arg13] : f32
    }
    return
  }
  func.func @reads_only_the_point_rows(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "unpermuted_tokens_grad">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "out_index">, moe.unique}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permute_token_id">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "routing_map">}, %arg4: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permuted_tokens">}, %arg5: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "probs">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "permuted_tokens_grad">}, %arg7: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "probs_grad">}, %arg8: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg9: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<workspace>}, %arg10: index {moe.arg = #moe.arg<dim, "Tk">}, %arg11: index {moe.arg = #moe.arg<dim, "R">}) {
    %c0 = arith.constant 0 : index
    %0 = arith.index_cast %c0 : index to i64
    %1 = llvm.getelementptr %arg9[%0] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %2 = moe.view %1[%arg11] : !llvm.ptr -> memref<?xi8>
    %cst = arith.constant 0.000000e+00 : f32
    %c7 = arith.constant 7 : index
    %c6 = arith.constant 6 : index
    %c5 = arith.constant 5 : index
    %c4 = arith.constant 4 : index
    %true = arith.constant true
    %c0_i32 = arith.constant 0 : i32
    %c3 = arith.constant 3 : index
    %c2 = arith.constant 2 : index
    %c0_i8 = arith.constant 0 : i8
    %c1 = arith.constant 1 : index
    %c1_i64 = arith.constant 1 : i64
    %c-9223372036854775808 = arith.constant -9223372036854775808 : index
    %c-1 = arith.constant -1 : index
    %c64 = arith.constant 64 : index
    %c8 = arith.constant 8 : index
    %c0_0 = arith.constant 0 : index
    %3 = moe.view %arg8[%c8] : !llvm.ptr -> memref<8xi64>
    %4 = moe.view %arg7[%arg10, %c8] : !llvm.ptr -> memref<?x8xf32>
    %5 = moe.view %arg3[%arg10, %c8] : !llvm.ptr -> memref<?x8xi8>
    %6 = moe.view %arg1[%arg11] : !llvm.ptr -> memref<?xi32>
    %7 = moe.view %arg6[%arg11, %c64] : !llvm.ptr -> memref<?x64xf32>
    %8 = moe.view %arg4[%arg11, %c64] : !llvm.ptr -> memref<?x64xf32>
    %9 = moe.view %arg0[%arg10, %c64] : !llvm.ptr -> memref<?x64xf32>
    %10 = moe.view %arg5[%arg10, %c8] : !llvm.ptr -> memref<?x8xf32>
    %11 = arith.cmpi eq, %arg10, %c0_0 : index
    %12 = arith.cmpi eq, %arg10, %c-1 : index
    %13 = arith.cmpi eq, %arg11, %c-9223372036854775808 : index
    %14 = arith.andi %12, %13 : i1
    %15 = arith.ori %11, %14 : i1
    scf.if %15 {
      memref.store %c1_i64, %3[%c0_0] : memref<8xi64>
      %18 = arith.index_cast %arg11 : index to i64
      memref.store %18, %3[%c1] : memref<8xi64>
    }
    %16 = arith.select %15, %c1, %arg10 : index
    %17 = arith.divsi %arg11, %16 : index
    moe.scatter %4[%arg10, %c8] {schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 8>} : memref<?x8xf32> {
    ^bb0(%arg12: index, %arg13: index):
      %18 = moe.fold %arg13, %c0_0 : index {
      ^bb0(%arg14: index, %arg15: index):
        %35 = memref.load %5[%arg12, %arg14] : memref<?x8xi8>
        %36 = arith.cmpi ne, %35, %c0_i8 : i8
        %37 = arith.addi %arg15, %c1 : index
        %38 = arith.select %36, %37, %arg15 : index
        moe.yield %38 : index
      }
      %19 = memref.load %5[%arg12, %arg13] : memref<?x8xi8>
      %20 = arith.cmpi ne, %19, %c0_i8 : i8
      %21 = arith.cmpi slt, %18, %17 : index
      %22 = arith.andi %20, %21 : i1
      %23 = scf.if %22 -> (index) {
        %35 = arith.muli %arg12, %17 : index
        %36 = arith.addi %35, %18 : index
        %37 = arith.cmpi sge, %36, %c0_0 : index
        %38 = arith.cmpi slt, %36, %arg11 : index
        %39 = arith.andi %37, %38 : i1
        %40 = scf.if %39 -> (i32) {
          %42 = memref.load %6[%36] : memref<?xi32>
          scf.yield %42 : i32
        } else {
          %42 = arith.cmpi slt, %36, %c0_0 : index
          %43 = arith.cmpi sge, %36, %arg11 : index
          %44 = arith.ori %42, %43 : i1
          %45 = arith.select %44, %c1, %c0_0 : index
          %46 = arith.select %44, %36, %c0_0 : index
          %47 = arith.index_cast %45 : index to i64
          memref.store %47, %3[%c2] : memref<8xi64>
          %48 = arith.index_cast %46 : index to i64
          memref.store %48, %3[%c3] : memref<8xi64>
          scf.yield %c0_i32 : i32
        }
        %41 = arith.index_cast %40 : i32 to index
        scf.yield %41 : index
      } else {
        scf.yield %c-1 : index
      }
      %24 = arith.cmpi sge, %23, %c0_0 : index
      %25 = arith.cmpi sge, %23, %c0_0 : index
      %26 = arith.cmpi slt, %23, %arg11 : index
      %27 = arith.andi %25, %26 : i1
      %28 = arith.xori %27, %true : i1
      %29 = arith.andi %24, %28 : i1
      scf.if %29 {
        %35 = arith.cmpi slt, %23, %c0_0 : index
        %36 = arith.cmpi sge, %23, %arg11 : index
        %37 = arith.ori %35, %36 : i1
        %38 = arith.select %37, %c1, %c0_0 : index
        %39 = arith.select %37, %23, %c0_0 : index
        %40 = arith.index_cast %38 : index to i64
        memref.store %40, %3[%c4] : memref<8xi64>
        %41 = arith.index_cast %39 : index to i64
        memref.store %41, %3[%c5] : memref<8xi64>
      }
      %30 = arith.andi %24, %27 : i1
      %31 = arith.cmpi sge, %23, %c0_0 : index
      %32 = arith.cmpi ult, %23, %arg11 : index
      %33 = arith.andi %30, %32 : i1
      scf.if %33 {
        %c1_i8 = arith.constant 1 : i8
        memref.store %c1_i8, %2[%23] : memref<?xi8>
      }
      %34 = scf.if %31 -> (f32) {
        %35 = moe.sum %c64 : f32 {
        ^bb0(%arg14: index):
          %36 = arith.cmpi sge, %23, %c0_0 : index
          %37 = arith.cmpi slt, %23, %arg11 : index
          %38 = arith.andi %36, %37 : i1
          %39 = scf.if %38 -> (f32) {
            %44 = memref.load %8[%23, %arg14] : memref<?x64xf32>
            scf.yield %44 : f32
          } else {
            %44 = arith.cmpi slt, %23, %c0_0 : index
            %45 = arith.cmpi sge, %23, %arg11 : index
            %46 = arith.ori %44, %45 : i1
            %47 = arith.select %46, %c1, %c0_0 : index
            %48 = arith.select %46, %23, %c0_0 : index
            %49 = arith.index_cast %47 : index to i64
            memref.store %49, %3[%c6] : memref<8xi64>
            %50 = arith.index_cast %48 : index to i64
            memref.store %50, %3[%c7] : memref<8xi64>
            scf.yield %cst : f32
          }
          %40 = memref.load %8[%23, %arg14] : memref<?x64xf32>
          %41 = arith.mulf %39, %40 : f32
          %42 = memref.load %10[%arg12, %arg13] : memref<?x8xf32>
          %43 = arith.mulf %40, %42 : f32
          moe.row_store %43 to %7[%23, %arg14] if %30 : f32, memref<?x64xf32>
          moe.yield %41 : f32
        }
        scf.yield %35 : f32
      } else {
        scf.yield %cst : f32
      }
      moe.write %34 to [%arg12, %arg13] : f32
    }
    return
  }
  func.func @pad_slots_by_token(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "unpermuted_tokens_grad">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "out_index">, moe.unique}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permute_token_id">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "routing_map">}, %arg4: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permuted_tokens">}, %arg5: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "probs">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "permuted_tokens_grad">}, %arg7: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "probs_grad">}, %arg8: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg9: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<workspace>}, %arg10: index {moe.arg = #moe.arg<dim, "Tk">}, %arg11: index {moe.arg = #moe.arg<dim, "R">}) {
    %c0 = arith.constant 0 : index
    %0 = arith.index_cast %c0 : index to i64
    %1 = llvm.getelementptr %arg9[%0] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %2 = moe.view %1[%arg11] : !llvm.ptr -> memref<?xi8>
    %c13 = arith.constant 13 : index
    %c12 = arith.constant 12 : index
    %c11 = arith.constant 11 : index
    %c10 = arith.constant 10 : index
    %c9 = arith.constant 9 : index
    %cst = arith.constant 0.000000e+00 : f32
    %c7 = arith.constant 7 : index
    %c6 = arith.constant 6 : index
    %c5 = arith.constant 5 : index
    %c4 = arith.constant 4 : index
    %true = arith.constant true
    %c3 = arith.constant 3 : index
    %c2 = arith.constant 2 : index
    %c1 = arith.constant 1 : index
    %c1_i64 = arith.constant 1 : i64
    %c-9223372036854775808 = arith.constant -9223372036854775808 : index
    %c-1 = arith.constant -1 : index
    %c14 = arith.constant 14 : index
    %c64 = arith.constant 64 : index
    %c0_0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %3 = moe.view %arg7[%arg10, %c8] : !llvm.ptr -> memref<?x8xf32>
    %4 = moe.view %arg2[%arg11] : !llvm.ptr -> memref<?xi32>
    %5 = moe.view %arg1[%arg11] : !llvm.ptr -> memref<?xi32>
    %6 = moe.view %arg8[%c14] : !llvm.ptr -> memref<14xi64>
    %7 = moe.view %arg6[%arg11, %c64] : !llvm.ptr -> memref<?x64xf32>
    %8 = moe.view %arg4[%arg11, %c64] : !llvm.ptr -> memref<?x64xf32>
    %9 = moe.view %arg0[%arg10, %c64] : !llvm.ptr -> memref<?x64xf32>
    %10 = moe.view %arg5[%arg10, %c8] : !llvm.ptr -> memref<?x8xf32>
    moe.scatter %3[%arg11] {schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 8>} : memref<?x8xf32> {
    ^bb0(%arg12: index):
      %11 = memref.load %4[%arg12] : memref<?xi32>
      %12 = arith.index_cast %11 : i32 to index
      %13 = memref.load %5[%arg12] : memref<?xi32>
      %14 = arith.index_cast %13 : i32 to index
      %15 = arith.divsi %arg11, %c8 {moe.row_invariant} : index
      %16 = arith.cmpi eq, %15, %c0_0 {moe.row_invariant} : index
      %17 = arith.cmpi eq, %15, %c-1 {moe.row_invariant} : index
      %18 = arith.cmpi eq, %14, %c-9223372036854775808 : index
      %19 = arith.andi %17, %18 : i1
      %20 = arith.ori %16, %19 : i1
      scf.if %20 {
        memref.store %c1_i64, %6[%c2] : memref<14xi64>
        %46 = arith.index_cast %14 : index to i64
        memref.store %46, %6[%c3] : memref<14xi64>
      }
      %21 = arith.select %20, %c1, %15 : index
      %22 = arith.divsi %14, %21 : index
      %23 = arith.cmpi sge, %14, %c0_0 : index
      %24 = arith.cmpi sge, %14, %c0_0 : index
      %25 = arith.cmpi slt, %14, %arg11 : index
      %26 = arith.andi %24, %25 : i1
      %27 = arith.xori %26, %true : i1
      %28 = arith.andi %23, %27 : i1
      scf.if %28 {
        %46 = arith.cmpi slt, %14, %c0_0 : index
        %47 = arith.cmpi sge, %14, %arg11 : index
        %48 = arith.ori %46, %47 : i1
        %49 = arith.select %48, %c1, %c0_0 : index
        %50 = arith.select %48, %14, %c0_0 : index
        %51 = arith.index_cast %49 : index to i64
        memref.store %51, %6[%c4] : memref<14xi64>
        %52 = arith.index_cast %50 : index to i64
        memref.store %52, %6[%c5] : memref<14xi64>
      }
      %29 = arith.andi %23, %26 : i1
      %30 = arith.cmpi sge, %14, %c0_0 : index
      %31 = arith.select %30, %12, %c0_0 : index
      %32 = arith.select %30, %22, %c0_0 : index
      %33 = arith.cmpi ult, %14, %arg11 : index
      %34 = arith.andi %29, %33 : i1
      scf.if %34 {
        %c1_i8 = arith.constant 1 : i8
        memref.store %c1_i8, %2[%14] : memref<?xi8>
      }
      %35 = scf.if %30 -> (f32) {
        %46 = moe.sum %c64 : f32 {
        ^bb0(%arg13: index):
          %47 = arith.cmpi sge, %14, %c0_0 : index
          %48 = arith.cmpi slt, %14, %arg11 : index
          %49 = arith.andi %47, %48 : i1
          %50 = scf.if %49 -> (f32) {
            %65 = memref.load %8[%14, %arg13] : memref<?x64xf32>
            scf.yield %65 : f32
          } else {
            %65 = arith.cmpi slt, %14, %c0_0 : index
            %66 = arith.cmpi sge, %14, %arg11 : index
            %67 = arith.ori %65, %66 : i1
            %68 = arith.select %67, %c1, %c0_0 : index
            %69 = arith.select %67, %14, %c0_0 : index
            %70 = arith.index_cast %68 : index to i64
            memref.store %70, %6[%c6] : memref<14xi64>
            %71 = arith.index_cast %69 : index to i64
            memref.store %71, %6[%c7] : memref<14xi64>
            scf.yield %cst : f32
          }
          %51 = arith.cmpi sge, %12, %c0_0 : index
          %52 = arith.cmpi slt, %12, %arg10 : index
          %53 = arith.andi %51, %52 : i1
          %54 = scf.if %53 -> (f32) {
            %65 = memref.load %9[%12, %arg13] : memref<?x64xf32>
            scf.yield %65 : f32
          } else {
            %65 = arith.cmpi slt, %12, %c0_0 : index
            %66 = arith.cmpi sge, %12, %arg10 : index
            %67 = arith.ori %65, %66 : i1
            %68 = arith.select %67, %c1, %c0_0 : index
            %69 = arith.select %67, %12, %c0_0 : index
            %70 = arith.index_cast %68 : index to i64
            memref.store %70, %6[%c8] : memref<14xi64>
            %71 = arith.index_cast %69 : index to i64
            memref.store %71, %6[%c9] : memref<14xi64>
            scf.yield %cst : f32
          }
          %55 = arith.mulf %50, %54 : f32
          %56 = arith.cmpi sge, %12, %c0_0 : index
          %57 = arith.cmpi slt, %12, %arg10 : index
          %58 = arith.andi %56, %57 : i1
          %59 = arith.cmpi sge, %22, %c0_0 : index
          %60 = arith.cmpi slt, %22, %c8 : index
          %61 = arith.andi %59, %60 : i1
          %62 = arith.andi %58, %61 : i1
          %63 = scf.if %62 -> (f32) {
            %65 = memref.load %10[%12, %22] : memref<?x8xf32>
            scf.yield %65 : f32
          } else {
            %65 = arith.cmpi slt, %22, %c0_0 : index
            %66 = arith.cmpi sge, %22, %c8 : index
            %67 = arith.ori %65, %66 : i1
            %68 = arith.select %67, %c2, %c0_0 : index
            %69 = arith.select %67, %22, %c0_0 : index
            %70 = arith.cmpi slt, %12, %c0_0 : index
            %71 = arith.cmpi sge, %12, %arg10 : index
            %72 = arith.ori %70, %71 : i1
            %73 = arith.select %72, %c1, %68 : index
            %74 = arith.select %72, %12, %69 : index
            %75 = arith.index_cast %73 : index to i64
            memref.store %75, %6[%c10] : memref<14xi64>
            %76 = arith.index_cast %74 : index to i64
            memref.store %76, %6[%c11] : memref<14xi64>
            scf.yield %cst : f32
          }
          %64 = arith.mulf %54, %63 : f32
          moe.row_store %64 to %7[%14, %arg13] if %29 : f32, memref<?x64xf32>
          moe.yield %55 : f32
        }
        scf.yield %46 : f32
      } else {
        scf.yield %cst : f32
      }
      %36 = arith.cmpi sge, %31, %c0_0 : index
      %37 = arith.cmpi slt, %31, %arg10 : index
      %38 = arith.andi %36, %37 : i1
      %39 = arith.cmpi sge, %32, %c0_0 : index
      %40 = arith.cmpi slt, %32, %c8 : index
      %41 = arith.andi %39, %40 : i1
      %42 = arith.andi %38, %41 : i1
      %43 = arith.xori %42, %true : i1
      %44 = arith.andi %30, %43 : i1
      scf.if %44 {
        %46 = arith.cmpi slt, %32, %c0_0 : index
        %47 = arith.cmpi sge, %32, %c8 : index
        %48 = arith.ori %46, %47 : i1
        %49 = arith.select %48, %c2, %c0_0 : index
        %50 = arith.select %48, %32, %c0_0 : index
        %51 = arith.cmpi slt, %31, %c0_0 : index
        %52 = arith.cmpi sge, %31, %arg10 : index
        %53 = arith.ori %51, %52 : i1
        %54 = arith.select %53, %c1, %49 : index
        %55 = arith.select %53, %31, %50 : index
        %56 = arith.index_cast %54 : index to i64
        memref.store %56, %6[%c12] : memref<14xi64>
        %57 = arith.index_cast %55 : index to i64
        memref.store %57, %6[%c13] : memref<14xi64>
      }
      %45 = arith.andi %30, %42 : i1
      moe.write %35 to [%31, %32] if %45 : f32
    }
    return
  }
}
