// moe-expand-unchecked-roundings: a marked rounding to bf16 read back as f32 becomes arith-expand-ops'
// round-to-nearest-even on the f32 bits, kept in f32 and without the NaN select; an unmarked one is left
// to arith-expand-ops, and a marked one that something other than its widening reads keeps the truncf
// for that reader (unmarked).
// RUN: moec-opt %s --moe-expand-unchecked-roundings | FileCheck %s
// RUN: moec-opt %s --moe-expand-unchecked-roundings --arith-expand="include-bf16=true" | FileCheck %s --check-prefix=EXPANDED

// CHECK-LABEL: func.func @marked
// CHECK-NOT: arith.truncf
// Bit 16 (the kept part's lowest bit) picks the bias: 0x8000 where it is set, 0x7fff where not; then the
// mask 0xffff0000 (-65536).
// CHECK: %[[BITS:.*]] = arith.bitcast %arg0 : vector<16xf32> to vector<16xi32>
// CHECK: %[[C10000:.*]] = arith.constant dense<65536> : vector<16xi32>
// CHECK: %[[BIT16:.*]] = arith.andi %[[BITS]], %[[C10000]] : vector<16xi32>
// CHECK: %[[ZERO:.*]] = arith.constant dense<0> : vector<16xi32>
// CHECK: %[[ODD:.*]] = arith.cmpi ne, %[[BIT16]], %[[ZERO]] : vector<16xi32>
// CHECK: %[[C8000:.*]] = arith.constant dense<32768> : vector<16xi32>
// CHECK: %[[UP:.*]] = arith.addi %[[BITS]], %[[C8000]] : vector<16xi32>
// CHECK: %[[C7FFF:.*]] = arith.constant dense<32767> : vector<16xi32>
// CHECK: %[[DOWN:.*]] = arith.addi %[[BITS]], %[[C7FFF]] : vector<16xi32>
// CHECK: %[[BIASED:.*]] = arith.select %[[ODD]], %[[UP]], %[[DOWN]] : vector<16xi1>, vector<16xi32>
// CHECK: %[[MASK:.*]] = arith.constant dense<-65536> : vector<16xi32>
// CHECK: %[[ROUNDED:.*]] = arith.andi %[[BIASED]], %[[MASK]] : vector<16xi32>
// CHECK: %[[BACK:.*]] = arith.bitcast %[[ROUNDED]] : vector<16xi32> to vector<16xf32>
// CHECK: return %[[BACK]]
// No NaN test is left once arith-expand-ops has run: no float compare, and no select but the bias's.
// EXPANDED-LABEL: func.func @marked
// EXPANDED-NOT: arith.cmpf
// EXPANDED: arith.select %{{.*}} : vector<16xi1>, vector<16xi32>
// EXPANDED-NOT: arith.select
// EXPANDED: return
func.func @marked(%y: vector<16xf32>) -> vector<16xf32> {
  %t = arith.truncf %y {moe.nan_unchecked} : vector<16xf32> to vector<16xbf16>
  %w = arith.extf %t : vector<16xbf16> to vector<16xf32>
  return %w : vector<16xf32>
}

// A scalar one.
// CHECK-LABEL: func.func @scalar
// CHECK: arith.bitcast %arg0 : f32 to i32
// CHECK: arith.bitcast %{{.*}} : i32 to f32
// CHECK-NOT: arith.truncf
func.func @scalar(%y: f32) -> f32 {
  %t = arith.truncf %y {moe.nan_unchecked} : f32 to bf16
  %w = arith.extf %t : bf16 to f32
  return %w : f32
}

// Unmarked: left to arith-expand-ops, whose expansion tests for NaN.
// CHECK-LABEL: func.func @unmarked
// CHECK: %[[T:.*]] = arith.truncf %arg0 : vector<16xf32> to vector<16xbf16>
// CHECK: arith.extf %[[T]]
// EXPANDED-LABEL: func.func @unmarked
// EXPANDED: arith.cmpf
// EXPANDED: arith.select
func.func @unmarked(%y: vector<16xf32>) -> vector<16xf32> {
  %t = arith.truncf %y : vector<16xf32> to vector<16xbf16>
  %w = arith.extf %t : vector<16xbf16> to vector<16xf32>
  return %w : vector<16xf32>
}

// A marked rounding also returned as bf16: the widening is rewritten, the truncf stays for the bf16 reader,
// no longer marked.
// CHECK-LABEL: func.func @read_as_bf16
// CHECK: %[[T:.*]] = arith.truncf %arg0 : f32 to bf16
// CHECK-NOT: moe.nan_unchecked
// CHECK: %[[W:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK: return %[[W]], %[[T]] : f32, bf16
func.func @read_as_bf16(%y: f32) -> (f32, bf16) {
  %t = arith.truncf %y {moe.nan_unchecked} : f32 to bf16
  %w = arith.extf %t : bf16 to f32
  return %w, %t : f32, bf16
}

