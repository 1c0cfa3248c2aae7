// moe-lane-point-access on the rows of points of group-points.mlir (its input: A3's probs_grad with probs,
// f32, E = 8, H = 64, and the drop-and-pad one over slots): the slot count k = fold(j < e) over the
// routing map is a sum over the points before e, so it is marked moe.lane_scan; the drop-and-pad kernel
// has no fold, and a kernel that is not a row of points (@reads_only_the_point_rows) is left alone.
// RUN: moec-opt %S/group-points.mlir --moe-group-points --moe-lane-point-access | FileCheck %s --check-prefix=MARK
// RUN: moec-opt %S/group-points.mlir --moe-group-points --moe-lane-point-access --moe-lower-to-gpu --canonicalize | FileCheck %s --check-prefix=GPU
// Below: @scan's fold is marked; the others are not: @init_varies (its init is the point's index),
// @steps_read_the_point (a step reads map[t, e]), @not_a_sum (a step takes the larger), @not_a_count (a
// step adds the map's byte, not a constant), @whole_row (a sum
// over all 16 entries, not over the points before e), @one_dim (its points are a run of slots, not a row
// from index 0).
// RUN: moec-opt %s --moe-lane-point-access | FileCheck %s --check-prefix=FOLDS

// MARK-LABEL: func.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad
// MARK: moe.fold %arg13, %c0_0 {moe.lane_scan} : index {
// MARK-LABEL: func.func @reads_only_the_point_rows
// MARK-NOT: moe.lane_scan
// MARK: return

// Each lane runs its own expert's step from 0 (where a later expert needs it: e + 1 < 8), a ballot takes
// the lanes whose step adds 1, and the lane's count is the number of those below it. No lane folds the
// routing map itself.
// GPU-LABEL: gpu.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad
// GPU: %[[NEXT:.*]] = arith.addi %thread_id_x, %c1 : index
// GPU: %[[NEEDED:.*]] = arith.cmpi ult, %[[NEXT]], %c8 : index
// GPU: %[[TERM:.*]] = scf.if %[[NEEDED]] -> (i64) {
// GPU: memref.load %{{.*}}[%{{.*}}, %thread_id_x] : memref<?x8xi8>
// GPU: } else {
// GPU-NEXT: scf.yield %c0_i64 : i64
// GPU: %[[ADDS:.*]] = arith.cmpi ne, %[[TERM]], %c0_i64 : i64
// GPU: %[[BITS:.*]] = nvvm.vote.sync  ballot %c-1_i32, %[[ADDS]] -> i32
// GPU: %[[BELOW:.*]] = arith.andi %[[BITS]], %{{.*}} : i32
// GPU: %[[COUNT:.*]] = math.ctpop %[[BELOW]] : i32
// GPU: %[[COUNT64:.*]] = arith.extui %[[COUNT]] : i32 to i64
// GPU: %[[K:.*]] = arith.index_cast %[[COUNT64]] : i64 to index
// GPU-NOT: scf.for
// GPU: arith.cmpi slt, %[[K]], %{{.*}} : index
// GPU: nvvm.vote.sync  ballot
// GPU: gpu.return

// FOLDS-LABEL: func.func @scan
// FOLDS: moe.fold %arg5, %c0 {moe.lane_scan}
// FOLDS-LABEL: func.func @init_varies
// FOLDS-NOT: moe.lane_scan
// FOLDS-LABEL: func.func @steps_read_the_point
// FOLDS-NOT: moe.lane_scan
// FOLDS-LABEL: func.func @not_a_sum
// FOLDS-NOT: moe.lane_scan
// FOLDS-LABEL: func.func @not_a_count
// FOLDS-NOT: moe.lane_scan
// FOLDS-LABEL: func.func @whole_row
// FOLDS-NOT: moe.lane_scan
// FOLDS-LABEL: func.func @one_dim
// FOLDS-NOT: moe.lane_scan
// FOLDS: return

func.func @scan(%map_ptr: !llvm.ptr {llvm.noalias, llvm.readonly}, %rows_ptr: !llvm.ptr {llvm.noalias, llvm.readonly},
                %out_ptr: !llvm.ptr {llvm.noalias}, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0 : i8
  %map = moe.view %map_ptr[%n, %c16] : !llvm.ptr -> memref<?x16xi8>
  %rows = moe.view %rows_ptr[%n, %c64] : !llvm.ptr -> memref<?x64xf32>
  %out = moe.view %out_ptr[%n, %c16] : !llvm.ptr -> memref<?x16xf32>
  moe.scatter %out[%n, %c16] {moe.point_rows = 8 : i64, schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 1>} : memref<?x16xf32> {
  ^bb0(%t: index, %e: index):
    %k = moe.fold %e, %c0 : index {
    ^bb0(%j: index, %acc: index):
      %b = memref.load %map[%t, %j] : memref<?x16xi8>
      %live = arith.cmpi ne, %b, %zero : i8
      %next = arith.addi %acc, %c1 : index
      %step = arith.select %live, %next, %acc : index
      moe.yield %step : index
    }
    %w = arith.index_cast %k : index to i32
    %wf = arith.sitofp %w : i32 to f32
    %s = moe.sum %c64 : f32 {
    ^bb0(%j: index):
      %x = memref.load %rows[%t, %j] : memref<?x64xf32>
      %y = arith.mulf %x, %wf : f32
      moe.yield %y : f32
    }
    moe.write %s to [%t, %e] : f32
  }
  return
}

