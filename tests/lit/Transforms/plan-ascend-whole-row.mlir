// moe-plan-ascend and moe-lower-to-ascend on A3 with probs (non-pad, E = 4, H = 3001, bf16): the dot
// products of token t's E points share its gradient row (a kept input, reuseDims = 1). On a 32 KiB UB the
// rows need three chunks; the kept row, held whole (6002 B, one copy), leaves the others three chunks as
// well, so the buffer holds every chunk of it and a token's row is copied once for its points, chunk by
// chunk, by the first live one: the DataCopy lands at the chunk's offset in the buffer, and the buffer
// counts as holding the row once its last chunk is in. On an 8 KiB UB the whole row leaves no room: the
// kept buffer holds a chunk, as before, and each point copies it again.
// (The input: `moec emit` of this op for the ascend target, --emit moe, with the plans taken out.)
// RUN: moec-opt %s --moe-plan-ascend="chip=ut ub-bytes=32768 max-copy-bytes=4096" | FileCheck %s --check-prefix=WHOLE
// RUN: moec-opt %s --moe-plan-ascend="chip=ut ub-bytes=8192 max-copy-bytes=4096" | FileCheck %s --check-prefix=CHUNK
// RUN: moec-opt %s --moe-plan-ascend="chip=ut ub-bytes=32768 max-copy-bytes=4096" --moe-lower-to-ascend \
// RUN:   | FileCheck %s --check-prefix=LOWER

// WHOLE-LABEL: func.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad
// WHOLE: rowLength = 3001, chunk = 1024, chunks = 3,
// WHOLE-SAME: #moe.ub_buffer<in, "unpermuted_tokens_grad", elementBytes = 2, copies = 1, perRowOfPass = false, fixedBytesPerRow = 0, reuseDims = 1, copiesPerChunk = 1, wholeRow = true>

// CHUNK-LABEL: func.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad
// CHUNK: rowLength = 3001, chunk = 512, chunks = 6,
// CHUNK-SAME: #moe.ub_buffer<in, "unpermuted_tokens_grad", elementBytes = 4, copies = 1, perRowOfPass = false, fixedBytesPerRow = 0, reuseDims = 1, copiesPerChunk = 1>
// CHUNK-NOT: wholeRow

// LOWER-LABEL: func.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad
// LOWER: moe.ub_alloc {{.*}} "in.unpermuted_tokens_grad" at {{[0-9]+}} : memref<6002xi8, #moe.ub>
// LOWER-NEXT: %[[BUF:[^ ]+]] = memref.view {{.*}} to memref<1x3001xbf16, #moe.ub>
// LOWER-NEXT: %[[HELD:[^ ]+]] = memref.alloca() : memref<1xindex>
// The chunk loop (the first two chunks; the last one is peeled below it):
// LOWER: scf.for %[[STEP:[^ ]+]] = {{.*}} -> (vector<32xf32>)
// LOWER: %[[OFFSET:[^ ]+]] = arith.muli %[[STEP]], %c1024
// LOWER: %[[HOLDS:[^ ]+]] = memref.load %[[HELD]]
// LOWER-NEXT: %[[FRESH:[^ ]+]] = arith.cmpi ne, %[[ROW:[^ ]+]], %[[HOLDS]]
// LOWER-NEXT: scf.if %[[FRESH]] {
// LOWER: arith.cmpi uge, {{.*}}, %c3001
// LOWER-NEXT: scf.if
// LOWER: memref.store %[[ROW]], %[[HELD]]
// LOWER: moe.data_copy {{.*}} to %[[BUF]][%{{.*}}, %[[OFFSET]]], {{.*}} : memref<?x3001xbf16>, memref<1x3001xbf16, #moe.ub>
// A load of the token row reads it at its place along the row, not within the chunk:
// LOWER: vector.load %[[BUF]][%{{.*}}, %[[ALONG:[^ ]+]]] : memref<1x3001xbf16, #moe.ub>, vector<32xbf16>