// A rounding of a value whose low 16 bits are zero is the identity: a widened bf16 value plus zero (the
// first step of an unrolled fold from 0.0), through a select and a sign change. The widening reads the sum.
// CHECK-LABEL: func.func @exact
// CHECK: %[[W:.*]] = arith.extf %arg0 : vector<16xbf16> to vector<16xf32>
// CHECK: %[[S:.*]] = arith.addf %[[W]], %{{.*}} : vector<16xf32>
// CHECK: %[[N:.*]] = arith.negf %[[S]] : vector<16xf32>
// CHECK: %[[P:.*]] = arith.select %arg1, %[[S]], %[[N]] : vector<16xi1>, vector<16xf32>
// CHECK-NOT: arith.bitcast
// CHECK-NOT: arith.truncf
// CHECK: return %[[P]]
func.func @exact(%x: vector<16xbf16>, %c: vector<16xi1>) -> vector<16xf32> {
  %zero = arith.constant dense<0.0> : vector<16xf32>
  %w = arith.extf %x : vector<16xbf16> to vector<16xf32>
  %s = arith.addf %w, %zero : vector<16xf32>
  %n = arith.negf %s : vector<16xf32>
  %p = arith.select %c, %s, %n : vector<16xi1>, vector<16xf32>
  %t = arith.truncf %p {moe.nan_unchecked} : vector<16xf32> to vector<16xbf16>
  %r = arith.extf %t : vector<16xbf16> to vector<16xf32>
  return %r : vector<16xf32>
}

// Adding anything but zero, or widening f16 (10 fraction bits), leaves low bits that the rounding clears.
// CHECK-LABEL: func.func @inexact
// CHECK-COUNT-2: arith.andi %{{.*}}, %{{.*}} : vector<16xi32>
// CHECK-COUNT-2: arith.andi %{{.*}}, %{{.*}} : vector<16xi32>
// CHECK-NOT: arith.truncf
func.func @inexact(%x: vector<16xbf16>, %h: vector<16xf16>) -> (vector<16xf32>, vector<16xf32>) {
  %half = arith.constant dense<0.5> : vector<16xf32>
  %w = arith.extf %x : vector<16xbf16> to vector<16xf32>
  %s = arith.addf %w, %half : vector<16xf32>
  %t = arith.truncf %s {moe.nan_unchecked} : vector<16xf32> to vector<16xbf16>
  %r = arith.extf %t : vector<16xbf16> to vector<16xf32>
  %v = arith.extf %h : vector<16xf16> to vector<16xf32>
  %u = arith.truncf %v {moe.nan_unchecked} : vector<16xf32> to vector<16xbf16>
  %q = arith.extf %u : vector<16xbf16> to vector<16xf32>
  return %r, %q : vector<16xf32>, vector<16xf32>
}

// The same in moe-widen-bf16-pairs' form: each word of a bf16 row widened in place (the low bf16 shifted
// up, the high one masked) and the halves concatenated. No rounding is left (its cmpi and addi).
// CHECK-LABEL: func.func @exact_pairs
// CHECK: %[[W:.*]] = vector.shuffle
// CHECK: %[[S:.*]] = arith.addf %[[W]], %{{.*}} : vector<32xf32>
// CHECK-NOT: arith.cmpi
// CHECK-NOT: arith.addi
// CHECK: return %[[S]]
func.func @exact_pairs(%x: vector<32xbf16>) -> vector<32xf32> {
  %zero = arith.constant dense<0.0> : vector<32xf32>
  %c16 = arith.constant dense<16> : vector<16xi32>
  %high = arith.constant dense<-65536> : vector<16xi32>
  %bits = vector.bitcast %x : vector<32xbf16> to vector<16xi32>
  %even = arith.shli %bits, %c16 : vector<16xi32>
  %odd = arith.andi %bits, %high : vector<16xi32>
  %e = arith.bitcast %even : vector<16xi32> to vector<16xf32>
  %o = arith.bitcast %odd : vector<16xi32> to vector<16xf32>
  %w = vector.shuffle %e, %o [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xf32>, vector<16xf32>
  %s = arith.addf %w, %zero : vector<32xf32>
  %t = arith.truncf %s {moe.nan_unchecked} : vector<32xf32> to vector<32xbf16>
  %r = arith.extf %t : vector<32xbf16> to vector<32xf32>
  return %r : vector<32xf32>
}

// A shift by less than 16, or a mask that keeps a low bit, leaves bits that the rounding clears.
// CHECK-LABEL: func.func @inexact_words
// CHECK-COUNT-2: arith.cmpi ne
func.func @inexact_words(%b: vector<16xi32>) -> (vector<16xf32>, vector<16xf32>) {
  %zero = arith.constant dense<0.0> : vector<16xf32>
  %c8 = arith.constant dense<8> : vector<16xi32>
  %mask = arith.constant dense<-65535> : vector<16xi32>
  %shifted = arith.shli %b, %c8 : vector<16xi32>
  %masked = arith.andi %b, %mask : vector<16xi32>
  %f = arith.bitcast %shifted : vector<16xi32> to vector<16xf32>
  %g = arith.bitcast %masked : vector<16xi32> to vector<16xf32>
  %fs = arith.addf %f, %zero : vector<16xf32>
  %gs = arith.addf %g, %zero : vector<16xf32>
  %ft = arith.truncf %fs {moe.nan_unchecked} : vector<16xf32> to vector<16xbf16>
  %gt = arith.truncf %gs {moe.nan_unchecked} : vector<16xf32> to vector<16xbf16>
  %fr = arith.extf %ft : vector<16xbf16> to vector<16xf32>
  %gr = arith.extf %gt : vector<16xbf16> to vector<16xf32>
  return %fr, %gr : vector<16xf32>, vector<16xf32>
}
