// moe-bf16-bits: bf16 values carried between ops (arith-expand-ops' NaN select, a branch's result, a loop's
// iter_arg: C2's accumulator rounded to bf16 after every step) become i16 of the same shape, with bitcasts
// at their ends; canonicalization cancels those against the expansion's own. Other types are left alone.
// RUN: moec-opt %s --moe-bf16-bits | FileCheck %s
// RUN: moec-opt %s --moe-bf16-bits --canonicalize | FileCheck %s --check-prefix=CANON

// CHECK-LABEL: func.func @select
// CHECK: %[[A:.*]] = arith.bitcast %{{.*}} : vector<16xbf16> to vector<16xi16>
// CHECK: %[[B:.*]] = arith.bitcast %{{.*}} : vector<16xbf16> to vector<16xi16>
// CHECK: %[[S:.*]] = arith.select %{{.*}}, %[[A]], %[[B]] : vector<16xi1>, vector<16xi16>
// CHECK: %[[R:.*]] = arith.bitcast %[[S]] : vector<16xi16> to vector<16xbf16>
// The f32 select stays.
// CHECK: arith.select %{{.*}} : vector<16xi1>, vector<16xf32>
// CHECK: return %[[R]]
func.func @select(%c: vector<16xi1>, %x: vector<16xbf16>, %y: vector<16xi16>, %f: vector<16xf32>) -> (vector<16xbf16>, vector<16xf32>) {
  %nan = arith.constant dense<0x7FC0> : vector<16xbf16>
  %b = arith.bitcast %y : vector<16xi16> to vector<16xbf16>
  %r = arith.select %c, %nan, %b : vector<16xi1>, vector<16xbf16>
  %g = arith.select %c, %f, %f : vector<16xi1>, vector<16xf32>
  return %r, %g : vector<16xbf16>, vector<16xf32>
}

// CHECK-LABEL: func.func @branch
// CHECK: %[[IF:[0-9]+]]:2 = scf.if %{{.*}} -> (vector<8xi16>, f32) {
// CHECK: %[[T:.*]] = arith.bitcast %{{.*}} : vector<8xbf16> to vector<8xi16>
// CHECK: scf.yield %[[T]], %{{.*}} : vector<8xi16>, f32
// CHECK: } else {
// CHECK: %[[E:.*]] = arith.bitcast %{{.*}} : vector<8xbf16> to vector<8xi16>
// CHECK: scf.yield %[[E]], %{{.*}} : vector<8xi16>, f32
// CHECK: %[[BACK:.*]] = arith.bitcast %[[IF]]#0 : vector<8xi16> to vector<8xbf16>
// CHECK: return %[[BACK]], %[[IF]]#1
func.func @branch(%c: i1, %x: vector<8xbf16>, %y: vector<8xbf16>, %f: f32) -> (vector<8xbf16>, f32) {
  %r:2 = scf.if %c -> (vector<8xbf16>, f32) {
    scf.yield %x, %f : vector<8xbf16>, f32
  } else {
    scf.yield %y, %f : vector<8xbf16>, f32
  }
  return %r#0, %r#1 : vector<8xbf16>, f32
}

// A loop rounding its accumulator after every step (widening and rounding expanded to integer ops, as
// arith-expand-ops leaves them): the iter_arg is i16; with canonicalization no bf16 value crosses the loop's boundary.
// CHECK-LABEL: func.func @loop
// CHECK: %[[INIT:.*]] = arith.bitcast %{{.*}} : bf16 to i16
// CHECK: %[[LOOP:.*]] = scf.for %{{.*}} iter_args(%[[ACC:.*]] = %[[INIT]]) -> (i16) {
// CHECK-NEXT: %[[WIDE:.*]] = arith.bitcast %[[ACC]] : i16 to bf16
// CHECK: arith.bitcast %[[WIDE]] : bf16 to i16
// CHECK: %[[NEXT:.*]] = arith.bitcast %{{.*}} : bf16 to i16
// CHECK-NEXT: scf.yield %[[NEXT]] : i16
// CHECK: arith.bitcast %[[LOOP]] : i16 to bf16
// CANON-LABEL: func.func @loop
// CANON: scf.for %{{.*}} -> (i16) {
// CANON-NOT: bf16
// CANON: scf.yield %{{.*}} : i16
func.func @loop(%n: index, %x: bf16) -> bf16 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (bf16) {
    %c16 = arith.constant 16 : i32
    %ai = arith.bitcast %acc : bf16 to i16
    %az = arith.extui %ai : i16 to i32
    %as = arith.shli %az, %c16 : i32
    %w = arith.bitcast %as : i32 to f32
    %s = arith.addf %w, %w : f32
    %bits = arith.bitcast %s : f32 to i32
    %hi = arith.shrui %bits, %c16 : i32
    %t = arith.trunci %hi : i32 to i16
    %b = arith.bitcast %t : i16 to bf16
    scf.yield %b : bf16
  }
  return %r : bf16
}
