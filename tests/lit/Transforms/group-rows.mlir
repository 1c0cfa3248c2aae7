// moe-group-rows on the A3 non-pad data gradient (GPU, f32, E = 4, H = 64; the IR `moec emit --target ptx
// --emit moe --disable group-rows` prints): the value written to slot (t, k)'s row is token t's gradient
// row, whatever k, so the scatter is marked a row group, and the load MoeGen computed under the row's
// guard (`scf.if %live`) becomes unconditional (its indices are the domain's t and h). The GPU lowering then
// runs a block per token (and run of up to 16 slots), its warps splitting the row: lane i computes slot i's
// row and guard, and along the row the warp loads the gradient once per vector and stores it to each live
// slot's row, shuffled from the slot's lane.
// A variant that reads the gradient at [k, h] depends on the slot: not grouped, and its guarded load stays.
// The drop-and-pad data gradient (@pad_slots_by_token, same shape) copies the gradient row of token
// permute_token_id[i] to slot i's row: the value depends on the slot through that token and the row's
// `row >= 0`, its keys. A block per run of 16 slots (moved to start where the keys change); along the row the
// warp loads the row again only for a slot whose keys differ from the slot before's.
// RUN: moec-opt %s --moe-group-rows | FileCheck %s --check-prefix=MARK
// RUN: moec-opt %s --moe-group-rows --moe-lower-to-gpu --canonicalize | FileCheck %s --check-prefix=GPU
// RUN: moec-opt %s --moe-lower-to-gpu --canonicalize | FileCheck %s --check-prefix=ROWS

// MARK-LABEL: func.func @moe_token_unpermute_with_routing_map_grad__6_permuted_tokens_grad
// MARK: moe.scatter {{.*}} {moe.row_group, schedule = #moe.schedule<rowsPerBlock = 1, threads = 32
// MARK-NOT: scf.if {{.*}} -> (f32)
// MARK: %[[V:.*]] = memref.load %{{.*}}[%arg12, %arg14] : memref<?x64xf32>
// MARK-NOT: scf.if {{.*}} -> (f32)
// MARK: moe.write %[[V]] to [{{.*}}, %arg14] if {{.*}} {moe.row_guard} : f32
// MARK-LABEL: func.func @reads_along_the_slot
// MARK-NOT: moe.row_group
// MARK: scf.if {{.*}} -> (f32) {
// MARK-NEXT: memref.load %{{.*}}[%arg13, %arg14]
// MARK-LABEL: func.func @pad_slots_by_token
// MARK: moe.scatter {{.*}} {moe.row_group, schedule = #moe.schedule<rowsPerBlock = 1, threads = 32
// MARK: arith.index_cast %{{.*}} {moe.group_key, moe.row_invariant} : i32 to index
// MARK: arith.cmpi sge, %{{.*}}, %{{.*}} {moe.group_key, moe.row_invariant} : index
// MARK-NOT: moe.group_key
// MARK: moe.write

// A block per token and run of 16 slots: lane i computes slot i's row, then along the row one vector load
// of the gradient and, for each slot of the run, its guard and row (two halves) from its lane, and a vector
// store. H = 64 is one pass of 32 lanes x 4 elements: one warp a block, and no loop over batches of slots.
// GPU-LABEL: gpu.func @moe_token_unpermute_with_routing_map_grad__6_permuted_tokens_grad
// GPU-SAME: known_block_size = array<i32: 32, 1, 1>
// GPU: arith.cmpi ult, %block_id_x
// GPU: %[[RUNS:.*]] = arith.divui %{{.*}}, %c16 : index
// GPU: %[[TOKEN:.*]] = arith.divui %block_id_x, %[[RUNS]] : index
// GPU: %[[GROUP:.*]] = arith.remui %block_id_x, %[[RUNS]] : index
// Lane i's slot: base + i, clamped to the group's last slot, min(base + 16, R) - 1 (no keys: the run as it is).
// GPU: %[[BASE:.*]] = arith.muli %[[GROUP]], %c16 : index
// GPU: %[[NEXT:.*]] = arith.addi %[[BASE]], %c16 : index
// GPU: %[[END:.*]] = arith.minui %[[NEXT]], %{{.*}} : index
// GPU: %[[LAST:.*]] = arith.subi %[[END]], %c1 : index
// GPU: %[[AT:.*]] = arith.addi %[[BASE]], %thread_id_x : index
// GPU: arith.minui %[[AT]], %[[LAST]] : index
// GPU: memref.load {{.*}} : memref<?xi32>
// GPU: arith.subi %[[END]], %[[BASE]] : index
// GPU-NOT: scf.for
// GPU: scf.for %{{.*}} = %{{.*}} to %c64 step %c128 {
// GPU: vector.load %{{.*}}[%[[TOKEN]], {{.*}} : memref<?x64xf32>, vector<4xf32>
// GPU: scf.for
// GPU-COUNT-3: gpu.shuffle idx
// GPU: scf.if
// GPU: vector.store {{.*}} : memref<?x64xf32>, vector<4xf32>
// GPU-LABEL: gpu.func @reads_along_the_slot
// GPU-NOT: gpu.shuffle
// GPU: return

