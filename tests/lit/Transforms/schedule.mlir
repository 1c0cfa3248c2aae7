// moe-schedule attaches a #moe.schedule to every moe.compute that has none; options left at 0 are the
// compiler's choice (moec::chooseSchedule).
// RUN: moec-opt %s --moe-schedule="target=gpu" | FileCheck %s --check-prefix=GPU
// RUN: moec-opt %s --moe-schedule="target=cpu cpu-lanes=8" | FileCheck %s --check-prefix=CPU
// RUN: moec-opt %s --moe-schedule="target=cpu cpu-lanes=16" | FileCheck %s --check-prefix=CPU16
// RUN: moec-opt %s --moe-schedule="target=ascend cpu-lanes=16" | FileCheck %s --check-prefix=ASCEND
// RUN: moec-opt %s --moe-schedule="target=gpu vector=1" | FileCheck %s --check-prefix=V1
// RUN: moec-opt %s --moe-schedule="target=gpu vector=4 threads=64 rows-per-block=3 unroll=2" | FileCheck %s --check-prefix=ALL
// RUN: not moec-opt %s --moe-schedule="target=tpu" 2>&1 | FileCheck %s --check-prefix=BADTARGET

// bf16, H = 7168: 16-byte vectors (8 lanes), 7168 / 8 = 896 lanes -> 256 threads (the cap), one row a block.
// GPU-LABEL: func.func @bf16_7168
// GPU: moe.compute {{.*}} {schedule = #moe.schedule<rowsPerBlock = 1, threads = 256, vector = 8, unroll = 8>} : memref<?x7168xbf16>
// CPU-LABEL: func.func @bf16_7168
// CPU: moe.compute {{.*}} {schedule = #moe.schedule<rowsPerBlock = 110, threads = 1, vector = 16, unroll = 8>} : memref<?x7168xbf16>
// On the CPU the vector is one register of elements: cpu-lanes f32 lanes (by default this machine's: 16 with
// AVX-512), twice as many 16-bit ones (on Ascend one register of f32 lanes whatever the type),
// and rowsPerBlock the least rows a worker takes: 3 MiB of the bytes a row streams (7168 bf16 in and out: 110).
// CPU16-LABEL: func.func @bf16_7168
// CPU16: {schedule = #moe.schedule<rowsPerBlock = 110, threads = 1, vector = 32, unroll = 8>} : memref<?x7168xbf16>
// ASCEND-LABEL: func.func @bf16_7168
// ASCEND: {schedule = #moe.schedule<rowsPerBlock = 110, threads = 1, vector = 16, unroll = 8>} : memref<?x7168xbf16>
// CPU16-LABEL: func.func @f16_7
// CPU16: {schedule = #moe.schedule<rowsPerBlock = 1024, threads = 1, vector = 4, unroll = 8>} : memref<?x7xf16>
// V1-LABEL: func.func @bf16_7168
// V1: moe.compute {{.*}} {schedule = #moe.schedule<rowsPerBlock = 1, threads = 256, vector = 1, unroll = 8>} : memref<?x7168xbf16>
// ALL-LABEL: func.func @bf16_7168
// ALL: moe.compute {{.*}} {schedule = #moe.schedule<rowsPerBlock = 3, threads = 64, vector = 4, unroll = 2>} : memref<?x7168xbf16>
func.func @bf16_7168(%g: !llvm.ptr, %out: !llvm.ptr, %N: index) {
  %c7168 = arith.constant 7168 : index
  %gv = moe.view %g[%N, %c7168] : !llvm.ptr -> memref<?x7168xbf16>
  %ov = moe.view %out[%N, %c7168] : !llvm.ptr -> memref<?x7168xbf16>
  moe.compute %ov[%N, %c7168] : memref<?x7168xbf16> {
  ^bb0(%n: index, %h: index):
    %x = memref.load %gv[%n, %h] : memref<?x7168xbf16>
    moe.yield %x : bf16
  }
  return
}

