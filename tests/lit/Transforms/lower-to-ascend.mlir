// moe-lower-to-ascend on B2 (f32, H = 3000, top_k = 6; the input of plan-ascend.mlir), after moe-plan-ascend:
//   UB 64 KiB: the pipelined layout. The plan's buffers are placed in order, aligned, and viewed with their
//              element type; the core takes rows [core * floor(N / cores) + min(core, N % cores), + one more
//              for the first N % cores). Each row: the accumulators are set to 0, then each of the 6 steps
//              copies its gathered row into alternating copies of the double-buffered in. queue, under the
//              same conditions the body reads it under (active row, in range), and adds it to the
//              accumulators; the row goes to the out. buffer and one DataCopy writes it to grad_x's row.
//   UB 4 KiB:  6 chunks of 504 elements (the last one 480): the same per chunk, with the copies' offsets and
//              lengths the chunk's.
//   UB 32 KiB: the in-place layout: no out. buffer, the output is staged in the accumulators' bytes.
// RUN: moec-opt %S/plan-ascend.mlir --moe-plan-ascend="chip=ut ub-bytes=65536" --moe-lower-to-ascend --canonicalize --cse \
// RUN:   | FileCheck %s --check-prefix=UB64
// RUN: moec-opt %S/plan-ascend.mlir --moe-plan-ascend="chip=ut ub-bytes=4096" --moe-lower-to-ascend --canonicalize --cse \
// RUN:   | FileCheck %s --check-prefix=UB4
// RUN: moec-opt %S/plan-ascend.mlir --moe-plan-ascend="chip=ut ub-bytes=32768" --moe-lower-to-ascend --canonicalize --cse \
// RUN:   | FileCheck %s --check-prefix=UB32
// Without a plan there is nothing to lower to.
// RUN: not moec-opt %S/plan-ascend.mlir --moe-lower-to-ascend 2>&1 | FileCheck %s --check-prefix=NOPLAN

// UB64: func.func @moe_init_routing_v2_grad({{.*}}%[[RT:arg7]]: !llvm.ptr {moe.arg = #moe.arg<ascend_runtime>}, %[[CORE:arg8]]: index {moe.arg = #moe.arg<ascend_core>}, %[[CORES:arg9]]: index {moe.arg = #moe.arg<ascend_cores>})
// UB64: %[[X:.*]] = moe.view %arg0[%arg5, %c3000] : !llvm.ptr -> memref<?x3000xf32>
// UB64: %[[INRAW:.*]] = moe.ub_alloc %[[RT]], %[[CORE]] "in.grad_expanded_x" at 0 : memref<24000xi8, #moe.ub>
// UB64-NEXT: %[[IN:.*]] = memref.view %[[INRAW]][%c0][] : memref<24000xi8, #moe.ub> to memref<2x3000xf32, #moe.ub>
// UB64-NEXT: %[[OUTRAW:.*]] = moe.ub_alloc %[[RT]], %[[CORE]] "out.grad_x" at 24000 : memref<24000xi8, #moe.ub>
// UB64-NEXT: %[[OUT:.*]] = memref.view %[[OUTRAW]]
// UB64-NEXT: %[[ACCRAW:.*]] = moe.ub_alloc %[[RT]], %[[CORE]] "acc.f32" at 48000 : memref<12000xi8, #moe.ub>
// UB64-NEXT: %[[ACC:.*]] = memref.view %[[ACCRAW]][%c0][] : memref<12000xi8, #moe.ub> to memref<3000xf32, #moe.ub>
// UB64-NEXT: %[[BASE:.*]] = arith.divui %arg4, %[[CORES]]
// UB64-NEXT: %[[EXTRA:.*]] = arith.remui %arg4, %[[CORES]]
// UB64: scf.for %[[ROW:.*]] = %{{.*}} to %{{.*}} step %c1 {
// UB64: vector.store %{{.*}}, %[[ACC]][%{{.*}}] : memref<3000xf32, #moe.ub>, vector<8xf32>
// UB64: scf.for %[[K:.*]] = %c0 to %c6 step %c1 {
// UB64: %[[SLOT:.*]] = arith.remui %[[K]], %c2 : index
// UB64: scf.if
// UB64: scf.if
// UB64-NEXT: moe.data_copy %[[RT]], %[[CORE]], %[[X]][%{{.*}}, %c0] to %[[IN]][%[[SLOT]], %c0], %c3000
// UB64: vector.load %[[IN]][%[[SLOT]], %{{.*}}] : memref<2x3000xf32, #moe.ub>, vector<8xf32>
// UB64: vector.store %{{.*}}, %[[OUT]][%c0, %{{.*}}] : memref<2x3000xf32, #moe.ub>, vector<8xf32>
// UB64: moe.data_copy %[[RT]], %[[CORE]], %[[OUT]][%c0, %c0] to %{{.*}}[%[[ROW]], %c0], %c3000
// UB64-NEXT: moe.row_done %[[RT]], %[[CORE]], %[[ROW]] {ascend_plan = #moe.ascend_plan<chip = "ut"
// UB64: moe.ub_free %[[RT]], %[[CORE]] "in.grad_expanded_x"
// UB64-NEXT: moe.ub_free %[[RT]], %[[CORE]] "out.grad_x"
// UB64-NEXT: moe.ub_free %[[RT]], %[[CORE]] "acc.f32"

// UB4: scf.for %[[ROW:.*]] = %{{.*}} to %{{.*}} step %c1 {
// UB4-NEXT: scf.for %[[CHUNK:.*]] = %c0 to %c6 step %c1 {
// UB4-NEXT: %[[OFF:.*]] = arith.muli %[[CHUNK]], %c504 : index
// UB4-NEXT: %[[REST:.*]] = arith.subi %c3000, %[[OFF]] : index
// UB4-NEXT: %[[LEN:.*]] = arith.minsi %[[REST]], %c504 : index
// UB4: moe.data_copy %{{.*}}, %{{.*}}, %{{.*}}[%{{.*}}, %[[OFF]]] to %{{.*}}[%c0, %c0], %[[LEN]] : memref<?x3000xf32>, memref<1x504xf32, #moe.ub>
// UB4: moe.data_copy %{{.*}}, %{{.*}}, %{{.*}}[%c0, %c0] to %{{.*}}[%[[ROW]], %[[OFF]]], %[[LEN]] : memref<1x504xf32, #moe.ub>, memref<?x3000xf32>

// UB32-NOT: "out.grad_x"
// UB32: %[[ACCRAW:.*]] = moe.ub_alloc %{{.*}}, %{{.*}} "acc.f32" at 12000 : memref<12000xi8, #moe.ub>
// UB32-NEXT: %[[ACC:.*]] = memref.view %[[ACCRAW]][%c0][] : memref<12000xi8, #moe.ub> to memref<3000xf32, #moe.ub>
// UB32-NEXT: %[[STAGED:.*]] = memref.view %[[ACCRAW]][%c0][] : memref<12000xi8, #moe.ub> to memref<1x3000xf32, #moe.ub>
// UB32: moe.data_copy %{{.*}}, %{{.*}}, %[[STAGED]][%c0, %c0] to

// NOPLAN: error: 'moe.compute' op moe-lower-to-ascend: no #moe.ascend_plan (run moe-plan-ascend first)