func.func @init_varies(%map_ptr: !llvm.ptr {llvm.noalias, llvm.readonly}, %rows_ptr: !llvm.ptr {llvm.noalias, llvm.readonly},
                       %out_ptr: !llvm.ptr {llvm.noalias}, %n: index) {
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0 : i8
  %map = moe.view %map_ptr[%n, %c16] : !llvm.ptr -> memref<?x16xi8>
  %rows = moe.view %rows_ptr[%n, %c64] : !llvm.ptr -> memref<?x64xf32>
  %out = moe.view %out_ptr[%n, %c16] : !llvm.ptr -> memref<?x16xf32>
  moe.scatter %out[%n, %c16] {moe.point_rows = 8 : i64, schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 1>} : memref<?x16xf32> {
  ^bb0(%t: index, %e: index):
    %k = moe.fold %e, %e : index {
    ^bb0(%j: index, %acc: index):
      %b = memref.load %map[%t, %j] : memref<?x16xi8>
      %live = arith.cmpi ne, %b, %zero : i8
      %next = arith.addi %acc, %c1 : index
      %step = arith.select %live, %next, %acc : index
      moe.yield %step : index
    }
    %w = arith.index_cast %k : index to i32
    %wf = arith.sitofp %w : i32 to f32
    %s = moe.sum %c64 : f32 {
    ^bb0(%j: index):
      %x = memref.load %rows[%t, %j] : memref<?x64xf32>
      %y = arith.mulf %x, %wf : f32
      moe.yield %y : f32
    }
    moe.write %s to [%t, %e] : f32
  }
  return
}

func.func @steps_read_the_point(%map_ptr: !llvm.ptr {llvm.noalias, llvm.readonly}, %rows_ptr: !llvm.ptr {llvm.noalias, llvm.readonly},
                                %out_ptr: !llvm.ptr {llvm.noalias}, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0 : i8
  %map = moe.view %map_ptr[%n, %c16] : !llvm.ptr -> memref<?x16xi8>
  %rows = moe.view %rows_ptr[%n, %c64] : !llvm.ptr -> memref<?x64xf32>
  %out = moe.view %out_ptr[%n, %c16] : !llvm.ptr -> memref<?x16xf32>
  moe.scatter %out[%n, %c16] {moe.point_rows = 8 : i64, schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 1>} : memref<?x16xf32> {
  ^bb0(%t: index, %e: index):
    %k = moe.fold %e, %c0 : index {
    ^bb0(%j: index, %acc: index):
      %b = memref.load %map[%t, %e] : memref<?x16xi8>
      %live = arith.cmpi ne, %b, %zero : i8
      %next = arith.addi %acc, %c1 : index
      %step = arith.select %live, %next, %acc : index
      moe.yield %step : index
    }
    %w = arith.index_cast %k : index to i32
    %wf = arith.sitofp %w : i32 to f32
    %s = moe.sum %c64 : f32 {
    ^bb0(%j: index):
      %x = memref.load %rows[%t, %j] : memref<?x64xf32>
      %y = arith.mulf %x, %wf : f32
      moe.yield %y : f32
    }
    moe.write %s to [%t, %e] : f32
  }
  return
}

func.func @not_a_sum(%map_ptr: !llvm.ptr {llvm.noalias, llvm.readonly}, %rows_ptr: !llvm.ptr {llvm.noalias, llvm.readonly},
                     %out_ptr: !llvm.ptr {llvm.noalias}, %n: index) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %map = moe.view %map_ptr[%n, %c16] : !llvm.ptr -> memref<?x16xi8>
  %rows = moe.view %rows_ptr[%n, %c64] : !llvm.ptr -> memref<?x64xf32>
  %out = moe.view %out_ptr[%n, %c16] : !llvm.ptr -> memref<?x16xf32>
  moe.scatter %out[%n, %c16] {moe.point_rows = 8 : i64, schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 1>} : memref<?x16xf32> {
  ^bb0(%t: index, %e: index):
    %k = moe.fold %e, %c0 : index {
    ^bb0(%j: index, %acc: index):
      %b = memref.load %map[%t, %j] : memref<?x16xi8>
      %bi = arith.extui %b : i8 to i64
      %bx = arith.index_cast %bi : i64 to index
      %step = arith.maxui %acc, %bx : index
      moe.yield %step : index
    }
    %w = arith.index_cast %k : index to i32
    %wf = arith.sitofp %w : i32 to f32
    %s = moe.sum %c64 : f32 {
    ^bb0(%j: index):
      %x = memref.load %rows[%t, %j] : memref<?x64xf32>
      %y = arith.mulf %x, %wf : f32
      moe.yield %y : f32
    }
    moe.write %s to [%t, %e] : f32
  }
  return
}

