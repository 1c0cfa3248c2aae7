// moe-plan-ascend on B2 (f32, H = 3000, top_k = 6): each row gathers 6 rows of grad_expanded_x (6 DataCopy
// per chunk), sums them into an f32 accumulator and writes grad_x's own row; the 6 indices are row-invariant.
//   UB 64 KiB: the pipelined layout (double-buffered in and out queues) holds the whole row;
//   UB 32 KiB: it would need two chunks, so the in-place layout (single buffers, the output staged in
//              the accumulator, one copy-out per row) keeps one, and 360 rows share a pass of indices;
//              with the chip's costs too: 7 DataCopy set-ups then 84 KB (2800 + 2100 ns) beat 14
//              overlapping them (5600 ns);
//   UB 4 KiB:  six balanced chunks of 504 elements (a granule of 8 f32), not 5 x 512 + 440;
//   UB 64 B:   not even one chunk with the indices: an error.
// RUN: moec-opt %s --moe-plan-ascend="chip=ut ub-bytes=65536" | FileCheck %s --check-prefix=UB64
// RUN: moec-opt %s --moe-plan-ascend="chip=ut ub-bytes=32768" | FileCheck %s --check-prefix=UB32
// RUN: moec-opt %s --moe-plan-ascend="chip=ut ub-bytes=32768 data-copy-ns=400 gm-gbps-per-core=40" | FileCheck %s --check-prefix=UB32
// RUN: moec-opt %s --moe-plan-ascend="chip=ut ub-bytes=4096" | FileCheck %s --check-prefix=UB4
// RUN: not moec-opt %s --moe-plan-ascend="chip=ut ub-bytes=64" 2>&1 | FileCheck %s --check-prefix=TINY
// Autotuning's knobs override the choices: single buffers where double ones fit, double ones where they
// need more chunks, a chunk cap in whole granules (1000 and 1001 alike: 3 chunks of 1000, a granule of
// 8 f32; the UB the cap leaves free lets 6 rows share a pass of their indices and output chunk), a cap on
// rows per pass.
// RUN: moec-opt %s --moe-plan-ascend="chip=ut ub-bytes=65536 buffer-count=1" | FileCheck %s --check-prefix=FORCE1
// RUN: moec-opt %s --moe-plan-ascend="chip=ut ub-bytes=32768 buffer-count=2" | FileCheck %s --check-prefix=FORCE2
// RUN: moec-opt %s --moe-plan-ascend="chip=ut ub-bytes=65536 max-chunk=1000" | FileCheck %s --check-prefix=CAP
// RUN: moec-opt %s --moe-plan-ascend="chip=ut ub-bytes=65536 max-chunk=1001" | FileCheck %s --check-prefix=CAP
// RUN: moec-opt %s --moe-plan-ascend="chip=ut ub-bytes=32768 max-rows-per-pass=16" | FileCheck %s --check-prefix=ROWS

// UB64: ascend_plan = #moe.ascend_plan<chip = "ut", rowLength = 3000, chunk = 3000, chunks = 1, bufferCount = 2,
// UB64-SAME: rowCopiesPerChunk = 6, passCopiesPerChunk = 1, passCopies = 1, rowScalars = 6, rowBytes = 84024
// UB64-SAME: #moe.ub_buffer<in, "grad_expanded_x", elementBytes = 4, copies = 2, perRowOfPass = false
// UB64-SAME: #moe.ub_buffer<out, "grad_x", elementBytes = 4, copies = 2, perRowOfPass = true
// UB64-SAME: #moe.ub_buffer<acc, "f32", elementBytes = 4, copies = 1
// UB64-SAME: #moe.ub_buffer<idx, "expanded_row_idx", elementBytes = 0, copies = 1, perRowOfPass = true, fixedBytesPerRow = 24, reuseDims = 0, copiesPerChunk = 0>

