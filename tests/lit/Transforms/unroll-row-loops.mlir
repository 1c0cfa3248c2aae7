// moe-unroll-row-loops (GPU): a loop along a row from a lane's offset (below its step) to a whole number of
// steps, marked moe.lane_loop by moe-lower-to-gpu, runs from 0 with the offset added in its body, and unrolls
// by the largest power of two that divides its steps and keeps at most 8 vector loads (plain or guarded) per
// lane in one step.
// @two_steps (C2 at Mixtral: 2 steps of 2048 along H = 4096, 2 gathered rows a step): fully, no loop left,
// the second step's loads at %h + 2048. @four_loads: 8 steps of 4 guarded loads: by 2, 4 steps left.
// Left alone, from the lane's offset still: @unmarked (no mark), @odd_steps (3 steps: no power of two above 1
// divides them), @no_loads (nothing to put in flight: a version that only reports failed checks). The mark is
// removed either way.
// RUN: moec-opt %s --moe-unroll-row-loops | FileCheck %s
// moe-lower-to-gpu marks the loop along C2's row at Mixtral's shape, and the pipeline unrolls it: the PTX of
// the version for 2 live experts stores the row's two steps without a branch back.
// RUN: moec emit moe_unpermute --target ptx --arch sm_90 --dtype bf16 --dim E=8 --dim K=2 --dim H=4096 --emit loops -o %t.loops
// RUN: FileCheck %s --check-prefix=LOOPS < %t.loops
// LOOPS-NOT: moe.lane_loop
// LOOPS:     arith.cmpi ule, %{{.*}}, %c2 : index
// LOOPS:     vector.store %{{.*}}, %{{.*}}[%block_id_x, %[[H0:.*]]] {alignment = 16 : i64}
// LOOPS:     %[[H1:.*]] = arith.addi %[[H0]], %c2048 : index
// LOOPS:     vector.store %{{.*}}, %{{.*}}[%block_id_x, %[[H1]]] {alignment = 16 : i64}
// LOOPS:     arith.cmpi ule, %{{.*}}, %c4 : index

// CHECK-LABEL: func.func @two_steps
// CHECK-NOT:   scf.for
// CHECK:       %[[A0:.*]] = arith.addi %arg3, %{{c0.*}} : index
// CHECK:       vector.load %{{.*}}[%arg4, %[[A0]]]
// CHECK:       vector.load %{{.*}}[%arg5, %[[A0]]]
// CHECK:       vector.store %{{.*}}, %{{.*}}[%[[A0]]]
// CHECK:       %[[I1:.*]] = arith.addi %{{c0.*}}, %{{.*}} : index
// CHECK:       %[[A1:.*]] = arith.addi %arg3, %[[I1]] : index
// CHECK:       vector.load %{{.*}}[%arg4, %[[A1]]]
// CHECK:       vector.load %{{.*}}[%arg5, %[[A1]]]
// CHECK:       vector.store %{{.*}}, %{{.*}}[%[[A1]]]
// CHECK-NOT:   moe.lane_loop
// CHECK:       return
func.func @two_steps(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %op: !llvm.ptr {llvm.noalias}, %rows: index,
                     %offset: index, %r0: index, %r1: index) {
  %c0 = arith.constant 0 : index
  %c2048 = arith.constant 2048 : index
  %c4096 = arith.constant 4096 : index
  %x = moe.view %xp[%rows, %c4096] : !llvm.ptr -> memref<?x4096xbf16>
  %out = moe.view %op[%c4096] : !llvm.ptr -> memref<4096xbf16>
  scf.for %h = %offset to %c4096 step %c2048 {
    %a = vector.load %x[%r0, %h] {alignment = 16 : i64} : memref<?x4096xbf16>, vector<8xbf16>
    %b = vector.load %x[%r1, %h] {alignment = 16 : i64} : memref<?x4096xbf16>, vector<8xbf16>
    %fa = arith.extf %a : vector<8xbf16> to vector<8xf32>
    %fb = arith.extf %b : vector<8xbf16> to vector<8xf32>
    %s = arith.addf %fa, %fb : vector<8xf32>
    %t = arith.truncf %s : vector<8xf32> to vector<8xbf16>
    vector.store %t, %out[%h] {alignment = 16 : i64} : memref<4096xbf16>, vector<8xbf16>
  } {moe.lane_loop}
  return
}

// CHECK-LABEL: func.func @four_loads
// CHECK:       scf.for %{{.*}} = %{{c0.*}} to %c16 step %c4 {
// CHECK-COUNT-8: moe.guarded_load
// CHECK-NOT:   moe.guarded_load
// CHECK:       }
// CHECK-NOT:   moe.lane_loop
// CHECK:       return
func.func @four_loads(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %rows: index, %live: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %x = moe.view %xp[%rows, %c16] : !llvm.ptr -> memref<?x16xbf16>
  scf.for %i = %c0 to %c16 step %c2 {
    %l0 = moe.guarded_load %x[%c0, %i] if %live readonly : memref<?x16xbf16>, vector<2xbf16>
    %l1 = moe.guarded_load %x[%c1, %i] if %live readonly : memref<?x16xbf16>, vector<2xbf16>
    %l2 = moe.guarded_load %x[%c0, %i] if %live readonly : memref<?x16xbf16>, vector<2xbf16>
    %l3 = moe.guarded_load %x[%c1, %i] if %live readonly : memref<?x16xbf16>, vector<2xbf16>
  } {moe.lane_loop}
  return
}

// CHECK-LABEL: func.func @unmarked
// CHECK:       scf.for
// CHECK-LABEL: func.func @odd_steps
// CHECK:       scf.for
// CHECK-NOT:   moe.lane_loop
// CHECK:       return
// CHECK-LABEL: func.func @no_loads
// CHECK:       scf.for %{{.*}} = %arg2 to %c4096 step %c2048 {
// CHECK-NOT:   moe.lane_loop
// CHECK:       return
func.func @unmarked(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %rows: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %x = moe.view %xp[%rows, %c2] : !llvm.ptr -> memref<?x2xbf16>
  scf.for %i = %c0 to %c2 step %c1 {
    %a = vector.load %x[%c0, %i] : memref<?x2xbf16>, vector<1xbf16>
  }
  return
}
func.func @odd_steps(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %rows: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %x = moe.view %xp[%rows, %c3] : !llvm.ptr -> memref<?x3xbf16>
  scf.for %i = %c0 to %c3 step %c1 {
    %a = vector.load %x[%c0, %i] : memref<?x3xbf16>, vector<1xbf16>
  } {moe.lane_loop}
  return
}
func.func @no_loads(%sp: !llvm.ptr {llvm.noalias}, %bad: i1, %offset: index) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c2048 = arith.constant 2048 : index
  %c4096 = arith.constant 4096 : index
  %status = moe.view %sp[%c2] : !llvm.ptr -> memref<2xi64>
  scf.for %h = %offset to %c4096 step %c2048 {
    scf.if %bad {
      %i = arith.index_cast %h : index to i64
      memref.store %i, %status[%c0] : memref<2xi64>
    }
  } {moe.lane_loop}
  return
}
