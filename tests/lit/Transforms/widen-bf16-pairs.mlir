// moe-widen-bf16-pairs: a loop that computes lane-wise from loaded bf16 rows widens each 32-bit word in
// place (the low bf16 shifted left by 16, the high one and'ed with 0xffff0000 = -65536), its lanes in the
// paired order (even elements, then odd); a shuffle puts a value back in order where it leaves: before a
// store, and after the loop for a carried sum. A loop whose shuffles would cost as much as its widenings
// save, or that mixes the widened lanes with a vector in the natural order, is left alone.
// RUN: moec-opt %s --moe-widen-bf16-pairs | FileCheck %s

// Two rows summed and stored as bf16: both loads widen in place, one vpermw-like shuffle before the store.
// CHECK-LABEL: func.func @sum_two_rows
// CHECK: scf.for
// CHECK:   %[[A:.*]] = vector.load %arg0[%{{.*}}, %{{.*}}] : memref<4x64xbf16>, vector<32xbf16>
// CHECK:   %[[AW:.*]] = vector.bitcast %[[A]] : vector<32xbf16> to vector<16xi32>
// CHECK:   %[[SIXTEEN:.*]] = arith.constant dense<16> : vector<16xi32>
// CHECK:   %[[AE:.*]] = arith.shli %[[AW]], %[[SIXTEEN]] : vector<16xi32>
// CHECK:   %[[HIGH:.*]] = arith.constant dense<-65536> : vector<16xi32>
// CHECK:   %[[AO:.*]] = arith.andi %[[AW]], %[[HIGH]] : vector<16xi32>
// CHECK:   %[[AEF:.*]] = arith.bitcast %[[AE]] : vector<16xi32> to vector<16xf32>
// CHECK:   %[[AOF:.*]] = arith.bitcast %[[AO]] : vector<16xi32> to vector<16xf32>
// CHECK:   %[[AP:.*]] = vector.shuffle %[[AEF]], %[[AOF]] [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xf32>, vector<16xf32>
// CHECK:   vector.bitcast
// CHECK:   %[[BP:.*]] = vector.shuffle
// CHECK-NOT: arith.extf
// CHECK:   %[[S:.*]] = arith.addf %[[AP]], %[[BP]] : vector<32xf32>
// CHECK:   %[[R:.*]] = arith.truncf %[[S]] : vector<32xf32> to vector<32xbf16>
// CHECK:   %[[N:.*]] = vector.shuffle %[[R]], %[[R]] [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31] : vector<32xbf16>, vector<32xbf16>
// CHECK:   vector.store %[[N]], %arg1
func.func @sum_two_rows(%x: memref<4x64xbf16>, %y: memref<64xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  scf.for %h = %c0 to %c64 step %c32 {
    %a = vector.load %x[%c0, %h] : memref<4x64xbf16>, vector<32xbf16>
    %fa = arith.extf %a : vector<32xbf16> to vector<32xf32>
    %b = vector.load %x[%c1, %h] : memref<4x64xbf16>, vector<32xbf16>
    %fb = arith.extf %b : vector<32xbf16> to vector<32xf32>
    %s = arith.addf %fa, %fb : vector<32xf32>
    %r = arith.truncf %s : vector<32xf32> to vector<32xbf16>
    vector.store %r, %y[%h] : memref<64xbf16>, vector<32xbf16>
  }
  return
}

// A dot product carried by the loop (its zero start is the same in every lane, and so is the broadcast
// scale): the sum leaves after the loop, put back in order before its reduction.
// CHECK-LABEL: func.func @dot
// CHECK: %[[SUM:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (vector<32xf32>)
// CHECK-NOT: arith.extf
// CHECK:   arith.mulf
// CHECK:   arith.mulf
// CHECK:   %[[NEXT:.*]] = arith.addf %[[ACC]], %{{.*}} : vector<32xf32>
// CHECK:   scf.yield %[[NEXT]]
// CHECK: %[[ORDERED:.*]] = vector.shuffle %[[SUM]], %[[SUM]] [0, 16, 1, 17, {{.*}}, 15, 31] : vector<32xf32>, vector<32xf32>
// CHECK: vector.reduction <add>, %[[ORDERED]]
func.func @dot(%x: memref<2x64xbf16>, %scale: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant dense<0.0> : vector<32xf32>
  %k = vector.broadcast %scale : f32 to vector<32xf32>
  %sum = scf.for %h = %c0 to %c64 step %c32 iter_args(%acc = %zero) -> (vector<32xf32>) {
    %a = vector.load %x[%c0, %h] : memref<2x64xbf16>, vector<32xbf16>
    %fa = arith.extf %a : vector<32xbf16> to vector<32xf32>
    %b = vector.load %x[%c1, %h] : memref<2x64xbf16>, vector<32xbf16>
    %fb = arith.extf %b : vector<32xbf16> to vector<32xf32>
    %p = arith.mulf %fa, %fb : vector<32xf32>
    %q = arith.mulf %p, %k : vector<32xf32>
    %next = arith.addf %acc, %q : vector<32xf32>
    scf.yield %next : vector<32xf32>
  }
  %r = vector.reduction <add>, %sum : vector<32xf32> into f32
  return %r : f32
}

// One widening stored as f32 (its shuffle would cost what it saves), and two added to an f32 row loaded in
// the natural order (they would save more than their bf16 store's shuffle costs): both loops stay as they are.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: vector.shuffle
// CHECK-NOT: vector.bitcast
// CHECK: arith.extf
// CHECK: arith.extf
// CHECK: arith.extf
// CHECK: return
func.func @left_alone(%x: memref<64xbf16>, %f: memref<64xf32>, %y: memref<64xf32>, %z: memref<64xbf16>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  scf.for %h = %c0 to %c64 step %c32 {
    %a = vector.load %x[%h] : memref<64xbf16>, vector<32xbf16>
    %fa = arith.extf %a : vector<32xbf16> to vector<32xf32>
    vector.store %fa, %y[%h] : memref<64xf32>, vector<32xf32>
  }
  scf.for %h = %c0 to %c64 step %c32 {
    %a = vector.load %x[%h] : memref<64xbf16>, vector<32xbf16>
    %fa = arith.extf %a : vector<32xbf16> to vector<32xf32>
    %b = vector.load %z[%h] : memref<64xbf16>, vector<32xbf16>
    %fb = arith.extf %b : vector<32xbf16> to vector<32xf32>
    %g = vector.load %f[%h] : memref<64xf32>, vector<32xf32>
    %s = arith.addf %fa, %fb : vector<32xf32>
    %t = arith.addf %s, %g : vector<32xf32>
    %r = arith.truncf %t : vector<32xf32> to vector<32xbf16>
    vector.store %r, %z[%h] : memref<64xbf16>, vector<32xbf16>
  }
  return
}