// UB32: chunk = 3000, chunks = 1, bufferCount = 1, maxRowsPerPass = 360, pointRows = false, guardedRows = false, rowCopiesPerChunk = 7, passCopiesPerChunk = 0
// UB32-NOT: out.grad_x
// UB32-SAME: schedule

// UB4: chunk = 504, chunks = 6, bufferCount = 1, maxRowsPerPass = 1

// FORCE1: chunk = 3000, chunks = 1, bufferCount = 1, maxRowsPerPass =
// FORCE1-NOT: out.grad_x
// FORCE2: chunk = 1504, chunks = 2, bufferCount = 2, maxRowsPerPass = 1,
// CAP: chunk = 1000, chunks = 3, bufferCount = 2, maxRowsPerPass = 6,
// ROWS: chunk = 3000, chunks = 1, bufferCount = 1, maxRowsPerPass = 16,

// TINY: error: 'moe.compute' op moe-plan-ascend: a chunk of 8 elements with 24 B of row-invariant values does not fit the 64 B UB of chip 'ut'

module attributes {moe.dtype = "f32", moe.op = "moe_init_routing_v2_grad"} {
  func.func @moe_init_routing_v2_grad(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "grad_expanded_x">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "expanded_row_idx">}, %arg2: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "grad_x">}, %arg3: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg4: index {moe.arg = #moe.arg<dim, "N">}, %arg5: index {moe.arg = #moe.arg<dim, "R">}, %arg6: index {moe.arg = #moe.arg<attr, "active_num">}) {
    %cst = arith.constant 0.000000e+00 : f32
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c0 = arith.constant 0 : index
    %c6 = arith.constant 6 : index
    %c3000 = arith.constant 3000 : index
    %0 = moe.view %arg2[%arg4, %c3000] : !llvm.ptr -> memref<?x3000xf32>
    %1 = arith.muli %arg4, %c6 : index
    %2 = moe.view %arg1[%1] : !llvm.ptr -> memref<?xi32>
    %3 = moe.view %arg0[%arg5, %c3000] : !llvm.ptr -> memref<?x3000xf32>
    %4 = moe.view %arg3[%c2] : !llvm.ptr -> memref<2xi64>
    moe.compute %0[%arg4, %c3000] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x3000xf32> {
    ^bb0(%arg7: index, %arg8: index):
      %5 = moe.sum %c6 : f32 {
      ^bb0(%arg9: index):
        %6 = arith.muli %arg7, %c6 : index
        %7 = arith.addi %6, %arg9 : index
        %8 = memref.load %2[%7] : memref<?xi32>
        %9 = arith.index_cast %8 : i32 to index
        %10 = arith.cmpi eq, %arg6, %c0 : index
        %11 = arith.cmpi slt, %9, %arg6 : index
        %12 = arith.ori %10, %11 : i1
        %13 = scf.if %12 -> (f32) {
          %14 = arith.cmpi sge, %9, %c0 : index
          %15 = arith.cmpi slt, %9, %arg5 : index
          %16 = arith.andi %14, %15 : i1
          %17 = scf.if %16 -> (f32) {
            %18 = memref.load %3[%9, %arg8] : memref<?x3000xf32>
            scf.yield %18 : f32
          } else {
            %18 = arith.cmpi slt, %9, %c0 : index
            %19 = arith.cmpi sge, %9, %arg5 : index
            %20 = arith.ori %18, %19 : i1
            %21 = arith.select %20, %c1, %c0 : index
            %22 = arith.select %20, %9, %c0 : index
            %23 = arith.index_cast %21 : index to i64
            memref.store %23, %4[%c0] : memref<2xi64>
            %24 = arith.index_cast %22 : index to i64
            memref.store %24, %4[%c1] : memref<2xi64>
            scf.yield %cst : f32
          }
          scf.yield %17 : f32
        } else {
          scf.yield %cst : f32
        }
        moe.yield %13 : f32
      }
      moe.yield %5 : f32
    }
    return
  }
}
