// moe-specialize: every moe.param becomes its bound constant, constant view sizes become static dims,
// and mode conditions on drop_pad_mode fold away.
// RUN: moec-opt %s --moe-specialize="bind=H=7168,K=8,drop_pad_mode=0,flag=1" | FileCheck %s --check-prefixes=CHECK,DROPLESS
// RUN: moec-opt %s --moe-specialize="bind=H=7168,K=8,drop_pad_mode=1,flag=0" | FileCheck %s --check-prefixes=CHECK,PAD
// A param without a binding, and a malformed binding, are errors:
// RUN: not moec-opt %s --moe-specialize="bind=H=7168,K=8,flag=1" 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: not moec-opt %s --moe-specialize="bind=H=x" 2>&1 | FileCheck %s --check-prefix=BADBIND

// CHECK-NOT: moe.param
// CHECK-LABEL: func.func @moe_init_routing_v2_grad
// CHECK-SAME: (%[[G:.*]]: !llvm.ptr, %[[IDX:.*]]: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr, %[[N:.*]]: index, %[[R:.*]]: index, %[[ACT:.*]]: index)
// CHECK-DAG: %[[C7168:.*]] = arith.constant 7168 : index
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
// CHECK: %[[GV:.*]] = moe.view %[[G]][%[[R]], %[[C7168]]] : !llvm.ptr -> memref<?x7168xbf16>
// CHECK: %[[NK:.*]] = arith.muli %[[N]], %[[C8]] : index
// CHECK: %[[IV:.*]] = moe.view %[[IDX]][%[[NK]]] : !llvm.ptr -> memref<?xi32>
// CHECK: %[[OV:.*]] = moe.view %[[OUT]][%[[N]], %[[C7168]]] : !llvm.ptr -> memref<?x7168xbf16>
// CHECK: moe.compute %[[OV]][%[[N]], %[[C7168]]] : memref<?x7168xbf16> {
// CHECK: moe.sum %[[C8]] : f32 {
// CHECK: %[[RI:.*]] = arith.index_cast %{{.*}} : i32 to index
// The select on drop_pad_mode == 1 is gone; only the chosen branch's condition is left.
// CHECK-NOT: arith.select
// DROPLESS: %[[NOACT:.*]] = arith.cmpi eq, %[[ACT]], %{{.*}} : index
// DROPLESS: %[[LT:.*]] = arith.cmpi slt, %[[RI]], %[[ACT]] : index
// DROPLESS: %[[LIVE:.*]] = arith.ori %[[NOACT]], %[[LT]] : i1
// PAD-NOT: %[[ACT]]
// PAD: %[[LIVE:.*]] = arith.cmpi sge, %[[RI]], %{{.*}} : index
// CHECK-NOT: arith.select
// CHECK: scf.if %[[LIVE]] -> (f32) {
// CHECK: memref.load %[[GV]][%[[RI]], %{{.*}}] : memref<?x7168xbf16>
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: moe.yield %{{.*}} : bf16

// A bool (i1) param becomes an i1 constant and its select folds. A view user other than a
// load/store/compute keeps the old type through a memref.cast of the refined view.
// CHECK-LABEL: func.func @flag_and_cast
// CHECK-SAME: (%[[P:.*]]: !llvm.ptr, %[[N2:.*]]: index, %[[A:.*]]: index, %[[B:.*]]: index)
// CHECK: %[[V:.*]] = moe.view %[[P]][%[[N2]], %{{.*}}] : !llvm.ptr -> memref<?x7168xbf16>
// CHECK: %[[CAST:.*]] = memref.cast %[[V]] : memref<?x7168xbf16> to memref<?x?xbf16>
// DROPLESS: return %[[A]], %[[CAST]] : index, memref<?x?xbf16>
// PAD: return %[[B]], %[[CAST]] : index, memref<?x?xbf16>

// ERR: error: no value bound for static 'drop_pad_mode'
// ERR-NEXT: %mode = moe.param "drop_pad_mode" : index
// ERR-NEXT: ^

// BADBIND: error: moe-specialize: bad binding 'H=x', expected NAME=INT

module attributes {moe.dtype = "bf16", moe.op = "moe_init_routing_v2_grad"} {
  func.func @moe_init_routing_v2_grad(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %N: index, %R: index, %active: index) {
    %cst = arith.constant 0.000000e+00 : f32
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %H = moe.param "H" : index
    %K = moe.param "K" : index
    %mode = moe.param "drop_pad_mode" : index
    %g = moe.view %arg0[%R, %H] : !llvm.ptr -> memref<?x?xbf16>
    %NK = arith.muli %N, %K : index
    %idx = moe.view %arg1[%NK] : !llvm.ptr -> memref<?xi32>
    %out = moe.view %arg2[%N, %H] : !llvm.ptr -> memref<?x?xbf16>
    moe.compute %out[%N, %H] : memref<?x?xbf16> {
    ^bb0(%n: index, %h: index):
      %s = moe.sum %K : f32 {
      ^bb0(%k: index):
        %base = arith.muli %n, %K : index
        %j = arith.addi %base, %k : index
        %r32 = memref.load %idx[%j] : memref<?xi32>
        %r = arith.index_cast %r32 : i32 to index
        %is_pad = arith.cmpi eq, %mode, %c1 : index
        %ge0 = arith.cmpi sge, %r, %c0 : index
        %no_active = arith.cmpi eq, %active, %c0 : index
        %lt = arith.cmpi slt, %r, %active : index
        %act = arith.ori %no_active, %lt : i1
        %live = arith.select %is_pad, %ge0, %act : i1
        %v = scf.if %live -> (f32) {
          %x = memref.load %g[%r, %h] : memref<?x?xbf16>
          %xf = arith.extf %x : bf16 to f32
          scf.yield %xf : f32
        } else {
          scf.yield %cst : f32
        }
        moe.yield %v : f32
      }
      %b = arith.truncf %s : f32 to bf16
      moe.yield %b : bf16
    }
    return
  }

  func.func @flag_and_cast(%p: !llvm.ptr, %n: index, %a: index, %b: index) -> (index, memref<?x?xbf16>) {
    %flag = moe.param "flag" : i1
    %H = moe.param "H" : index
    %v = moe.view %p[%n, %H] : !llvm.ptr -> memref<?x?xbf16>
    %x = arith.select %flag, %a, %b : index
    return %x, %v : index, memref<?x?xbf16>
  }
}
