// moe-streaming-stores (CPU): each vector.store marked moe.streamable = N (by moe-lower-to-loops: a store of a
// kernel output, N-aligned where the output's base pointer is) branches on one condition per output and N,
// computed once where the output is defined: the base pointer is N-aligned and the output holds at least
// 4 MiB. Where it holds, the store is non-temporal and N-aligned; elsewhere it is as it was. No mark is left.
// RUN: moec-opt %s --moe-streaming-stores | FileCheck %s
// Unmarked stores (the pass off, or stores it may not stream) are left alone:
// RUN: sed -e 's/, moe.streamable = [0-9]* : i64//' %s | moec-opt --moe-streaming-stores | FileCheck %s --check-prefix=UNMARKED
// UNMARKED-NOT: scf.if
// UNMARKED-NOT: nontemporal
// UNMARKED-NOT: extract_aligned_pointer

// Two stores to one output share its condition, computed right after its view: aligned to 64 bytes, and at
// least 2M bf16 elements (N * 4096).
// CHECK-LABEL: func.func @rows
// CHECK: %[[OUT:.*]] = moe.view %arg1
// CHECK-NEXT: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[OUT]] : memref<?x4096xbf16> -> index
// CHECK: %[[MIS:.*]] = arith.remui %[[BASE]], %c64{{.*}} : index
// CHECK: %[[ISALIGNED:.*]] = arith.cmpi eq, %[[MIS]], %{{.*}} : index
// CHECK: %[[ROWS:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x4096xbf16>
// CHECK: %[[ELEMENTS:.*]] = arith.muli %[[ROWS]], %c4096{{.*}} : index
// CHECK: %[[LARGE:.*]] = arith.cmpi uge, %[[ELEMENTS]], %c2097152{{.*}} : index
// CHECK: %[[STREAM:.*]] = arith.andi %[[ISALIGNED]], %[[LARGE]] : i1
// CHECK-NOT: extract_aligned_pointer
// CHECK: scf.for
// CHECK: scf.if %[[STREAM]] {
// CHECK-NEXT: vector.store %[[V:.*]], %[[OUT]][%{{.*}}, %{{.*}}] {alignment = 64 : i64, nontemporal = true} : memref<?x4096xbf16>, vector<32xbf16>
// CHECK-NEXT: } else {
// CHECK-NEXT: vector.store %[[V]], %[[OUT]][%{{.*}}, %{{.*}}] {alignment = 2 : i64} : memref<?x4096xbf16>, vector<32xbf16>
// CHECK-NEXT: }
// CHECK: scf.if %[[STREAM]] {
// CHECK-NEXT: vector.store %{{.*}} {alignment = 64 : i64, nontemporal = true}
// CHECK-NOT: moe.streamable
// CHECK: return

// An output that is a kernel argument (loop IR written by hand) gets its condition at the function's
// entry; a store that is already aligned keeps the larger alignment; 4 MiB of f32 is 1M elements.
// CHECK-LABEL: func.func @argument
// CHECK-NEXT: %[[BASE2:.*]] = memref.extract_aligned_pointer_as_index %arg0 : memref<?x64xf32> -> index
// CHECK: arith.cmpi uge, %{{.*}}, %c1048576{{.*}} : index
// CHECK: %[[STREAM2:.*]] = arith.andi
// CHECK: scf.if %[[STREAM2]] {
// CHECK-NEXT: vector.store {{.*}} {alignment = 64 : i64, nontemporal = true} : memref<?x64xf32>, vector<16xf32>
// CHECK-NEXT: } else {
// CHECK-NEXT: vector.store {{.*}} {alignment = 64 : i64} : memref<?x64xf32>, vector<16xf32>
// CHECK-NOT: moe.streamable

module {
  func.func @rows(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: index, %arg3: index, %arg4: index) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %c4096 = arith.constant 4096 : index
    %x = moe.view %arg0[%arg2, %c4096] : !llvm.ptr -> memref<?x4096xbf16>
    %out = moe.view %arg1[%arg2, %c4096] : !llvm.ptr -> memref<?x4096xbf16>
    scf.for %row = %arg3 to %arg4 step %c1 {
      scf.for %h = %c0 to %c4096 step %c32 {
        %v = vector.load %x[%row, %h] {alignment = 2 : i64} : memref<?x4096xbf16>, vector<32xbf16>
        vector.store %v, %out[%row, %h] {alignment = 2 : i64, moe.streamable = 64 : i64} : memref<?x4096xbf16>, vector<32xbf16>
      }
      %zero = arith.constant dense<0.0> : vector<32xbf16>
      vector.store %zero, %out[%row, %c0] {alignment = 2 : i64, moe.streamable = 64 : i64} : memref<?x4096xbf16>, vector<32xbf16>
    }
    return
  }

  func.func @argument(%out: memref<?x64xf32>, %row: index, %v: vector<16xf32>) {
    %c0 = arith.constant 0 : index
    vector.store %v, %out[%row, %c0] {alignment = 64 : i64, moe.streamable = 64 : i64} : memref<?x64xf32>, vector<16xf32>
    return
  }
}
