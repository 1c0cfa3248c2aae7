// moe-lane-point-access on the rows of points of group-points.mlir (its input: A3's probs_grad with probs,
// f32, E = 8, H = 64, and the drop-and-pad one over slots): the loads the warp's walk makes at the point's
// index (+ a constant) are marked: routing_map[t, e], and the carried slot count's step routing_map[t, e - 1];
// permute_token_id[i] and the slot's out_index entry in drop-and-pad. The loads in the dot product
// (probs[t, e]) and at other indices (out_index[t * C + k], the fold's routing_map[t, j]) are not, nor is
// anything in a kernel that is not a row of points (@reads_only_the_point_rows). A3's probs_grad writes
// probs_grad[t, e], at the point's own indices: its writes go through lanes (moe.lane_writes); the
// drop-and-pad one writes [e, c] computed from slot i: not.
// RUN: moec-opt %S/group-points.mlir --moe-group-points --moe-carry-prefix-folds=target=gpu --moe-lane-point-access | FileCheck %s --check-prefix=MARK
// RUN: moec-opt %S/group-points.mlir --moe-group-points --moe-carry-prefix-folds=target=gpu --moe-lane-point-access --moe-lower-to-gpu --canonicalize | FileCheck %s --check-prefix=GPU
// @walk (below): a read-only tensor at e + 1 is marked; a tensor the kernel may write, and a load whose
// point index is not in the last dim, are not; its write at [t, e] goes through lanes.
// RUN: moec-opt %s --moe-lane-point-access | FileCheck %s --check-prefix=WALK

// MARK-LABEL: func.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad
// MARK: moe.scatter {{.*}} {moe.lane_writes, moe.point_rows, schedule
// MARK: memref.load %5[%arg12, %{{.*}}] {moe.lane_load} : memref<?x8xi8>
// MARK: moe.fold
// MARK-NOT: moe.lane_load
// MARK: memref.load %5[%arg12, %arg13] {moe.lane_load} : memref<?x8xi8>
// MARK-NOT: moe.lane_load
// MARK-LABEL: func.func @reads_only_the_point_rows
// MARK-NOT: moe.lane_load
// MARK-LABEL: func.func @pad_slots_by_token
// MARK: moe.scatter {{.*}} {moe.point_rows, schedule
// MARK: memref.load %4[%arg12] {moe.lane_load} : memref<?xi32>
// MARK: memref.load %5[%arg12] {moe.lane_load} : memref<?xi32>
// MARK-NOT: moe.lane_load
// MARK: return

// Every 32 points (and not at the walk's extra last step) the lanes load points p + lane and p + lane - 1,
// each checked against the tensor's dims; each step takes its point's bytes from lane p % 32. A point that
// is not live hands its value to its lane, and after a chunk's last point (p % 32 = 31, or the row's last)
// those lanes store them.
// GPU-LABEL: gpu.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad
// GPU: scf.for %[[P:.*]] = %c0 to %c9 step %c1 iter_args(
// GPU: %[[IN:.*]] = arith.andi %[[P]], %c31 : index
// GPU: %[[START:.*]] = arith.cmpi eq, %[[IN]], %c0 : index
// GPU: %[[POINT:.*]] = arith.cmpi ult, %[[P]], %c8 : index
// GPU: %[[RELOAD:.*]] = arith.andi %[[START]], %[[POINT]] : i1
// GPU: scf.if %[[RELOAD]] -> (i8, i8) {
// GPU: %[[AT:.*]] = arith.addi %[[P]], %thread_id_x : index
// GPU: %[[PREV:.*]] = arith.addi %[[AT]], %c-1 : index
// GPU: arith.cmpi slt, %[[PREV]], %c8 : index
// GPU: memref.load %{{.*}}[%{{.*}}, %[[PREV]]] : memref<?x8xi8>
// GPU: arith.cmpi slt, %[[AT]], %c8 : index
// GPU: memref.load %{{.*}}[%{{.*}}, %[[AT]]] : memref<?x8xi8>
// GPU: %[[FROM:.*]] = arith.index_cast %[[IN]] : index to i32
// GPU-COUNT-2: gpu.shuffle  idx %{{.*}}, %[[FROM]], %c32_i32 : i32
// GPU-NOT: memref.load %{{.*}}[%{{.*}}, %[[P]]] : memref<?x8xi8>
// GPU: arith.cmpi eq, %thread_id_x, %[[IN]] : index
// GPU: arith.cmpi eq, %[[IN]], %c31 : index
// GPU: scf.if %{{.*}} {
// GPU-NEXT: %[[BASE:.*]] = arith.subi %[[P]], %[[IN]] : index
// GPU-NEXT: %[[OWN:.*]] = arith.addi %[[BASE]], %thread_id_x : index
// GPU-NEXT: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %[[OWN]]] : memref<?x8xf32>
// GPU: gpu.return

// WALK-LABEL: func.func @walk
// WALK: moe.scatter {{.*}} {moe.lane_writes, moe.point_rows
// WALK: memref.load %{{.*}}[%arg5, %[[NEXT:.*]]] {moe.lane_load} : memref<?x16xi8>
// WALK-NEXT: memref.load %{{.*}}[%arg5, %arg6] : memref<?x16xi8>
// WALK-NEXT: memref.load %{{.*}}[%arg6, %arg5] : memref<?x16xi8>
// WALK-NOT: moe.lane_load
func.func @walk(%map_ptr: !llvm.ptr {llvm.noalias, llvm.readonly}, %written_ptr: !llvm.ptr {llvm.noalias},
                %rows_ptr: !llvm.ptr {llvm.noalias, llvm.readonly}, %out_ptr: !llvm.ptr {llvm.noalias}, %n: index) {
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %map = moe.view %map_ptr[%n, %c16] : !llvm.ptr -> memref<?x16xi8>
  %written = moe.view %written_ptr[%n, %c16] : !llvm.ptr -> memref<?x16xi8>
  %rows = moe.view %rows_ptr[%n, %c64] : !llvm.ptr -> memref<?x64xf32>
  %out = moe.view %out_ptr[%n, %c16] : !llvm.ptr -> memref<?x16xf32>
  moe.scatter %out[%n, %c16] {moe.point_rows, schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 1>} : memref<?x16xf32> {
  ^bb0(%t: index, %e: index):
    %next = arith.addi %e, %c1 : index
    %a = memref.load %map[%t, %next] : memref<?x16xi8>
    %b = memref.load %written[%t, %e] : memref<?x16xi8>
    %c = memref.load %map[%e, %t] : memref<?x16xi8>
    %ab = arith.addi %a, %b : i8
    %abc = arith.addi %ab, %c : i8
    %w = arith.uitofp %abc : i8 to f32
    %s = moe.sum %c64 : f32 {
    ^bb0(%j: index):
      %x = memref.load %rows[%t, %j] : memref<?x64xf32>
      %y = arith.mulf %x, %w : f32
      moe.yield %y : f32
    }
    moe.write %s to [%t, %e] : f32
  }
  return
}