// GPU-LABEL: gpu.func @pad_slots_by_token
// A block's run of 16 slots starts where a token's slots start (or where `row >= 0` changes: a key too): lane
// l computes slot 16 g - 1 + l's row-invariant values (clamped to the last slot), so its keys too, and compares
// them with the lane before's (a shuffle up); a ballot of the lanes at a start gives the first in
// [16 g, 16 g + 15) (bits 1-15: 65534), else 16 g + 15, and the next group's, found the same way in
// [16 g + 16, 16 g + 31) (bits 17-31: -131072 as an i32). Only then the ops that only store (the bounds
// check's report, the row's mark for the fill), for the group's own slots. The group's j-th slot is at lane
// first - 16 g + 1 + j.
// GPU: %[[START:.*]] = arith.muli %{{.*}}, %c16 : index
// GPU: %[[LANE:.*]] = arith.addi %[[START]], %thread_id_x : index
// GPU: %[[PROBED:.*]] = arith.subi %[[LANE]], %c1 : index
// GPU: %[[SLOT:.*]] = arith.minui %[[PROBED]], %{{.*}} : index
// GPU: memref.load %{{.*}}[%[[SLOT]]] : memref<?xi32>
// GPU-NOT: memref.store
// GPU: gpu.shuffle  up
// GPU-NOT: memref.store
// GPU: %[[STARTS:.*]] = nvvm.vote.sync  ballot
// GPU: arith.andi %[[STARTS]], %c65534_i32 : i32
// GPU: %[[GROUPFIRST:.*]] = arith.minui %{{.*}}, %arg11 : index
// GPU: arith.andi %[[STARTS]], %c-131072_i32 : i32
// GPU: %[[GROUPEND:.*]] = arith.minui %{{.*}}, %arg11 : index
// GPU: %[[OFFSET:.*]] = arith.subi %[[GROUPFIRST]], %[[START]] : index
// GPU: %[[FIRSTLANE:.*]] = arith.addi %[[OFFSET]], %c1 : index
// GPU: %[[FROM:.*]] = arith.cmpi uge, %[[SLOT]], %[[GROUPFIRST]] : index
// GPU: %[[TO:.*]] = arith.cmpi ult, %[[SLOT]], %[[GROUPEND]] : index
// GPU: %[[OWN:.*]] = arith.andi %[[FROM]], %[[TO]] : i1
// GPU: scf.if %[[OWN]] {
// GPU: memref.store %c1_i8, %{{.*}} : memref<?xi8>
// GPU: %[[COUNT:.*]] = arith.subi %[[GROUPEND]], %[[GROUPFIRST]] : index
// The keys travel as one word each: the token id as the i32 it was loaded as, `row >= 0` as 0 or 1.
// GPU: scf.for %[[J:.*]] = %c0 to %[[COUNT]] step %c1 iter_args(%[[TOK:.*]] = %c0_i32, %[[LIVE:.*]] = %c0_i32, %[[PREV:.*]] = %cst) -> (i32, i32, vector<4xf32>)
// GPU-NEXT: arith.addi %[[FIRSTLANE]], %[[J]] : index
// GPU: %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %c0 : index
// GPU: %[[T:[a-zA-Z0-9_]+]], %{{.*}} = gpu.shuffle idx
// GPU: arith.cmpi ne, %[[T]], %[[TOK]] : i32
// GPU: %[[L:[a-zA-Z0-9_]+]], %{{.*}} = gpu.shuffle idx
// GPU: arith.cmpi ne, %[[L]], %[[LIVE]] : i32
// GPU: %[[VALUE:.*]] = scf.if %{{.*}} -> (vector<4xf32>) {
// GPU: %[[ROW:.*]] = arith.index_cast %[[T]] : i32 to index
// GPU: vector.load %{{.*}}[%[[ROW]], %{{.*}}] {{.*}} : memref<?x64xf32>, vector<4xf32>
// GPU: scf.yield %[[PREV]] : vector<4xf32>
// GPU-COUNT-3: gpu.shuffle idx
// GPU: vector.store %[[VALUE]]
// GPU: scf.yield %[[T]], %[[L]], %[[VALUE]] : i32, i32, vector<4xf32>

