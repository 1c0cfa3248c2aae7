// Every moe op and #moe.schedule prints in a form that parses back to the same IR.
// RUN: moec-opt %s | moec-opt | FileCheck %s
// RUN: moec-opt %s --mlir-print-op-generic | moec-opt | FileCheck %s

// CHECK-LABEL: func.func @kernel
// CHECK-SAME: (%[[G:.*]]: !llvm.ptr, %[[IDX:.*]]: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr, %[[N:.*]]: index, %[[R:.*]]: index)
func.func @kernel(%g: !llvm.ptr, %idx: !llvm.ptr, %out: !llvm.ptr, %N: index, %R: index) {
  // CHECK: %[[H:.*]] = moe.param "H" : index
  // CHECK: %[[K:.*]] = moe.param "K" : index
  // CHECK: moe.param "flag" : i1
  %H = moe.param "H" : index
  %K = moe.param "K" : index
  %flag = moe.param "flag" : i1
  // CHECK: %[[GV:.*]] = moe.view %[[G]][%[[R]], %[[H]]] : !llvm.ptr -> memref<?x?xbf16>
  %gv = moe.view %g[%R, %H] : !llvm.ptr -> memref<?x?xbf16>
  %NK = arith.muli %N, %K : index
  // CHECK: %[[IV:.*]] = moe.view %[[IDX]][%{{.*}}] : !llvm.ptr -> memref<?xi32>
  %iv = moe.view %idx[%NK] : !llvm.ptr -> memref<?xi32>
  // CHECK: %[[OV:.*]] = moe.view %[[OUT]][%[[N]], %[[H]]] : !llvm.ptr -> memref<?x?xbf16>
  %ov = moe.view %out[%N, %H] : !llvm.ptr -> memref<?x?xbf16>
  // CHECK: moe.compute %[[OV]][%[[N]], %[[H]]] : memref<?x?xbf16> {
  // CHECK-NEXT: ^bb0(%[[n:.*]]: index, %[[h:.*]]: index):
  moe.compute %ov[%N, %H] : memref<?x?xbf16> {
  ^bb0(%n: index, %h: index):
    // CHECK: %[[S:.*]] = moe.sum %[[K]] : f32 {
    // CHECK-NEXT: ^bb0(%[[k:.*]]: index):
    %s = moe.sum %K : f32 {
    ^bb0(%k: index):
      %base = arith.muli %n, %K : index
      %j = arith.addi %base, %k : index
      %r32 = memref.load %iv[%j] : memref<?xi32>
      %r = arith.index_cast %r32 : i32 to index
      %x = memref.load %gv[%r, %h] : memref<?x?xbf16>
      %xf = arith.extf %x : bf16 to f32
      // CHECK: moe.row_store %{{.*}} to %[[GV]][%[[n]], %[[k]]] if %{{.*}} : bf16, memref<?x?xbf16>
      moe.row_store %x to %gv[%n, %k] if %flag : bf16, memref<?x?xbf16>
      // CHECK: moe.yield %{{.*}} : f32
      moe.yield %xf : f32
    }
    %b = arith.truncf %s : f32 to bf16
    // CHECK: %[[B:.*]] = arith.truncf %[[S]] : f32 to bf16
    // CHECK-NEXT: moe.yield %[[B]] : bf16
    moe.yield %b : bf16
  }
  return
}

// A static view and a scheduled compute; the schedule keeps all four fields in order.
// CHECK-LABEL: func.func @scheduled
// CHECK: moe.view %{{.*}}[%{{.*}}, %{{.*}}] : !llvm.ptr -> memref<?x7168xf16>
// CHECK: moe.compute %{{.*}}[%{{.*}}, %{{.*}}] {schedule = #moe.schedule<rowsPerBlock = 2, threads = 64, vector = 8, unroll = 4>} : memref<?x7168xf16> {
// CHECK: moe.yield %{{.*}} : f16
func.func @scheduled(%out: !llvm.ptr, %N: index) {
  %c7168 = arith.constant 7168 : index
  %cst = arith.constant 1.5 : f16
  %ov = moe.view %out[%N, %c7168] : !llvm.ptr -> memref<?x7168xf16>
  moe.compute %ov[%N, %c7168] {schedule = #moe.schedule<rowsPerBlock = 2, threads = 64, vector = 8, unroll = 4>} : memref<?x7168xf16> {
  ^bb0(%n: index, %h: index):
    moe.yield %cst : f16
  }
  return
}

// A rank-1 and a rank-3 compute, and a 0-d view.
// CHECK-LABEL: func.func @ranks
// CHECK: moe.view %{{.*}}[] : !llvm.ptr -> memref<f32>
// CHECK: moe.compute %{{.*}}[%{{.*}}] : memref<?xi32> {
// CHECK-NEXT: ^bb0(%{{.*}}: index):
// CHECK: moe.compute %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x4x8xf32> {
// CHECK-NEXT: ^bb0(%{{.*}}: index, %{{.*}}: index, %{{.*}}: index):
func.func @ranks(%p: !llvm.ptr, %q: !llvm.ptr, %s: !llvm.ptr, %N: index) {
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %sv = moe.view %s[] : !llvm.ptr -> memref<f32>
  %pv = moe.view %p[%N] : !llvm.ptr -> memref<?xi32>
  moe.compute %pv[%N] : memref<?xi32> {
  ^bb0(%i: index):
    %v = arith.index_cast %i : index to i32
    moe.yield %v : i32
  }
  %qv = moe.view %q[%N, %c4, %c8] : !llvm.ptr -> memref<?x4x8xf32>
  moe.compute %qv[%N, %c4, %c8] : memref<?x4x8xf32> {
  ^bb0(%a: index, %b: index, %c: index):
    %v = memref.load %sv[] : memref<f32>
    moe.yield %v : f32
  }
  return
}

// CHECK-LABEL: func.func @guarded_loads
// CHECK: moe.guarded_load %{{.*}}[%{{.*}}, %{{.*}}] if %{{.*}} readonly : memref<?x64xbf16>, vector<8xbf16>
// CHECK: moe.guarded_load %{{.*}}[%{{.*}}, %{{.*}}] if %{{.*}} : memref<?x64xf32>, f32
// CHECK: moe.guarded_load %{{.*}}[%{{.*}}, %{{.*}}] if %{{.*}} readonly : memref<?x64xbf16>, bf16
// CHECK: moe.guarded_store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] if %{{.*}} : memref<?x64xbf16>, vector<8xbf16>
func.func @guarded_loads(%x: memref<?x64xbf16>, %y: memref<?x64xf32>, %i: index, %p: i1) {
  %a = moe.guarded_load %x[%i, %i] if %p readonly : memref<?x64xbf16>, vector<8xbf16>
  %b = moe.guarded_load %y[%i, %i] if %p : memref<?x64xf32>, f32
  %c = moe.guarded_load %x[%i, %i] if %p readonly : memref<?x64xbf16>, bf16
  moe.guarded_store %a, %x[%i, %i] if %p : memref<?x64xbf16>, vector<8xbf16>
  return
}