module attributes {moe.dtype = "bf16", moe.op = "moe_token_unpermute_with_routing_map_grad", moe.workspace = ["permuted_tokens_grad"]} {
  func.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "unpermuted_tokens_grad">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "out_index">, moe.unique}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permute_token_id">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "routing_map">}, %arg4: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permuted_tokens">}, %arg5: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "probs">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "permuted_tokens_grad">}, %arg7: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "probs_grad">}, %arg8: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg9: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<workspace>}, %arg10: index {moe.arg = #moe.arg<dim, "Tk">}, %arg11: index {moe.arg = #moe.arg<dim, "R">}) {
    %c0 = arith.constant 0 : index
    %0 = arith.index_cast %c0 : index to i64
    %1 = llvm.getelementptr %arg9[%0] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %2 = moe.view %1[%arg11] : !llvm.ptr -> memref<?xi8>
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 0.000000e+00 : bf16
    %c7 = arith.constant 7 : index
    %c6 = arith.constant 6 : index
    %c5 = arith.constant 5 : index
    %true = arith.constant true
    %c0_i32 = arith.constant 0 : i32
    %c3 = arith.constant 3 : index
    %c2 = arith.constant 2 : index
    %c0_i8 = arith.constant 0 : i8
    %c1 = arith.constant 1 : index
    %c1_i64 = arith.constant 1 : i64
    %c-9223372036854775808 = arith.constant -9223372036854775808 : index
    %c-1 = arith.constant -1 : index
    %c8 = arith.constant 8 : index
    %c3001 = arith.constant 3001 : index
    %c4 = arith.constant 4 : index
    %c0_1 = arith.constant 0 : index
    %3 = moe.view %arg8[%c8] : !llvm.ptr -> memref<8xi64>
    %4 = moe.view %arg7[%arg10, %c4] : !llvm.ptr -> memref<?x4xbf16>
    %5 = moe.view %arg3[%arg10, %c4] : !llvm.ptr -> memref<?x4xi8>
    %6 = moe.view %arg1[%arg11] : !llvm.ptr -> memref<?xi32>
    %7 = moe.view %arg6[%arg11, %c3001] : !llvm.ptr -> memref<?x3001xbf16>
    %8 = moe.view %arg4[%arg11, %c3001] : !llvm.ptr -> memref<?x3001xbf16>
    %9 = moe.view %arg0[%arg10, %c3001] : !llvm.ptr -> memref<?x3001xbf16>
    %10 = moe.view %arg5[%arg10, %c4] : !llvm.ptr -> memref<?x4xbf16>
    %11 = arith.cmpi eq, %arg10, %c0_1 : index
    %12 = arith.cmpi eq, %arg10, %c-1 : index
    %13 = arith.cmpi eq, %arg11, %c-9223372036854775808 : index
    %14 = arith.andi %12, %13 : i1
    %15 = arith.ori %11, %14 : i1
    scf.if %15 {
      memref.store %c1_i64, %3[%c0_1] : memref<8xi64>
      %18 = arith.index_cast %arg11 : index to i64
      memref.store %18, %3[%c1] : memref<8xi64>
    }
    %16 = arith.select %15, %c1, %arg10 : index
    %17 = arith.divsi %arg11, %16 : index
    moe.scatter %4[%arg10, %c4] {schedule = #moe.schedule<rowsPerBlock = 16, threads = 1, vector = 1, unroll = 8>} : memref<?x4xbf16> {
    ^bb0(%arg12: index, %arg13: index):
      %18 = moe.fold %arg13, %c0_1 : index {
      ^bb0(%arg14: index, %arg15: index):
        %36 = memref.load %5[%arg12, %arg14] : memref<?x4xi8>
        %37 = arith.cmpi ne, %36, %c0_i8 : i8
        %38 = arith.addi %arg15, %c1 : index
        %39 = arith.select %37, %38, %arg15 : index
        moe.yield %39 : index
      }
      %19 = memref.load %5[%arg12, %arg13] : memref<?x4xi8>
      %20 = arith.cmpi ne, %19, %c0_i8 : i8
      %21 = arith.cmpi slt, %18, %17 : index
      %22 = arith.andi %20, %21 : i1
      %23 = scf.if %22 -> (index) {
        %36 = arith.muli %arg12, %17 : index
        %37 = arith.addi %36, %18 : index
        %38 = arith.cmpi sge, %37, %c0_1 : index
        %39 = arith.cmpi slt, %37, %arg11 : index
        %40 = arith.andi %38, %39 : i1
        %41 = scf.if %40 -> (i32) {
          %43 = memref.load %6[%37] : memref<?xi32>
          scf.yield %43 : i32
        } else {
          %43 = arith.cmpi slt, %37, %c0_1 : index
          %44 = arith.cmpi sge, %37, %arg11 : index
          %45 = arith.ori %43, %44 : i1
          %46 = arith.select %45, %c1, %c0_1 : index
          %47 = arith.select %45, %37, %c0_1 : index
          %48 = arith.index_cast %46 : index to i64
          memref.store %48, %3[%c2] : memref<8xi64>
          %49 = arith.index_cast %47 : index to i64
          memref.store %49, %3[%c3] : memref<8xi64>
          scf.yield %c0_i32 : i32
        }
        %42 = arith.index_cast %41 : i32 to index
        scf.yield %42 : index
      } else {
        scf.yield %c-1 : index
      }
      %24 = arith.cmpi sge, %23, %c0_1 : index
      %25 = arith.cmpi sge, %23, %c0_1 : index
      %26 = arith.cmpi slt, %23, %arg11 : index
      %27 = arith.andi %25, %26 : i1
      %28 = arith.xori %27, %true : i1
      %29 = arith.andi %24, %28 : i1
      scf.if %29 {
        %36 = arith.cmpi slt, %23, %c0_1 : index
        %37 = arith.cmpi sge, %23, %arg11 : index
        %38 = arith.ori %36, %37 : i1
        %39 = arith.select %38, %c1, %c0_1 : index
        %40 = arith.select %38, %23, %c0_1 : index
        %41 = arith.index_cast %39 : index to i64
        memref.store %41, %3[%c4] : memref<8xi64>
        %42 = arith.index_cast %40 : index to i64
        memref.store %42, %3[%c5] : memref<8xi64>
      }
      %30 = arith.andi %24, %27 : i1
      %31 = arith.cmpi sge, %23, %c0_1 : index
      %32 = arith.cmpi ult, %23, %arg11 : index
      %33 = arith.andi %30, %32 : i1
      scf.if %33 {
        %c1_i8 = arith.constant 1 : i8
        memref.store %c1_i8, %2[%23] : memref<?xi8>
      }
      %34 = scf.if %31 -> (f32) {
        %36 = moe.sum %c3001 : f32 {
        ^bb0(%arg14: index):
          %37 = arith.cmpi sge, %23, %c0_1 : index
          %38 = arith.cmpi slt, %23, %arg11 : index
          %39 = arith.andi %37, %38 : i1
          %40 = scf.if %39 -> (bf16) {
            %50 = memref.load %8[%23, %arg14] : memref<?x3001xbf16>
            scf.yield %50 : bf16
          } else {
            %50 = arith.cmpi slt, %23, %c0_1 : index
            %51 = arith.cmpi sge, %23, %arg11 : index
            %52 = arith.ori %50, %51 : i1
            %53 = arith.select %52, %c1, %c0_1 : index
            %54 = arith.select %52, %23, %c0_1 : index
            %55 = arith.index_cast %53 : index to i64
            memref.store %55, %3[%c6] : memref<8xi64>
            %56 = arith.index_cast %54 : index to i64
            memref.store %56, %3[%c7] : memref<8xi64>
            scf.yield %cst_0 : bf16
          }
          %41 = arith.extf %40 : bf16 to f32
          %42 = memref.load %9[%arg12, %arg14] : memref<?x3001xbf16>
          %43 = arith.extf %42 : bf16 to f32
          %44 = arith.mulf %41, %43 : f32
          %45 = arith.extf %42 : bf16 to f32
          %46 = memref.load %10[%arg12, %arg13] : memref<?x4xbf16>
          %47 = arith.extf %46 : bf16 to f32
          %48 = arith.mulf %45, %47 : f32
          %49 = arith.truncf %48 : f32 to bf16
          moe.row_store %49 to %7[%23, %arg14] if %30 : bf16, memref<?x3001xbf16>
          moe.yield %44 : f32
        }
        scf.yield %36 : f32
      } else {
        scf.yield %cst : f32
      }
      %35 = arith.truncf %34 : f32 to bf16
      moe.write %35 to [%arg12, %arg13] : bf16
    }
    return
  }
  func.func @moe_token_unpermute_with_routing_map_grad__0_permuted_tokens_grad(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "unpermuted_tokens_grad">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "out_index">, moe.unique}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permute_token_id">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "routing_map">}, %arg4: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permuted_tokens">}, %arg5: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "probs">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "permuted_tokens_grad">}, %arg7: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "probs_grad">}, %arg8: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg9: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<workspace>}, %arg10: index {moe.arg = #moe.arg<dim, "Tk">}, %arg11: index {moe.arg = #moe.arg<dim, "R">}) {
    %c0 = arith.constant 0 : index
    %0 = arith.index_cast %c0 : index to i64
    %1 = llvm.getelementptr %arg9[%0] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %2 = moe.view %1[%arg11] : !llvm.ptr -> memref<?xi8>
    %cst = arith.constant 0.000000e+00 : bf16
    %c3001 = arith.constant 3001 : index
    %3 = moe.view %arg6[%arg11, %c3001] : !llvm.ptr -> memref<?x3001xbf16>
    moe.scatter %3[%arg11, %c3001] {schedule = #moe.schedule<rowsPerBlock = 525, threads = 1, vector = 16, unroll = 8>} : memref<?x3001xbf16> {
    ^bb0(%arg12: index, %arg13: index):
      %4 = memref.load %2[%arg12] {moe.row_invariant} : memref<?xi8>
      %c0_i8 = arith.constant {moe.row_invariant} 0 : i8
      %5 = arith.cmpi eq, %4, %c0_i8 {moe.row_invariant} : i8
      moe.write %cst to [%arg12, %arg13] if %5 {moe.row_guard} : bf16
    }
    return
  }
}
