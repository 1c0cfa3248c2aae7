// moe-plan-ascend on A3 with probs (non-pad, E = 4, H = 16, bf16), three kernels:
//   __4_probs_grad: a dot product over H per (token, expert) point, so its rows are points; the dot runs
//     only for a point whose routing_map bit is set (guardedRows); token t's gradient row is the same for
//     its E points, so the UB keeps it (reuseDims = 1, one copy per token) and only the permuted row is
//     gathered per point; the probs_grad value goes out with the pass's other points;
//   __5_permuted_tokens_grad: a row per (token, expert), written through out_index only when routed,
//     with token t's gradient kept across its experts as well;
//   __0_permuted_tokens_grad: the fill of rows no slot references, skipped for the others (its row
//     guard), whose own rows go out a pass at a time.
// RUN: moec-opt %s --moe-plan-ascend="chip=ut" | FileCheck %s

// CHECK-LABEL: func.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad
// CHECK: ascend_plan = #moe.ascend_plan<chip = "ut", rowLength = 16, chunk = 16, chunks = 1,
// CHECK-SAME: pointRows = true, guardedRows = true, rowCopiesPerChunk = 1,
// CHECK-SAME: #moe.ub_buffer<in, "permuted_tokens", elementBytes = 2, copies = 2, perRowOfPass = false, fixedBytesPerRow = 0, reuseDims = 0, copiesPerChunk = 0>
// CHECK-SAME: #moe.ub_buffer<in, "unpermuted_tokens_grad", elementBytes = 2, copies = 2, perRowOfPass = false, fixedBytesPerRow = 0, reuseDims = 1, copiesPerChunk = 1>
// CHECK-SAME: #moe.ub_buffer<acc, "f32", elementBytes = 4
// CHECK-SAME: #moe.ub_buffer<out, "probs_grad", elementBytes = 0, copies = 1, perRowOfPass = true, fixedBytesPerRow = 2,

// CHECK-LABEL: func.func @moe_token_unpermute_with_routing_map_grad__5_permuted_tokens_grad
// CHECK: pointRows = false, guardedRows = true, rowCopiesPerChunk = 1,
// CHECK-SAME: #moe.ub_buffer<in, "unpermuted_tokens_grad", elementBytes = 2, copies = 2, perRowOfPass = false, fixedBytesPerRow = 0, reuseDims = 1, copiesPerChunk = 1>
// CHECK-SAME: #moe.ub_buffer<out, "permuted_tokens_grad", elementBytes = 2, copies = 2, perRowOfPass = false

// CHECK-LABEL: func.func @moe_token_unpermute_with_routing_map_grad__0_permuted_tokens_grad
// CHECK: guardedRows = true, rowCopiesPerChunk = 0, passCopiesPerChunk = 1,
// CHECK-SAME: #moe.ub_buffer<out, "permuted_tokens_grad", elementBytes = 2, copies = 2, perRowOfPass = true