// f32, H = 128: 4 lanes of 4 bytes; 32 lanes -> 32 threads, 4 rows a block to reach 128 threads.
// GPU-LABEL: func.func @f32_128
// GPU: {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 4, unroll = 8>} : memref<?x128xf32>
// CPU-LABEL: func.func @f32_128
// CPU: {schedule = #moe.schedule<rowsPerBlock = 1024, threads = 1, vector = 8, unroll = 8>} : memref<?x128xf32>
func.func @f32_128(%g: !llvm.ptr, %out: !llvm.ptr, %N: index) {
  %c128 = arith.constant 128 : index
  %gv = moe.view %g[%N, %c128] : !llvm.ptr -> memref<?x128xf32>
  %ov = moe.view %out[%N, %c128] : !llvm.ptr -> memref<?x128xf32>
  moe.compute %ov[%N, %c128] : memref<?x128xf32> {
  ^bb0(%n: index, %h: index):
    %x = memref.load %gv[%n, %h] : memref<?x128xf32>
    moe.yield %x : f32
  }
  return
}

// f16, H = 7 (odd): the GPU width halves until it divides H, down to 1; the CPU takes the largest
// power of two <= H (4) and leaves a scalar remainder.
// GPU-LABEL: func.func @f16_7
// GPU: {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 1, unroll = 8>} : memref<?x7xf16>
// CPU-LABEL: func.func @f16_7
// CPU: {schedule = #moe.schedule<rowsPerBlock = 1024, threads = 1, vector = 4, unroll = 8>} : memref<?x7xf16>
func.func @f16_7(%g: !llvm.ptr, %out: !llvm.ptr, %N: index) {
  %c7 = arith.constant 7 : index
  %gv = moe.view %g[%N, %c7] : !llvm.ptr -> memref<?x7xf16>
  %ov = moe.view %out[%N, %c7] : !llvm.ptr -> memref<?x7xf16>
  moe.compute %ov[%N, %c7] : memref<?x7xf16> {
  ^bb0(%n: index, %h: index):
    %x = memref.load %gv[%n, %h] : memref<?x7xf16>
    moe.yield %x : f16
  }
  return
}

// bf16, H = 1020: 1020 is not a multiple of 8 -> GPU width 4; 255 lanes -> 256 threads.
// GPU-LABEL: func.func @bf16_1020
// GPU: {schedule = #moe.schedule<rowsPerBlock = 1, threads = 256, vector = 4, unroll = 8>} : memref<?x1020xbf16>
// CPU-LABEL: func.func @bf16_1020
// CPU: {schedule = #moe.schedule<rowsPerBlock = 772, threads = 1, vector = 16, unroll = 8>} : memref<?x1020xbf16>
func.func @bf16_1020(%g: !llvm.ptr, %out: !llvm.ptr, %N: index) {
  %c1020 = arith.constant 1020 : index
  %gv = moe.view %g[%N, %c1020] : !llvm.ptr -> memref<?x1020xbf16>
  %ov = moe.view %out[%N, %c1020] : !llvm.ptr -> memref<?x1020xbf16>
  moe.compute %ov[%N, %c1020] : memref<?x1020xbf16> {
  ^bb0(%n: index, %h: index):
    %x = memref.load %gv[%n, %h] : memref<?x1020xbf16>
    moe.yield %x : bf16
  }
  return
}

// H = 1: nothing to vectorize.
// GPU-LABEL: func.func @bf16_1
// GPU: {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 1, unroll = 8>} : memref<?x1xbf16>
// CPU-LABEL: func.func @bf16_1
// CPU: {schedule = #moe.schedule<rowsPerBlock = 1024, threads = 1, vector = 1, unroll = 8>} : memref<?x1xbf16>
func.func @bf16_1(%g: !llvm.ptr, %out: !llvm.ptr, %N: index) {
  %c1 = arith.constant 1 : index
  %gv = moe.view %g[%N, %c1] : !llvm.ptr -> memref<?x1xbf16>
  %ov = moe.view %out[%N, %c1] : !llvm.ptr -> memref<?x1xbf16>
  moe.compute %ov[%N, %c1] : memref<?x1xbf16> {
  ^bb0(%n: index, %h: index):
    %x = memref.load %gv[%n, %h] : memref<?x1xbf16>
    moe.yield %x : bf16
  }
  return
}

