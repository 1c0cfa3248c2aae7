// moe-compact-predicated-folds shares one budget among the lists of a domain: 16 KiB of GPU shared memory
// per block (or of CPU stack). Here two folds over E = 640 steps, on blocks of 4 warps: each list takes
// 640 x 4 bytes x 4 warps = 10 KiB, so the first fold is compacted and the second stays a predicated fold.
// On the CPU (one list of 2.5 KiB each) both fit.
// RUN: moec-opt %s --moe-compact-predicated-folds=target=gpu | FileCheck %s --check-prefix=GPU
// RUN: moec-opt %s --moe-compact-predicated-folds=target=cpu | FileCheck %s --check-prefix=CPU

// GPU: moe.compact %c640 : memref<640xi32>
// GPU-NOT: moe.compact
// GPU: moe.fold %c640
// GPU-NOT: moe.compact

// CPU-COUNT-2: moe.compact %c640 : memref<640xi32>

module attributes {moe.dtype = "f32", moe.op = "two_folds"} {
  func.func @two_folds(%arg0: !llvm.ptr {moe.arg = #moe.arg<tensor, "x">}, %arg1: !llvm.ptr {moe.arg = #moe.arg<tensor, "rowmap">}, %arg2: !llvm.ptr {moe.arg = #moe.arg<tensor, "out">}, %arg3: index {moe.arg = #moe.arg<dim, "R">}, %arg4: index {moe.arg = #moe.arg<dim, "T">}) {
    %cst = arith.constant 0.000000e+00 : f32
    %c0 = arith.constant 0 : index
    %c640 = arith.constant 640 : index
    %c16 = arith.constant 16 : index
    %0 = moe.view %arg2[%arg4, %c16] : !llvm.ptr -> memref<?x16xf32>
    %1 = moe.view %arg1[%arg4, %c640] : !llvm.ptr -> memref<?x640xi32>
    %2 = moe.view %arg0[%arg3, %c16] : !llvm.ptr -> memref<?x16xf32>
    moe.compute %0[%arg4, %c16] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 4, unroll = 8>} : memref<?x16xf32> {
    ^bb0(%arg5: index, %arg6: index):
      %3 = moe.fold %c640, %cst : f32 {
      ^bb0(%arg7: index, %arg8: f32):
        %4 = memref.load %1[%arg5, %arg7] : memref<?x640xi32>
        %5 = arith.index_cast %4 : i32 to index
        %6 = arith.cmpi slt, %5, %c0 : index
        %7 = scf.if %6 -> (f32) {
          scf.yield %arg8 : f32
        } else {
          %8 = memref.load %2[%5, %arg6] : memref<?x16xf32>
          %9 = arith.addf %arg8, %8 : f32
          scf.yield %9 : f32
        }
        moe.yield %7 : f32
      }
      %10 = moe.fold %c640, %3 : f32 {
      ^bb0(%arg7: index, %arg8: f32):
        %4 = memref.load %1[%arg5, %arg7] : memref<?x640xi32>
        %5 = arith.index_cast %4 : i32 to index
        %6 = arith.cmpi sge, %5, %c0 : index
        %7 = scf.if %6 -> (f32) {
          %8 = memref.load %2[%5, %arg6] : memref<?x16xf32>
          %9 = arith.mulf %arg8, %8 : f32
          scf.yield %9 : f32
        } else {
          scf.yield %arg8 : f32
        }
        moe.yield %7 : f32
      }
      moe.yield %10 : f32
    }
    return
  }
}
