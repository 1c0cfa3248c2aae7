// moe-plan-ascend on rows that copy one input row unchanged (f32, H = 16384, a 196352 B UB): the output
// goes out from the input's buffer (CopiedRow), so the double-buffered input alone holds a whole row
// (2 x 64 KiB); with an out. buffer as well the pipelined layout would need two chunks.
//   @scatter_copy: A3 without probs; token t's row written to its slots' rows, under the slot's guard,
//     the row kept across a token's slots;
//   @guarded_copy: the gathered row's own bounds test yields 0.0 where it fails (A3 pad's token index):
//     the loop along the row stores that constant over the staged row, so the row is not kept;
//   @kept_guarded_copy: the same with a kept row, which a stored constant would spoil: an out. buffer;
//   @scaled: a row that is not a copy (x * 2): an out. buffer.
// RUN: moec-opt %s --moe-plan-ascend="chip=ut ub-bytes=196352" | FileCheck %s
// With the chip's costs (910B: 400 ns a DataCopy, 40 GB/s a core) the layout is the cheaper row's, not the
// one of fewer chunks: @scaled in one single-buffered chunk moves its 128 KiB after its 2 DataCopy set-ups
// (800 + 3277 ns), in two double-buffered chunks it overlaps them (max(1600, 3277) ns).
// RUN: moec-opt %s --moe-plan-ascend="chip=ut ub-bytes=196352 data-copy-ns=400 gm-gbps-per-core=40" | FileCheck %s --check-prefix=COST

// CHECK-LABEL: func.func @scatter_copy
// CHECK: chunk = 16384, chunks = 1, bufferCount = 2,
// CHECK-SAME: rowCopiesPerChunk = 1,
// CHECK-SAME: buffers = [#moe.ub_buffer<in, "x", elementBytes = 4, copies = 2, perRowOfPass = false, fixedBytesPerRow = 0, reuseDims = 1, copiesPerChunk = 1>, #moe.ub_buffer<idx, "index"
// CHECK-NOT: out.y
// CHECK-LABEL: func.func @guarded_copy
// CHECK: chunk = 16384, chunks = 1, bufferCount = 2,
// CHECK-SAME: buffers = [#moe.ub_buffer<in, "x", elementBytes = 4, copies = 2, perRowOfPass = false, fixedBytesPerRow = 0, reuseDims = 0, copiesPerChunk = 0>, #moe.ub_buffer<idx, "
// CHECK-NOT: out.y
// CHECK-LABEL: func.func @kept_guarded_copy
// CHECK: chunk = 16384, chunks = 1, bufferCount = 1,
// CHECK-SAME: #moe.ub_buffer<out, "y"
// CHECK-LABEL: func.func @scaled
// CHECK: chunk = 16384, chunks = 1, bufferCount = 1,
// CHECK-SAME: #moe.ub_buffer<out, "y"
// COST-LABEL: func.func @scatter_copy
// COST: chunk = 16384, chunks = 1, bufferCount = 2,
// COST-LABEL: func.func @scaled
// COST: chunk = 8192, chunks = 2, bufferCount = 2,