// The inner index used as a non-last load index (a transposed read) blocks vectorization: vector 1.
// GPU-LABEL: func.func @transposed
// GPU: {schedule = #moe.schedule<rowsPerBlock = 1, threads = 256, vector = 1, unroll = 8>} : memref<?x7168xbf16>
// CPU-LABEL: func.func @transposed
// CPU: {schedule = #moe.schedule<rowsPerBlock = 220, threads = 1, vector = 1, unroll = 8>} : memref<?x7168xbf16>
func.func @transposed(%g: !llvm.ptr, %out: !llvm.ptr, %N: index) {
  %c7168 = arith.constant 7168 : index
  %gv = moe.view %g[%c7168, %N] : !llvm.ptr -> memref<7168x?xbf16>
  %ov = moe.view %out[%N, %c7168] : !llvm.ptr -> memref<?x7168xbf16>
  moe.compute %ov[%N, %c7168] : memref<?x7168xbf16> {
  ^bb0(%n: index, %h: index):
    %x = memref.load %gv[%h, %n] : memref<7168x?xbf16>
    moe.yield %x : bf16
  }
  return
}

// A dynamic contiguous dim: no vector width can be proven to divide it, so 1; the GPU default is 256 threads.
// GPU-LABEL: func.func @dynamic_h
// GPU: {schedule = #moe.schedule<rowsPerBlock = 1, threads = 256, vector = 1, unroll = 8>} : memref<?x?xbf16>
// CPU-LABEL: func.func @dynamic_h
// CPU: {schedule = #moe.schedule<rowsPerBlock = 16, threads = 1, vector = 1, unroll = 8>} : memref<?x?xbf16>
func.func @dynamic_h(%g: !llvm.ptr, %out: !llvm.ptr, %N: index, %H: index) {
  %gv = moe.view %g[%N, %H] : !llvm.ptr -> memref<?x?xbf16>
  %ov = moe.view %out[%N, %H] : !llvm.ptr -> memref<?x?xbf16>
  moe.compute %ov[%N, %H] : memref<?x?xbf16> {
  ^bb0(%n: index, %h: index):
    %x = memref.load %gv[%n, %h] : memref<?x?xbf16>
    moe.yield %x : bf16
  }
  return
}

// A compute that already has a schedule is left alone, whatever the options.
// GPU-LABEL: func.func @already_scheduled
// GPU: {schedule = #moe.schedule<rowsPerBlock = 2, threads = 96, vector = 2, unroll = 3>}
// ALL-LABEL: func.func @already_scheduled
// ALL: {schedule = #moe.schedule<rowsPerBlock = 2, threads = 96, vector = 2, unroll = 3>}
func.func @already_scheduled(%g: !llvm.ptr, %out: !llvm.ptr, %N: index) {
  %c7168 = arith.constant 7168 : index
  %gv = moe.view %g[%N, %c7168] : !llvm.ptr -> memref<?x7168xbf16>
  %ov = moe.view %out[%N, %c7168] : !llvm.ptr -> memref<?x7168xbf16>
  moe.compute %ov[%N, %c7168] {schedule = #moe.schedule<rowsPerBlock = 2, threads = 96, vector = 2, unroll = 3>} : memref<?x7168xbf16> {
  ^bb0(%n: index, %h: index):
    %x = memref.load %gv[%n, %h] : memref<?x7168xbf16>
    moe.yield %x : bf16
  }
  return
}

// BADTARGET: error: moe-schedule: target must be cpu, gpu or ascend, got 'tpu'

// A scatter whose write guard depends on the row only (rows of (t, e) of A3, most not routed): a warp per
// row, 8 rows a block, so a skipped row costs one warp. With threads requested (ALL), the request wins.
// GPU-LABEL: func.func @row_guarded_scatter
// GPU: moe.scatter {{.*}} {schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 8, unroll = 8>} : memref<?x4096xbf16>
// ALL-LABEL: func.func @row_guarded_scatter
// ALL: moe.scatter {{.*}} {schedule = #moe.schedule<rowsPerBlock = 3, threads = 64, vector = 4, unroll = 2>} : memref<?x4096xbf16>
func.func @row_guarded_scatter(%g: !llvm.ptr, %idx: !llvm.ptr, %out: !llvm.ptr, %T: index, %R: index) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c4096 = arith.constant 4096 : index
  %gv = moe.view %g[%T, %c4096] : !llvm.ptr -> memref<?x4096xbf16>
  %iv = moe.view %idx[%T, %c4] : !llvm.ptr -> memref<?x4xi32>
  %ov = moe.view %out[%R, %c4096] : !llvm.ptr -> memref<?x4096xbf16>
  moe.scatter %ov[%T, %c4, %c4096] : memref<?x4096xbf16> {
  ^bb0(%t: index, %e: index, %h: index):
    %r32 = memref.load %iv[%t, %e] : memref<?x4xi32>
    %r = arith.index_cast %r32 : i32 to index
    %live = arith.cmpi sge, %r, %c0 : index
    %x = memref.load %gv[%t, %h] : memref<?x4096xbf16>
    moe.write %x to [%r, %h] if %live : bf16
  }
  return
}