module attributes {moe.dtype = "bf16", moe.op = "moe_token_unpermute_with_routing_map_grad", moe.workspace = ["permuted_tokens_grad"]} {
  func.func @moe_token_unpermute_with_routing_map_grad__4_probs_grad(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "unpermuted_tokens_grad">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "out_index">}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permute_token_id">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "routing_map">}, %arg4: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permuted_tokens">}, %arg5: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "probs">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "permuted_tokens_grad">}, %arg7: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "probs_grad">}, %arg8: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg9: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<workspace>}, %arg10: index {moe.arg = #moe.arg<dim, "Tk">}, %arg11: index {moe.arg = #moe.arg<dim, "R">}) {
    %alloca = memref.alloca() : memref<2xindex>
    %alloca_0 = memref.alloca() : memref<1xindex>
    %c-1 = arith.constant -1 : index
    %c0 = arith.constant 0 : index
    memref.store %c-1, %alloca[%c0] : memref<2xindex>
    %c1 = arith.constant 1 : index
    memref.store %c-1, %alloca[%c1] : memref<2xindex>
    %cst = arith.constant 0.000000e+00 : f32
    %cst_1 = arith.constant 0.000000e+00 : bf16
    %c5 = arith.constant 5 : index
    %c0_i32 = arith.constant 0 : i32
    %c3 = arith.constant 3 : index
    %c2 = arith.constant 2 : index
    %c0_i8 = arith.constant 0 : i8
    %c1_2 = arith.constant 1 : index
    %c1_i64 = arith.constant 1 : i64
    %c-9223372036854775808 = arith.constant -9223372036854775808 : index
    %c-1_3 = arith.constant -1 : index
    %c6 = arith.constant 6 : index
    %c16 = arith.constant 16 : index
    %c4 = arith.constant 4 : index
    %c0_4 = arith.constant 0 : index
    %0 = moe.view %arg8[%c6] : !llvm.ptr -> memref<6xi64>
    %1 = moe.view %arg7[%arg10, %c4] : !llvm.ptr -> memref<?x4xbf16>
    %2 = moe.view %arg3[%arg10, %c4] : !llvm.ptr -> memref<?x4xi8>
    %3 = moe.view %arg1[%arg11] : !llvm.ptr -> memref<?xi32>
    %4 = moe.view %arg4[%arg11, %c16] : !llvm.ptr -> memref<?x16xbf16>
    %5 = moe.view %arg0[%arg10, %c16] : !llvm.ptr -> memref<?x16xbf16>
    %6 = arith.cmpi eq, %arg10, %c0_4 : index
    %7 = arith.cmpi eq, %arg10, %c-1_3 : index
    %8 = arith.cmpi eq, %arg11, %c-9223372036854775808 : index
    %9 = arith.andi %7, %8 : i1
    %10 = arith.ori %6, %9 : i1
    scf.if %10 {
      memref.store %c1_i64, %0[%c0_4] : memref<6xi64>
      %13 = arith.index_cast %arg11 : index to i64
      memref.store %13, %0[%c1_2] : memref<6xi64>
    }
    %11 = arith.select %10, %c1_2, %arg10 : index
    %12 = arith.divsi %arg11, %11 : index
    moe.scatter %1[%arg10, %c4] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 1, unroll = 8>} : memref<?x4xbf16> {
    ^bb0(%arg12: index, %arg13: index):
      %c1_5 = arith.constant 1 : index
      %13 = arith.subi %arg13, %c1_5 : index
      %c0_6 = arith.constant 0 : index
      %14 = arith.cmpi sgt, %arg13, %c0_6 : index
      %c0_7 = arith.constant 0 : index
      %15 = memref.load %alloca[%c0_7] : memref<2xindex>
      %16 = arith.cmpi eq, %15, %arg12 : index
      %17 = arith.andi %14, %16 : i1
      %c1_8 = arith.constant 1 : index
      %18 = memref.load %alloca[%c1_8] : memref<2xindex>
      %19 = arith.cmpi eq, %18, %13 : index
      %20 = arith.andi %17, %19 : i1
      %c0_9 = arith.constant 0 : index
      %21 = memref.load %alloca_0[%c0_9] : memref<1xindex>
      %c0_10 = arith.constant 0 : index
      %22 = arith.select %20, %13, %c0_10 : index
      %23 = arith.subi %arg13, %22 : index
      %24 = arith.select %20, %21, %c0_4 : index
      %25 = moe.fold %23, %24 : index {
      ^bb0(%arg14: index, %arg15: index):
        %34 = arith.addi %22, %arg14 : index
        %35 = memref.load %2[%arg12, %34] : memref<?x4xi8>
        %36 = arith.cmpi ne, %35, %c0_i8 : i8
        %37 = arith.addi %arg15, %c1_2 : index
        %38 = arith.select %36, %37, %arg15 : index
        moe.yield %38 : index
      }
      %c0_11 = arith.constant 0 : index
      memref.store %arg12, %alloca[%c0_11] : memref<2xindex>
      %c1_12 = arith.constant 1 : index
      memref.store %arg13, %alloca[%c1_12] : memref<2xindex>
      %c0_13 = arith.constant 0 : index
      memref.store %25, %alloca_0[%c0_13] : memref<1xindex>
      %26 = memref.load %2[%arg12, %arg13] : memref<?x4xi8>
      %27 = arith.cmpi ne, %26, %c0_i8 : i8
      %28 = arith.cmpi slt, %25, %12 : index
      %29 = arith.andi %27, %28 : i1
      %30 = scf.if %29 -> (index) {
        %34 = arith.muli %arg12, %12 : index
        %35 = arith.addi %34, %25 : index
        %36 = arith.cmpi sge, %35, %c0_4 : index
        %37 = arith.cmpi slt, %35, %arg11 : index
        %38 = arith.andi %36, %37 : i1
        %39 = scf.if %38 -> (i32) {
          %41 = memref.load %3[%35] : memref<?xi32>
          scf.yield %41 : i32
        } else {
          %41 = arith.cmpi slt, %35, %c0_4 : index
          %42 = arith.cmpi sge, %35, %arg11 : index
          %43 = arith.ori %41, %42 : i1
          %44 = arith.select %43, %c1_2, %c0_4 : index
          %45 = arith.select %43, %35, %c0_4 : index
          %46 = arith.index_cast %44 : index to i64
          memref.store %46, %0[%c2] : memref<6xi64>
          %47 = arith.index_cast %45 : index to i64
          memref.store %47, %0[%c3] : memref<6xi64>
          scf.yield %c0_i32 : i32
        }
        %40 = arith.index_cast %39 : i32 to index
        scf.yield %40 : index
      } else {
        scf.yield %c-1_3 : index
      }
      %31 = arith.cmpi sge, %30, %c0_4 : index
      %32 = scf.if %31 -> (f32) {
        %34 = moe.sum %c16 : f32 {
        ^bb0(%arg14: index):
          %35 = arith.cmpi sge, %30, %c0_4 : index
          %36 = arith.cmpi slt, %30, %arg11 : index
          %37 = arith.andi %35, %36 : i1
          %38 = scf.if %37 -> (bf16) {
            %43 = memref.load %4[%30, %arg14] : memref<?x16xbf16>
            scf.yield %43 : bf16
          } else {
            %43 = arith.cmpi slt, %30, %c0_4 : index
            %44 = arith.cmpi sge, %30, %arg11 : index
            %45 = arith.ori %43, %44 : i1
            %46 = arith.select %45, %c1_2, %c0_4 : index
            %47 = arith.select %45, %30, %c0_4 : index
            %48 = arith.index_cast %46 : index to i64
            memref.store %48, %0[%c4] : memref<6xi64>
            %49 = arith.index_cast %47 : index to i64
            memref.store %49, %0[%c5] : memref<6xi64>
            scf.yield %cst_1 : bf16
          }
          %39 = arith.extf %38 : bf16 to f32
          %40 = memref.load %5[%arg12, %arg14] : memref<?x16xbf16>
          %41 = arith.extf %40 : bf16 to f32
          %42 = arith.mulf %39, %41 : f32
          moe.yield %42 : f32
        }
        scf.yield %34 : f32
      } else {
        scf.yield %cst : f32
      }
      %33 = arith.truncf %32 : f32 to bf16
      moe.write %33 to [%arg12, %arg13] : bf16
    }
    return
  }
  func.func @moe_token_unpermute_with_routing_map_grad__5_permuted_tokens_grad(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "unpermuted_tokens_grad">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "out_index">}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permute_token_id">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "routing_map">}, %arg4: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permuted_tokens">}, %arg5: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "probs">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "permuted_tokens_grad">}, %arg7: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "probs_grad">}, %arg8: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg9: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<workspace>}, %arg10: index {moe.arg = #moe.arg<dim, "Tk">}, %arg11: index {moe.arg = #moe.arg<dim, "R">}) {
    %alloca = memref.alloca() : memref<2xindex>
    %alloca_0 = memref.alloca() : memref<1xindex>
    %c-1 = arith.constant -1 : index
    %c0 = arith.constant 0 : index
    memref.store %c-1, %alloca[%c0] : memref<2xindex>
    %c1 = arith.constant 1 : index
    memref.store %c-1, %alloca[%c1] : memref<2xindex>
    %c0_1 = arith.constant 0 : index
    %0 = arith.index_cast %c0_1 : index to i64
    %1 = llvm.getelementptr %arg9[%0] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %2 = moe.view %1[%arg11] : !llvm.ptr -> memref<?xi8>
    %c5 = arith.constant 5 : index
    %cst = arith.constant 0.000000e+00 : bf16
    %true = arith.constant true
    %c0_i32 = arith.constant 0 : i32
    %c3 = arith.constant 3 : index
    %c2 = arith.constant 2 : index
    %c0_i8 = arith.constant 0 : i8
    %c1_2 = arith.constant 1 : index
    %c1_i64 = arith.constant 1 : i64
    %c-9223372036854775808 = arith.constant -9223372036854775808 : index
    %c-1_3 = arith.constant -1 : index
    %c6 = arith.constant 6 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %c0_4 = arith.constant 0 : index
    %3 = moe.view %arg8[%c6] : !llvm.ptr -> memref<6xi64>
    %4 = moe.view %arg6[%arg11, %c16] : !llvm.ptr -> memref<?x16xbf16>
    %5 = moe.view %arg3[%arg10, %c4] : !llvm.ptr -> memref<?x4xi8>
    %6 = moe.view %arg1[%arg11] : !llvm.ptr -> memref<?xi32>
    %7 = moe.view %arg0[%arg10, %c16] : !llvm.ptr -> memref<?x16xbf16>
    %8 = moe.view %arg5[%arg10, %c4] : !llvm.ptr -> memref<?x4xbf16>
    %9 = arith.cmpi eq, %arg10, %c0_4 : index
    %10 = arith.cmpi eq, %arg10, %c-1_3 : index
    %11 = arith.cmpi eq, %arg11, %c-9223372036854775808 : index
    %12 = arith.andi %10, %11 : i1
    %13 = arith.ori %9, %12 : i1
    scf.if %13 {
      memref.store %c1_i64, %3[%c0_4] : memref<6xi64>
      %16 = arith.index_cast %arg11 : index to i64
      memref.store %16, %3[%c1_2] : memref<6xi64>
    }
    %14 = arith.select %13, %c1_2, %arg10 : index
    %15 = arith.divsi %arg11, %14 : index
    moe.scatter %4[%arg10, %c4, %c16] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x16xbf16> {
    ^bb0(%arg12: index, %arg13: index, %arg14: index):
      %c1_5 = arith.constant {moe.row_invariant} 1 : index
      %16 = arith.subi %arg13, %c1_5 {moe.row_invariant} : index
      %c0_6 = arith.constant {moe.row_invariant} 0 : index
      %17 = arith.cmpi sgt, %arg13, %c0_6 {moe.row_invariant} : index
      %c0_7 = arith.constant {moe.row_invariant} 0 : index
      %18 = memref.load %alloca[%c0_7] {moe.row_invariant} : memref<2xindex>
      %19 = arith.cmpi eq, %18, %arg12 {moe.row_invariant} : index
      %20 = arith.andi %17, %19 {moe.row_invariant} : i1
      %c1_8 = arith.constant {moe.row_invariant} 1 : index
      %21 = memref.load %alloca[%c1_8] {moe.row_invariant} : memref<2xindex>
      %22 = arith.cmpi eq, %21, %16 {moe.row_invariant} : index
      %23 = arith.andi %20, %22 {moe.row_invariant} : i1
      %c0_9 = arith.constant {moe.row_invariant} 0 : index
      %24 = memref.load %alloca_0[%c0_9] {moe.row_invariant} : memref<1xindex>
      %c0_10 = arith.constant {moe.row_invariant} 0 : index
      %25 = arith.select %23, %16, %c0_10 {moe.row_invariant} : index
      %26 = arith.subi %arg13, %25 {moe.row_invariant} : index
      %27 = arith.select %23, %24, %c0_4 {moe.row_invariant} : index
      %28 = moe.fold %26, %27 {moe.row_invariant} : index {
      ^bb0(%arg15: index, %arg16: index):
        %45 = arith.addi %25, %arg15 : index
        %46 = memref.load %5[%arg12, %45] : memref<?x4xi8>
        %47 = arith.cmpi ne, %46, %c0_i8 : i8
        %48 = arith.addi %arg16, %c1_2 : index
        %49 = arith.select %47, %48, %arg16 : index
        moe.yield %49 : index
      }
      %c0_11 = arith.constant {moe.row_invariant} 0 : index
      memref.store %arg12, %alloca[%c0_11] {moe.row_invariant} : memref<2xindex>
      %c1_12 = arith.constant {moe.row_invariant} 1 : index
      memref.store %arg13, %alloca[%c1_12] {moe.row_invariant} : memref<2xindex>
      %c0_13 = arith.constant {moe.row_invariant} 0 : index
      memref.store %28, %alloca_0[%c0_13] {moe.row_invariant} : memref<1xindex>
      %29 = memref.load %5[%arg12, %arg13] {moe.row_invariant} : memref<?x4xi8>
      %30 = arith.cmpi ne, %29, %c0_i8 {moe.row_invariant} : i8
      %31 = arith.cmpi slt, %28, %15 {moe.row_invariant} : index
      %32 = arith.andi %30, %31 {moe.row_invariant} : i1
      %33 = scf.if %32 -> (index) {
        %45 = arith.muli %arg12, %15 : index
        %46 = arith.addi %45, %28 : index
        %47 = arith.cmpi sge, %46, %c0_4 : index
        %48 = arith.cmpi slt, %46, %arg11 : index
        %49 = arith.andi %47, %48 : i1
        %50 = scf.if %49 -> (i32) {
          %52 = memref.load %6[%46] : memref<?xi32>
          scf.yield %52 : i32
        } else {
          %52 = arith.cmpi slt, %46, %c0_4 : index
          %53 = arith.cmpi sge, %46, %arg11 : index
          %54 = arith.ori %52, %53 : i1
          %55 = arith.select %54, %c1_2, %c0_4 : index
          %56 = arith.select %54, %46, %c0_4 : index
          %57 = arith.index_cast %55 : index to i64
          memref.store %57, %3[%c2] : memref<6xi64>
          %58 = arith.index_cast %56 : index to i64
          memref.store %58, %3[%c3] : memref<6xi64>
          scf.yield %c0_i32 : i32
        }
        %51 = arith.index_cast %50 : i32 to index
        scf.yield %51 : index
      } else {
        scf.yield %c-1_3 : index
      } {moe.row_invariant}
      %34 = arith.cmpi sge, %33, %c0_4 {moe.row_invariant} : index
      %35 = arith.select %34, %33, %c0_4 {moe.row_invariant} : index
      %36 = scf.if %34 -> (bf16) {
        %45 = memref.load %7[%arg12, %arg14] : memref<?x16xbf16>
        %46 = arith.extf %45 : bf16 to f32
        %47 = memref.load %8[%arg12, %arg13] : memref<?x4xbf16>
        %48 = arith.extf %47 : bf16 to f32
        %49 = arith.mulf %46, %48 : f32
        %50 = arith.truncf %49 : f32 to bf16
        scf.yield %50 : bf16
      } else {
        scf.yield %cst : bf16
      }
      %37 = arith.cmpi sge, %35, %c0_4 {moe.row_invariant} : index
      %38 = arith.cmpi slt, %35, %arg11 {moe.row_invariant} : index
      %39 = arith.andi %37, %38 {moe.row_invariant} : i1
      %40 = arith.xori %39, %true {moe.row_invariant} : i1
      %41 = arith.andi %34, %40 {moe.row_invariant} : i1
      scf.if %41 {
        %45 = arith.cmpi slt, %35, %c0_4 : index
        %46 = arith.cmpi sge, %35, %arg11 : index
        %47 = arith.ori %45, %46 : i1
        %48 = arith.select %47, %c1_2, %c0_4 : index
        %49 = arith.select %47, %35, %c0_4 : index
        %50 = arith.index_cast %48 : index to i64
        memref.store %50, %3[%c4] : memref<6xi64>
        %51 = arith.index_cast %49 : index to i64
        memref.store %51, %3[%c5] : memref<6xi64>
      } {moe.row_invariant}
      %42 = arith.andi %34, %39 {moe.row_invariant} : i1
      %43 = arith.cmpi ult, %35, %arg11 {moe.row_invariant} : index
      %44 = arith.andi %42, %43 {moe.row_invariant} : i1
      scf.if %44 {
        %c1_i8 = arith.constant 1 : i8
        memref.store %c1_i8, %2[%35] : memref<?xi8>
      } {moe.row_invariant}
      moe.write %36 to [%35, %arg14] if %42 {moe.row_guard} : bf16
    }
    return
  }
  func.func @moe_token_unpermute_with_routing_map_grad__0_permuted_tokens_grad(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "unpermuted_tokens_grad">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "out_index">}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permute_token_id">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "routing_map">}, %arg4: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "permuted_tokens">}, %arg5: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "probs">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "permuted_tokens_grad">}, %arg7: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "probs_grad">}, %arg8: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg9: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<workspace>}, %arg10: index {moe.arg = #moe.arg<dim, "Tk">}, %arg11: index {moe.arg = #moe.arg<dim, "R">}) {
    %c0 = arith.constant 0 : index
    %0 = arith.index_cast %c0 : index to i64
    %1 = llvm.getelementptr %arg9[%0] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %2 = moe.view %1[%arg11] : !llvm.ptr -> memref<?xi8>
    %cst = arith.constant 0.000000e+00 : bf16
    %c16 = arith.constant 16 : index
    %3 = moe.view %arg6[%arg11, %c16] : !llvm.ptr -> memref<?x16xbf16>
    moe.scatter %3[%arg11, %c16] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x16xbf16> {
    ^bb0(%arg12: index, %arg13: index):
      %4 = memref.load %2[%arg12] {moe.row_invariant} : memref<?xi8>
      %c0_i8 = arith.constant {moe.row_invariant} 0 : i8
      %5 = arith.cmpi eq, %4, %c0_i8 {moe.row_invariant} : i8
      moe.write %cst to [%arg12, %arg13] if %5 {moe.row_guard} : bf16
    }
    return
  }
}
