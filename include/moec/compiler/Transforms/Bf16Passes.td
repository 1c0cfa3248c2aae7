//===- Bf16Passes.td - bf16 arithmetic before LLVM ---------*- tablegen -*-===//
//
// The passes on the CPU's (and Ascend's) bf16 arithmetic before the conversion to LLVM: bf16 values carried
// as their 16 bits, roundings expanded to integer ops or native where the CPU has them, bf16 rows widened in
// place.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_BF16_PASSES_TD
#define MOE_BF16_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoeBf16Bits : Pass<"moe-bf16-bits", "::mlir::ModuleOp"> {
  let summary = "CPU: carries bf16 values through selects, branches and loops as their 16 bits";
  let description = [{
    Runs after arith-expand-ops (which rounds f32 to bf16 with integer ops), before the conversion to
    LLVM. An `arith.select` on bf16 (the expansion's NaN case), an `scf.if` result and an `scf.for`
    iter_arg of bf16 type (a fold that rounds its accumulator to bf16 after every step: C2 without mixed
    precision) become i16 values of the same shape, bitcast at their ends. x86 without AVX512-BF16 has no
    bf16 registers and would legalize each such select or phi by widening every lane to f32 and rounding
    it back with a libcall per element (C2 at Mixtral: 0.02 of a memcpy). The bits are the same, so every
    result is.

    ```mlir
    %r = arith.select %isNan, %nan, %rounded : vector<16xbf16>
    // becomes
    %a = arith.bitcast %nan : vector<16xbf16> to vector<16xi16>
    %b = arith.bitcast %rounded : vector<16xbf16> to vector<16xi16>
    %s = arith.select %isNan, %a, %b : vector<16xi1>, vector<16xi16>
    %r = arith.bitcast %s : vector<16xi16> to vector<16xbf16>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def MoeExpandUncheckedRoundings : Pass<"moe-expand-unchecked-roundings", "::mlir::ModuleOp"> {
  let summary = "CPU: a marked bf16 rounding read back as f32 becomes integer ops without the NaN case";
  let description = [{
    Runs before arith-expand-ops. `arith.extf(arith.truncf(y))` from f32 to bf16 and back, where the
    truncf is marked `moe.nan_unchecked` (moe-widen-rounded-folds{unchecked-roundings}), becomes the
    round-to-nearest-even of arith-expand-ops on y's bits, kept in f32: `(bits + 0x7fff + bit16) &
    0xffff0000`, without its NaN test and select (on x86 a compare into a mask register and a masked move
    in every step of C2's chain of roundings). The marked roundings are of sums of two bf16 values, whose
    low 16 bits are zero, so a NaN sum is an operand's NaN or the CPU's default NaN (x86 0xffc00000,
    AArch64 and RISC-V 0x7fc00000), low 16 bits zero too: the bias then never carries out of them, and the
    NaN stays the same NaN. The fold's result is rounded with the NaN case, so every result is the same.
    (PTX's default NaN is 0x7fffffff, which the bias would carry into the sign: CPU only.)
    Where y's low 16 bits are known to be zero (a widened bf16 value, plus a zero, through selects and sign
    changes: the first step of an unrolled fold whose accumulator starts at 0.0), the rounding is the
    identity and the widening reads y itself.

    ```mlir
    %t = arith.truncf %y {moe.nan_unchecked} : vector<16xf32> to vector<16xbf16>
    %w = arith.extf %t : vector<16xbf16> to vector<16xf32>
    // becomes
    %b = arith.bitcast %y : vector<16xf32> to vector<16xi32>
    %s = arith.shrui %b, %c16 : vector<16xi32>
    %l = arith.andi %s, %c1 : vector<16xi32>
    %bias = arith.addi %l, %c7fff : vector<16xi32>
    %u = arith.addi %b, %bias : vector<16xi32>
    %r = arith.andi %u, %cffff0000 : vector<16xi32>
    %w = arith.bitcast %r : vector<16xi32> to vector<16xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def MoeNativeBf16Roundings : Pass<"moe-native-bf16-roundings", "::mlir::ModuleOp"> {
  let summary = "CPU with AVX512-BF16: a vector rounding of f32 to bf16 by vcvtne(2)ps2bf16 where it is exact";
  let description = [{
    Runs before arith-expand-ops, on CPUs with AVX512-BF16 and AVX512-DQ (the pipeline adds it only
    there). arith-expand-ops rounds f32 to bf16 exactly with ~8 integer instructions per 16 lanes, NaN
    case and pack included; vcvtneps2bf16 rounds 16 lanes to nearest even in one, but it reads subnormal
    inputs as zero and keeps a NaN's payload. A normal f32 never rounds to a subnormal bf16 (same
    exponent range), so the instruction is exact for everything else. A rounding of vector<16k x f32>
    becomes a test of each 16 lanes for NaN or subnormal (vfpclassps), the instruction (inline asm: the
    target machine keeps the feature off so that LLVM never uses it for its own roundings) where no lane
    is one, and the exact rounding otherwise. Each 32 lanes round by one vcvtne2ps2bf16 (2 uops, where
    two vcvtneps2bf16 and their join take 5). Every result is the same.

    ```mlir
    %r = arith.truncf %x : vector<32xf32> to vector<32xbf16>
    // becomes
    %lo = vector.extract_strided_slice %x {offsets = [0], sizes = [16], strides = [1]}
    %mlo = llvm.call_intrinsic "llvm.x86.avx512.fpclass.ps.512"(%lo, %c161) : (...) -> vector<16xi1>
    ... the same for lanes 16-31, or'ed into %m
    %any = vector.reduction <or>, %m : vector<16xi1> into i1
    %r = scf.if %any -> (vector<32xbf16>) {
      scf.yield (arith.truncf %x, expanded exactly by arith-expand-ops)
    } else {
      %bits = llvm.inline_asm "vcvtne2ps2bf16 $1, $2, $0", "=v,v,v" %lo, %hi
                : (vector<16xf32>, vector<16xf32>) -> vector<32xi16>
      ... bitcast to vector<32xbf16> and yielded
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect", "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def MoeWidenBf16Pairs : Pass<"moe-widen-bf16-pairs", "::mlir::ModuleOp"> {
  let summary = "CPU: bf16 rows widened in place, the even lanes first, where the loop computes lane-wise";
  let description = [{
    Runs on the CPU before the roundings are expanded. A 32-bit word of a bf16 row holds two values, each
    an f32 in place once the other is cleared: the low one shifted left by 16, the high one and'ed with
    0xffff0000. Where everything an innermost loop computes from its widened loads (`arith.extf` of a
    `vector.load` of vector<2k x bf16>) is lane-wise (arith ops, the loop's carried values, scf.if
    results), those loads widen that way, their lanes in the paired order (even elements, then odd), and
    a `vector.shuffle` puts them back in order where a value leaves (a store, a reduction, a use after
    the loop). x86 widened 16 lanes with a vpmovzxwd and a vpslld; now 32 lanes take an and and a shift.
    A loop is paired only where its widenings save more uops (2 each) than its shuffles cost (1 for a
    16-bit vector, 2 otherwise). Every lane computes what it did, so every result is the same.

    ```mlir
    %x = vector.load %rows[%r, %h] : memref<?x4096xbf16>, vector<32xbf16>
    %f = arith.extf %x : vector<32xbf16> to vector<32xf32>
    %s = arith.addf %acc, %f : vector<32xf32>
    // becomes
    %w = vector.bitcast %x : vector<32xbf16> to vector<16xi32>
    %even = arith.shli %w, %c16 : vector<16xi32>
    %odd = arith.andi %w, %cHigh : vector<16xi32>
    %f = vector.shuffle (bitcast %even), (bitcast %odd) [0, 1, ..., 31] : vector<16xf32>, vector<16xf32>
    %s = arith.addf %acc, %f : vector<32xf32>          // %acc in the paired order too
    ...
    %out = vector.shuffle %r, %r [0, 16, 1, 17, ..., 15, 31] : vector<32xbf16>, vector<32xbf16>
    vector.store %out, ...
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::vector::VectorDialect"];
}

#endif // MOE_BF16_PASSES_TD