// C2's combine before moe-compact-predicated-folds: a fold over 128 experts whose step is `r < 0 ? acc :
// acc + x[r, h]`. How many are live is known only from the data; the CPU row estimate counts at most 8
// (kAssumedLiveSteps): 3 MiB / ((2 + 8 * 2) * 4096 bytes) = 43 rows a worker. A fold over 128 steps that
// all add counts them all: 3 MiB / ((2 + 128 * 2) * 4096) = 3 rows.
// CPU16-LABEL: func.func @predicated_fold
// CPU16: {schedule = #moe.schedule<rowsPerBlock = 43, threads = 1, vector = 32, unroll = 8>} : memref<?x4096xbf16>
// CPU16-LABEL: func.func @dense_fold
// CPU16: {schedule = #moe.schedule<rowsPerBlock = 3, threads = 1, vector = 32, unroll = 8>} : memref<?x4096xbf16>
func.func @predicated_fold(%x: !llvm.ptr, %map: !llvm.ptr, %out: !llvm.ptr, %T: index, %R: index) {
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %c4096 = arith.constant 4096 : index
  %zero = arith.constant 0.0 : f32
  %xv = moe.view %x[%R, %c4096] : !llvm.ptr -> memref<?x4096xbf16>
  %mv = moe.view %map[%T, %c128] : !llvm.ptr -> memref<?x128xi32>
  %ov = moe.view %out[%T, %c4096] : !llvm.ptr -> memref<?x4096xbf16>
  moe.compute %ov[%T, %c4096] : memref<?x4096xbf16> {
  ^bb0(%t: index, %h: index):
    %sum = moe.fold %c128, %zero : f32 {
    ^bb0(%e: index, %acc: f32):
      %r32 = memref.load %mv[%t, %e] : memref<?x128xi32>
      %r = arith.index_cast %r32 : i32 to index
      %dead = arith.cmpi slt, %r, %c0 : index
      %next = scf.if %dead -> (f32) {
        scf.yield %acc : f32
      } else {
        %v = memref.load %xv[%r, %h] : memref<?x4096xbf16>
        %w = arith.extf %v : bf16 to f32
        %a = arith.addf %acc, %w : f32
        scf.yield %a : f32
      }
      moe.yield %next : f32
    }
    %y = arith.truncf %sum : f32 to bf16
    moe.yield %y : bf16
  }
  return
}
func.func @dense_fold(%x: !llvm.ptr, %out: !llvm.ptr, %T: index) {
  %c128 = arith.constant 128 : index
  %c4096 = arith.constant 4096 : index
  %zero = arith.constant 0.0 : f32
  %xv = moe.view %x[%T, %c128, %c4096] : !llvm.ptr -> memref<?x128x4096xbf16>
  %ov = moe.view %out[%T, %c4096] : !llvm.ptr -> memref<?x4096xbf16>
  moe.compute %ov[%T, %c4096] : memref<?x4096xbf16> {
  ^bb0(%t: index, %h: index):
    %sum = moe.fold %c128, %zero : f32 {
    ^bb0(%e: index, %acc: f32):
      %v = memref.load %xv[%t, %e, %h] : memref<?x128x4096xbf16>
      %w = arith.extf %v : bf16 to f32
      %a = arith.addf %acc, %w : f32
      moe.yield %a : f32
    }
    %y = arith.truncf %sum : f32 to bf16
    moe.yield %y : bf16
  }
  return
}
