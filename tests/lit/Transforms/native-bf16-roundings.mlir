// moe-native-bf16-roundings: a rounding of vector<32xf32> to bf16 tests each 16 lanes for NaN or subnormal
// (vfpclassps, classes 0xa1 = 161), rounds with vcvtne2ps2bf16 (inline asm: 32 lanes, the first 16 its
// first operand) where no lane is one, and keeps
// the exact rounding (for arith-expand-ops) where one is; a scalar rounding, and a width that is not 16
// lanes times a power of two, are left alone.
// RUN: moec-opt %s --moe-native-bf16-roundings | FileCheck %s

// CHECK-LABEL: func.func @vector32
// CHECK: %[[CLASSES:.*]] = arith.constant 161 : i32
// CHECK: %[[LO:.*]] = vector.shuffle %arg0, %arg0 [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
// CHECK: %[[MLO:.*]] = llvm.call_intrinsic "llvm.x86.avx512.fpclass.ps.512"(%[[LO]], %[[CLASSES]]) : (vector<16xf32>, i32) -> vector<16xi1>
// CHECK: %[[HI:.*]] = vector.shuffle %arg0, %arg0 [16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]
// CHECK: %[[MHI:.*]] = llvm.call_intrinsic "llvm.x86.avx512.fpclass.ps.512"(%[[HI]], %[[CLASSES]])
// CHECK: %[[M:.*]] = arith.ori %[[MLO]], %[[MHI]] : vector<16xi1>
// CHECK: %[[ANY:.*]] = vector.reduction <or>, %[[M]] : vector<16xi1> into i1
// CHECK: %[[R:.*]] = scf.if %[[ANY]] -> (vector<32xbf16>) {
// CHECK:   %[[EXACT:.*]] = arith.truncf %arg0 : vector<32xf32> to vector<32xbf16>
// CHECK:   scf.yield %[[EXACT]]
// CHECK: } else {
// CHECK:   %[[BITS:.*]] = llvm.inline_asm asm_dialect = att "vcvtne2ps2bf16 $1, $2, $0", "=v,v,v" %[[LO]], %[[HI]] : (vector<16xf32>, vector<16xf32>) -> vector<32xi16>
// CHECK:   %[[BF:.*]] = arith.bitcast %[[BITS]] : vector<32xi16> to vector<32xbf16>
// CHECK:   scf.yield %[[BF]]
// CHECK: return %[[R]]
func.func @vector32(%x: vector<32xf32>) -> vector<32xbf16> {
  %r = arith.truncf %x : vector<32xf32> to vector<32xbf16>
  return %r : vector<32xbf16>
}

// 16 lanes take vcvtneps2bf16; 64 lanes two vcvtne2ps2bf16, joined in order.
// CHECK-LABEL: func.func @vector16and64
// CHECK: llvm.inline_asm asm_dialect = att "vcvtneps2bf16 $1, $0", "=v,v" %{{.*}} : (vector<16xf32>) -> vector<16xi16>
// CHECK: %[[A:.*]] = llvm.inline_asm asm_dialect = att "vcvtne2ps2bf16 $1, $2, $0", "=v,v,v" %[[S0:.*]], %[[S1:.*]] :
// CHECK: %[[B:.*]] = llvm.inline_asm asm_dialect = att "vcvtne2ps2bf16 $1, $2, $0", "=v,v,v" %[[S2:.*]], %[[S3:.*]] :
// CHECK: vector.shuffle %[[A]], %[[B]] [0, 1, {{.*}}, 62, 63] : vector<32xi16>, vector<32xi16>
func.func @vector16and64(%x: vector<16xf32>, %y: vector<64xf32>) -> (vector<16xbf16>, vector<64xbf16>) {
  %r = arith.truncf %x : vector<16xf32> to vector<16xbf16>
  %s = arith.truncf %y : vector<64xf32> to vector<64xbf16>
  return %r, %s : vector<16xbf16>, vector<64xbf16>
}

// CHECK-LABEL: func.func @others
// CHECK-NOT: llvm.inline_asm
// CHECK-NOT: scf.if
// CHECK: arith.truncf %arg0 : f32 to bf16
// CHECK: arith.truncf %arg1 : vector<8xf32> to vector<8xbf16>
// CHECK: arith.truncf %arg2 : vector<48xf32> to vector<48xbf16>
func.func @others(%s: f32, %v: vector<8xf32>, %w: vector<48xf32>) -> (bf16, vector<8xbf16>, vector<48xbf16>) {
  %a = arith.truncf %s : f32 to bf16
  %b = arith.truncf %v : vector<8xf32> to vector<8xbf16>
  %c = arith.truncf %w : vector<48xf32> to vector<48xbf16>
  return %a, %b, %c : bf16, vector<8xbf16>, vector<48xbf16>
}