func.func @scatter_copy(%x: !llvm.ptr {moe.arg = #moe.arg<tensor, "x">}, %index: !llvm.ptr {moe.arg = #moe.arg<tensor, "index">}, %y: !llvm.ptr {moe.arg = #moe.arg<tensor, "y">}, %T: index, %R: index) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c16384 = arith.constant 16384 : index
  %cst = arith.constant 0.0 : f32
  %xv = moe.view %x[%T, %c16384] : !llvm.ptr -> memref<?x16384xf32>
  %iv = moe.view %index[%T, %c4] : !llvm.ptr -> memref<?x4xi32>
  %yv = moe.view %y[%R, %c16384] : !llvm.ptr -> memref<?x16384xf32>
  moe.scatter %yv[%T, %c4, %c16384] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x16384xf32> {
  ^bb0(%t: index, %k: index, %h: index):
    %r32 = memref.load %iv[%t, %k] : memref<?x4xi32>
    %r = arith.index_cast %r32 : i32 to index
    %routed = arith.cmpi sge, %r, %c0 : index
    %inside = arith.cmpi slt, %r, %R : index
    %live = arith.andi %routed, %inside : i1
    %v = scf.if %routed -> (f32) {
      %l = memref.load %xv[%t, %h] : memref<?x16384xf32>
      scf.yield %l : f32
    } else {
      scf.yield %cst : f32
    }
    moe.write %v to [%r, %h] if %live : f32
  }
  return
}

func.func @guarded_copy(%x: !llvm.ptr {moe.arg = #moe.arg<tensor, "x">}, %index: !llvm.ptr {moe.arg = #moe.arg<tensor, "index">}, %token: !llvm.ptr {moe.arg = #moe.arg<tensor, "token">}, %y: !llvm.ptr {moe.arg = #moe.arg<tensor, "y">}, %T: index, %R: index) {
  %c0 = arith.constant 0 : index
  %c16384 = arith.constant 16384 : index
  %cst = arith.constant 0.0 : f32
  %xv = moe.view %x[%T, %c16384] : !llvm.ptr -> memref<?x16384xf32>
  %iv = moe.view %index[%R] : !llvm.ptr -> memref<?xi32>
  %tv = moe.view %token[%R] : !llvm.ptr -> memref<?xi32>
  %yv = moe.view %y[%R, %c16384] : !llvm.ptr -> memref<?x16384xf32>
  moe.scatter %yv[%R, %c16384] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x16384xf32> {
  ^bb0(%i: index, %h: index):
    %r32 = memref.load %iv[%i] : memref<?xi32>
    %r = arith.index_cast %r32 : i32 to index
    %t32 = memref.load %tv[%i] : memref<?xi32>
    %t = arith.index_cast %t32 : i32 to index
    %routed = arith.cmpi sge, %r, %c0 : index
    %v = scf.if %routed -> (f32) {
      %inside = arith.cmpi ult, %t, %T : index
      %w = scf.if %inside -> (f32) {
        %l = memref.load %xv[%t, %h] : memref<?x16384xf32>
        scf.yield %l : f32
      } else {
        scf.yield %cst : f32
      }
      scf.yield %w : f32
    } else {
      scf.yield %cst : f32
    }
    moe.write %v to [%r, %h] if %routed : f32
  }
  return
}

func.func @kept_guarded_copy(%x: !llvm.ptr {moe.arg = #moe.arg<tensor, "x">}, %index: !llvm.ptr {moe.arg = #moe.arg<tensor, "index">}, %y: !llvm.ptr {moe.arg = #moe.arg<tensor, "y">}, %T: index, %R: index) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c16384 = arith.constant 16384 : index
  %cst = arith.constant 0.0 : f32
  %xv = moe.view %x[%T, %c16384] : !llvm.ptr -> memref<?x16384xf32>
  %iv = moe.view %index[%T, %c4] : !llvm.ptr -> memref<?x4xi32>
  %yv = moe.view %y[%R, %c16384] : !llvm.ptr -> memref<?x16384xf32>
  moe.scatter %yv[%T, %c4, %c16384] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x16384xf32> {
  ^bb0(%t: index, %k: index, %h: index):
    %r32 = memref.load %iv[%t, %k] : memref<?x4xi32>
    %r = arith.index_cast %r32 : i32 to index
    %routed = arith.cmpi sge, %r, %c0 : index
    %even = arith.cmpi eq, %k, %c0 : index
    %v = scf.if %even -> (f32) {
      %l = memref.load %xv[%t, %h] : memref<?x16384xf32>
      scf.yield %l : f32
    } else {
      scf.yield %cst : f32
    }
    moe.write %v to [%r, %h] if %routed : f32
  }
  return
}

func.func @scaled(%x: !llvm.ptr {moe.arg = #moe.arg<tensor, "x">}, %y: !llvm.ptr {moe.arg = #moe.arg<tensor, "y">}, %T: index) {
  %c16384 = arith.constant 16384 : index
  %two = arith.constant 2.0 : f32
  %xv = moe.view %x[%T, %c16384] : !llvm.ptr -> memref<?x16384xf32>
  %yv = moe.view %y[%T, %c16384] : !llvm.ptr -> memref<?x16384xf32>
  moe.compute %yv[%T, %c16384] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x16384xf32> {
  ^bb0(%t: index, %h: index):
    %l = memref.load %xv[%t, %h] : memref<?x16384xf32>
    %v = arith.mulf %l, %two : f32
    moe.yield %v : f32
  }
  return
}