func.func @not_a_count(%map_ptr: !llvm.ptr {llvm.noalias, llvm.readonly}, %rows_ptr: !llvm.ptr {llvm.noalias, llvm.readonly},
                     %out_ptr: !llvm.ptr {llvm.noalias}, %n: index) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %map = moe.view %map_ptr[%n, %c16] : !llvm.ptr -> memref<?x16xi8>
  %rows = moe.view %rows_ptr[%n, %c64] : !llvm.ptr -> memref<?x64xf32>
  %out = moe.view %out_ptr[%n, %c16] : !llvm.ptr -> memref<?x16xf32>
  moe.scatter %out[%n, %c16] {moe.point_rows = 8 : i64, schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 1>} : memref<?x16xf32> {
  ^bb0(%t: index, %e: index):
    %k = moe.fold %e, %c0 : index {
    ^bb0(%j: index, %acc: index):
      %b = memref.load %map[%t, %j] : memref<?x16xi8>
      %bi = arith.extui %b : i8 to i64
      %bx = arith.index_cast %bi : i64 to index
      %step = arith.addi %acc, %bx : index
      moe.yield %step : index
    }
    %w = arith.index_cast %k : index to i32
    %wf = arith.sitofp %w : i32 to f32
    %s = moe.sum %c64 : f32 {
    ^bb0(%j: index):
      %x = memref.load %rows[%t, %j] : memref<?x64xf32>
      %y = arith.mulf %x, %wf : f32
      moe.yield %y : f32
    }
    moe.write %s to [%t, %e] : f32
  }
  return
}

func.func @whole_row(%map_ptr: !llvm.ptr {llvm.noalias, llvm.readonly}, %rows_ptr: !llvm.ptr {llvm.noalias, llvm.readonly},
                %out_ptr: !llvm.ptr {llvm.noalias}, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0 : i8
  %map = moe.view %map_ptr[%n, %c16] : !llvm.ptr -> memref<?x16xi8>
  %rows = moe.view %rows_ptr[%n, %c64] : !llvm.ptr -> memref<?x64xf32>
  %out = moe.view %out_ptr[%n, %c16] : !llvm.ptr -> memref<?x16xf32>
  moe.scatter %out[%n, %c16] {moe.point_rows = 8 : i64, schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 1>} : memref<?x16xf32> {
  ^bb0(%t: index, %e: index):
    %k = moe.fold %c16, %c0 : index {
    ^bb0(%j: index, %acc: index):
      %b = memref.load %map[%t, %j] : memref<?x16xi8>
      %live = arith.cmpi ne, %b, %zero : i8
      %next = arith.addi %acc, %c1 : index
      %step = arith.select %live, %next, %acc : index
      moe.yield %step : index
    }
    %w = arith.index_cast %k : index to i32
    %wf = arith.sitofp %w : i32 to f32
    %s = moe.sum %c64 : f32 {
    ^bb0(%j: index):
      %x = memref.load %rows[%t, %j] : memref<?x64xf32>
      %y = arith.mulf %x, %wf : f32
      moe.yield %y : f32
    }
    moe.write %s to [%t, %e] : f32
  }
  return
}

func.func @one_dim(%map_ptr: !llvm.ptr {llvm.noalias, llvm.readonly}, %rows_ptr: !llvm.ptr {llvm.noalias, llvm.readonly},
                   %out_ptr: !llvm.ptr {llvm.noalias}, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0 : i8
  %map = moe.view %map_ptr[%n] : !llvm.ptr -> memref<?xi8>
  %rows = moe.view %rows_ptr[%c64] : !llvm.ptr -> memref<64xf32>
  %out = moe.view %out_ptr[%n] : !llvm.ptr -> memref<?xf32>
  moe.scatter %out[%n] {moe.point_rows = 8 : i64, schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 1>} : memref<?xf32> {
  ^bb0(%i: index):
    %k = moe.fold %i, %c0 : index {
    ^bb0(%j: index, %acc: index):
      %b = memref.load %map[%j] : memref<?xi8>
      %live = arith.cmpi ne, %b, %zero : i8
      %next = arith.addi %acc, %c1 : index
      %step = arith.select %live, %next, %acc : index
      moe.yield %step : index
    }
    %w = arith.index_cast %k : index to i32
    %wf = arith.sitofp %w : i32 to f32
    %s = moe.sum %c64 : f32 {
    ^bb0(%j: index):
      %x = memref.load %rows[%j] : memref<64xf32>
      %y = arith.mulf %x, %wf : f32
      moe.yield %y : f32
    }
    moe.write %s to [%i] : f32
  }
  return
}