// Without the pass: a warp per (t, k) row, the gradient loaded for each slot.
// ROWS-LABEL: gpu.func @moe_token_unpermute_with_routing_map_grad__6_permuted_tokens_grad
// ROWS-NOT: gpu.shuffle
// ROWS: vector.load
// ROWS: vector.store
// ROWS: return

module attributes {moe.dtype = "f32", moe.op = "moe_token_unpermute_with_routing_map_grad"} {
  func.func @moe_token_unpermute_with_routing_map_grad__6_permuted_tokens_grad(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "unpermuted_tokens_grad">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "out_index">}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permute_token_id">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "routing_map">}, %arg4: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permuted_tokens">}, %arg5: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "probs">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "permuted_tokens_grad">}, %arg7: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "probs_grad">}, %arg8: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg9: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<workspace>}, %arg10: index {moe.arg = #moe.arg<dim, "Tk">}, %arg11: index {moe.arg = #moe.arg<dim, "R">}) {
    %c0 = arith.constant 0 : index
    %0 = arith.index_cast %c0 : index to i64
    %1 = llvm.getelementptr %arg9[%0] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %2 = moe.view %1[%arg11] : !llvm.ptr -> memref<?xi8>
    %c5 = arith.constant 5 : index
    %c4 = arith.constant 4 : index
    %cst = arith.constant 0.000000e+00 : f32
    %true = arith.constant true
    %c0_i32 = arith.constant 0 : i32
    %c3 = arith.constant 3 : index
    %c2 = arith.constant 2 : index
    %c1 = arith.constant 1 : index
    %c1_i64 = arith.constant 1 : i64
    %c-9223372036854775808 = arith.constant -9223372036854775808 : index
    %c-1 = arith.constant -1 : index
    %c6 = arith.constant 6 : index
    %c64 = arith.constant 64 : index
    %c0_0 = arith.constant 0 : index
    %3 = moe.view %arg8[%c6] : !llvm.ptr -> memref<6xi64>
    %4 = moe.view %arg6[%arg11, %c64] : !llvm.ptr -> memref<?x64xf32>
    %5 = moe.view %arg1[%arg11] : !llvm.ptr -> memref<?xi32>
    %6 = moe.view %arg0[%arg10, %c64] : !llvm.ptr -> memref<?x64xf32>
    %7 = arith.cmpi eq, %arg10, %c0_0 : index
    %8 = arith.cmpi eq, %arg10, %c-1 : index
    %9 = arith.cmpi eq, %arg11, %c-9223372036854775808 : index
    %10 = arith.andi %8, %9 : i1
    %11 = arith.ori %7, %10 : i1
    scf.if %11 {
      memref.store %c1_i64, %3[%c0_0] : memref<6xi64>
      %14 = arith.index_cast %arg11 : index to i64
      memref.store %14, %3[%c1] : memref<6xi64>
    }
    %12 = arith.select %11, %c1, %arg10 : index
    %13 = arith.divsi %arg11, %12 : index
    moe.scatter %4[%arg10, %13, %c64] {schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 8>} : memref<?x64xf32> {
    ^bb0(%arg12: index, %arg13: index, %arg14: index):
      %14 = arith.muli %arg12, %13 {moe.row_invariant} : index
      %15 = arith.addi %14, %arg13 {moe.row_invariant} : index
      %16 = arith.cmpi sge, %15, %c0_0 {moe.row_invariant} : index
      %17 = arith.cmpi slt, %15, %arg11 {moe.row_invariant} : index
      %18 = arith.andi %16, %17 {moe.row_invariant} : i1
      %19 = scf.if %18 -> (i32) {
        %32 = memref.load %5[%15] : memref<?xi32>
        scf.yield %32 : i32
      } else {
        %32 = arith.cmpi slt, %15, %c0_0 : index
        %33 = arith.cmpi sge, %15, %arg11 : index
        %34 = arith.ori %32, %33 : i1
        %35 = arith.select %34, %c1, %c0_0 : index
        %36 = arith.select %34, %15, %c0_0 : index
        %37 = arith.index_cast %35 : index to i64
        memref.store %37, %3[%c2] : memref<6xi64>
        %38 = arith.index_cast %36 : index to i64
        memref.store %38, %3[%c3] : memref<6xi64>
        scf.yield %c0_i32 : i32
      } {moe.row_invariant}
      %20 = arith.index_cast %19 {moe.row_invariant} : i32 to index
      %21 = arith.cmpi sge, %20, %c0_0 {moe.row_invariant} : index
      %22 = arith.select %21, %20, %c0_0 {moe.row_invariant} : index
      %23 = scf.if %21 -> (f32) {
        %32 = memref.load %6[%arg12, %arg14] : memref<?x64xf32>
        scf.yield %32 : f32
      } else {
        scf.yield %cst : f32
      }
      %24 = arith.cmpi sge, %22, %c0_0 {moe.row_invariant} : index
      %25 = arith.cmpi slt, %22, %arg11 {moe.row_invariant} : index
      %26 = arith.andi %24, %25 {moe.row_invariant} : i1
      %27 = arith.xori %26, %true {moe.row_invariant} : i1
      %28 = arith.andi %21, %27 {moe.row_invariant} : i1
      scf.if %28 {
        %32 = arith.cmpi slt, %22, %c0_0 : index
        %33 = arith.cmpi sge, %22, %arg11 : index
        %34 = arith.ori %32, %33 : i1
        %35 = arith.select %34, %c1, %c0_0 : index
        %36 = arith.select %34, %22, %c0_0 : index
        %37 = arith.index_cast %35 : index to i64
        memref.store %37, %3[%c4] : memref<6xi64>
        %38 = arith.index_cast %36 : index to i64
        memref.store %38, %3[%c5] : memref<6xi64>
      } {moe.row_invariant}
      %29 = arith.andi %21, %26 {moe.row_invariant} : i1
      %30 = arith.cmpi ult, %22, %arg11 {moe.row_invariant} : index
      %31 = arith.andi %29, %30 {moe.row_invariant} : i1
      scf.if %31 {
        %c1_i8 = arith.constant 1 : i8
        memref.store %c1_i8, %2[%22] : memref<?xi8>
      } {moe.row_invariant}
      moe.write %23 to [%22, %arg14] if %29 {moe.row_guard} : f32
    }
    return
  }
  func.func @reads_along_the_slot(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "unpermuted_tokens_grad">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "out_index">}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permute_token_id">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "routing_map">}, %arg4: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permuted_tokens">}, %arg5: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "probs">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "permuted_tokens_grad">}, %arg7: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "probs_grad">}, %arg8: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg9: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<workspace>}, %arg10: index {moe.arg = #moe.arg<dim, "Tk">}, %arg11: index {moe.arg = #moe.arg<dim, "R">}) {
    %c0 = arith.constant 0 : index
    %0 = arith.index_cast %c0 : index to i64
    %1 = llvm.getelementptr %arg9[%0] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %2 = moe.view %1[%arg11] : !llvm.ptr -> memref<?xi8>
    %c5 = arith.constant 5 : index
    %c4 = arith.constant 4 : index
    %cst = arith.constant 0.000000e+00 : f32
    %true = arith.constant true
    %c0_i32 = arith.constant 0 : i32
    %c3 = arith.constant 3 : index
    %c2 = arith.constant 2 : index
    %c1 = arith.constant 1 : index
    %c1_i64 = arith.constant 1 : i64
    %c-9223372036854775808 = arith.constant -9223372036854775808 : index
    %c-1 = arith.constant -1 : index
    %c6 = arith.constant 6 : index
    %c64 = arith.constant 64 : index
    %c0_0 = arith.constant 0 : index
    %3 = moe.view %arg8[%c6] : !llvm.ptr -> memref<6xi64>
    %4 = moe.view %arg6[%arg11, %c64] : !llvm.ptr -> memref<?x64xf32>
    %5 = moe.view %arg1[%arg11] : !llvm.ptr -> memref<?xi32>
    %6 = moe.view %arg0[%arg10, %c64] : !llvm.ptr -> memref<?x64xf32>
    %7 = arith.cmpi eq, %arg10, %c0_0 : index
    %8 = arith.cmpi eq, %arg10, %c-1 : index
    %9 = arith.cmpi eq, %arg11, %c-9223372036854775808 : index
    %10 = arith.andi %8, %9 : i1
    %11 = arith.ori %7, %10 : i1
    scf.if %11 {
      memref.store %c1_i64, %3[%c0_0] : memref<6xi64>
      %14 = arith.index_cast %arg11 : index to i64
      memref.store %14, %3[%c1] : memref<6xi64>
    }
    %12 = arith.select %11, %c1, %arg10 : index
    %13 = arith.divsi %arg11, %12 : index
    moe.scatter %4[%arg10, %13, %c64] {schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 8>} : memref<?x64xf32> {
    ^bb0(%arg12: index, %arg13: index, %arg14: index):
      %14 = arith.muli %arg12, %13 {moe.row_invariant} : index
      %15 = arith.addi %14, %arg13 {moe.row_invariant} : index
      %16 = arith.cmpi sge, %15, %c0_0 {moe.row_invariant} : index
      %17 = arith.cmpi slt, %15, %arg11 {moe.row_invariant} : index
      %18 = arith.andi %16, %17 {moe.row_invariant} : i1
      %19 = scf.if %18 -> (i32) {
        %32 = memref.load %5[%15] : memref<?xi32>
        scf.yield %32 : i32
      } else {
        %32 = arith.cmpi slt, %15, %c0_0 : index
        %33 = arith.cmpi sge, %15, %arg11 : index
        %34 = arith.ori %32, %33 : i1
        %35 = arith.select %34, %c1, %c0_0 : index
        %36 = arith.select %34, %15, %c0_0 : index
        %37 = arith.index_cast %35 : index to i64
        memref.store %37, %3[%c2] : memref<6xi64>
        %38 = arith.index_cast %36 : index to i64
        memref.store %38, %3[%c3] : memref<6xi64>
        scf.yield %c0_i32 : i32
      } {moe.row_invariant}
      %20 = arith.index_cast %19 {moe.row_invariant} : i32 to index
      %21 = arith.cmpi sge, %20, %c0_0 {moe.row_invariant} : index
      %22 = arith.select %21, %20, %c0_0 {moe.row_invariant} : index
      %23 = scf.if %21 -> (f32) {
        %32 = memref.load %6[%arg13, %arg14] : memref<?x64xf32>
        scf.yield %32 : f32
      } else {
        scf.yield %cst : f32
      }
      %24 = arith.cmpi sge, %22, %c0_0 {moe.row_invariant} : index
      %25 = arith.cmpi slt, %22, %arg11 {moe.row_invariant} : index
      %26 = arith.andi %24, %25 {moe.row_invariant} : i1
      %27 = arith.xori %26, %true {moe.row_invariant} : i1
      %28 = arith.andi %21, %27 {moe.row_invariant} : i1
      scf.if %28 {
        %32 = arith.cmpi slt, %22, %c0_0 : index
        %33 = arith.cmpi sge, %22, %arg11 : index
        %34 = arith.ori %32, %33 : i1
        %35 = arith.select %34, %c1, %c0_0 : index
        %36 = arith.select %34, %22, %c0_0 : index
        %37 = arith.index_cast %35 : index to i64
        memref.store %37, %3[%c4] : memref<6xi64>
        %38 = arith.index_cast %36 : index to i64
        memref.store %38, %3[%c5] : memref<6xi64>
      } {moe.row_invariant}
      %29 = arith.andi %21, %26 {moe.row_invariant} : i1
      %30 = arith.cmpi ult, %22, %arg11 {moe.row_invariant} : index
      %31 = arith.andi %29, %30 {moe.row_invariant} : i1
      scf.if %31 {
        %c1_i8 = arith.constant 1 : i8
        memref.store %c1_i8, %2[%22] : memref<?xi8>
      } {moe.row_invariant}
      moe.write %23 to [%22, %arg14] if %29 {moe.row_guard} : f32
    }
    return
  }
  func.func @pad_slots_by_token(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "unpermuted_tokens_grad">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "out_index">}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permute_token_id">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "routing_map">}, %arg4: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permuted_tokens">}, %arg5: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "probs">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "permuted_tokens_grad">}, %arg7: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "probs_grad">}, %arg8: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg9: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<workspace>}, %arg10: index {moe.arg = #moe.arg<dim, "Tk">}, %arg11: index {moe.arg = #moe.arg<dim, "R">}) {
    %c0 = arith.constant 0 : index
    %0 = arith.index_cast %c0 : index to i64
    %1 = llvm.getelementptr %arg9[%0] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %2 = moe.view %1[%arg11] : !llvm.ptr -> memref<?xi8>
    %c3 = arith.constant 3 : index
    %c2 = arith.constant 2 : index
    %true = arith.constant true
    %cst = arith.constant 0.000000e+00 : f32
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c0_0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %3 = moe.view %arg6[%arg11, %c64] : !llvm.ptr -> memref<?x64xf32>
    %4 = moe.view %arg2[%arg11] : !llvm.ptr -> memref<?xi32>
    %5 = moe.view %arg1[%arg11] : !llvm.ptr -> memref<?xi32>
    %6 = moe.view %arg0[%arg10, %c64] : !llvm.ptr -> memref<?x64xf32>
    %7 = moe.view %arg8[%c4] : !llvm.ptr -> memref<4xi64>
    moe.scatter %3[%arg11, %c64] {schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 8>} : memref<?x64xf32> {
    ^bb0(%arg12: index, %arg13: index):
      %8 = memref.load %4[%arg12] {moe.row_invariant} : memref<?xi32>
      %9 = arith.index_cast %8 {moe.row_invariant} : i32 to index
      %10 = memref.load %5[%arg12] {moe.row_invariant} : memref<?xi32>
      %11 = arith.index_cast %10 {moe.row_invariant} : i32 to index
      %12 = arith.cmpi sge, %11, %c0_0 {moe.row_invariant} : index
      %13 = arith.select %12, %11, %c0_0 {moe.row_invariant} : index
      %14 = scf.if %12 -> (f32) {
        %23 = arith.cmpi sge, %9, %c0_0 : index
        %24 = arith.cmpi slt, %9, %arg10 : index
        %25 = arith.andi %23, %24 : i1
        %26 = scf.if %25 -> (f32) {
          %27 = memref.load %6[%9, %arg13] : memref<?x64xf32>
          scf.yield %27 : f32
        } else {
          %27 = arith.cmpi slt, %9, %c0_0 : index
          %28 = arith.cmpi sge, %9, %arg10 : index
          %29 = arith.ori %27, %28 : i1
          %30 = arith.select %29, %c1, %c0_0 : index
          %31 = arith.select %29, %9, %c0_0 : index
          %32 = arith.index_cast %30 : index to i64
          memref.store %32, %7[%c0_0] : memref<4xi64>
          %33 = arith.index_cast %31 : index to i64
          memref.store %33, %7[%c1] : memref<4xi64>
          scf.yield %cst : f32
        }
        scf.yield %26 : f32
      } else {
        scf.yield %cst : f32
      }
      %15 = arith.cmpi sge, %13, %c0_0 {moe.row_invariant} : index
      %16 = arith.cmpi slt, %13, %arg11 {moe.row_invariant} : index
      %17 = arith.andi %15, %16 {moe.row_invariant} : i1
      %18 = arith.xori %17, %true {moe.row_invariant} : i1
      %19 = arith.andi %12, %18 {moe.row_invariant} : i1
      scf.if %19 {
        %23 = arith.cmpi slt, %13, %c0_0 : index
        %24 = arith.cmpi sge, %13, %arg11 : index
        %25 = arith.ori %23, %24 : i1
        %26 = arith.select %25, %c1, %c0_0 : index
        %27 = arith.select %25, %13, %c0_0 : index
        %28 = arith.index_cast %26 : index to i64
        memref.store %28, %7[%c2] : memref<4xi64>
        %29 = arith.index_cast %27 : index to i64
        memref.store %29, %7[%c3] : memref<4xi64>
      } {moe.row_invariant}
      %20 = arith.andi %12, %17 {moe.row_invariant} : i1
      %21 = arith.cmpi ult, %13, %arg11 {moe.row_invariant} : index
      %22 = arith.andi %20, %21 {moe.row_invariant} : i1
      scf.if %22 {
        %c1_i8 = arith.constant 1 : i8
        memref.store %c1_i8, %2[%13] : memref<?xi8>
      } {moe.row_invariant}
      moe.write %14 to [%13, %arg13] if %20 {moe.row_guard} : f32
    }
    return
  }
}
