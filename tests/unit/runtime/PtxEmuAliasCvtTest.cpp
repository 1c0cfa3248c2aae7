//===- PtxEmuAliasCvtTest.cpp - cvt, ld and atom whose destination is a source -===//
//
// Conversions, loads and atomics written over one of their own sources, which moec's PTX does not produce
// today. The PTX ISA rules (instruction sections cited by title, whose numbers shift between ISA versions):
//  - "Data Movement and Conversion Instructions: cvt": d = convert(a); for .f16x2/.bf16x2 "d[31:16] =
//    convert(a); d[15:0] = convert(b)"; integer narrowing without .sat keeps the low bits, .sat clamps to the
//    destination type's range; .rzi / .rni round to an integral value toward zero / to nearest even.
//  - 9.4.1, "Operand Size Exceeding Instruction-Type Size": "ld, st, and cvt instructions permit source and
//    destination data operands to be wider than the instruction-type size"; a wider source "is truncated
//    (chopped)"; a wider destination "is zero- or sign-extended ... If the corresponding instruction type is
//    signed integer, the data is sign-extended; otherwise, the data is zero-extended". So `cvt.f32.f16 %r, %r`
//    (ld's own example: "ld.global.b16 %r,[fs]; cvt.f32.f16 %r,%r; // up-convert f16 data to f32") reads the
//    low 16 bits of %r, whatever the upper ones hold, then writes all 32.
//    (.bf16 is not in that table: ptxas refuses a .bf16 operand in a .b32 register, so a scalar bf16 cvt
//    never shares a register with its f32 side; the packed .bf16x2 forms below do.)
//  - 9.2 / 9.6: the destination is written after the sources are read (the Semantics sections compute d
//    from a, b, c).
//  - "... Instructions: ld": "d = *(a+immOff)"; "... Instructions: atom": "Atomically loads the original value
//    at location a into destination register d, performs a reduction operation with operand b and the value
//    in location a, and stores the result ... at location a" (cas: b the compare value, c the swap value):
//    the address, b and c are read before d is written.
// ptxas (CUDA 13.0, -arch=sm_90) accepts every kernel here as written.
//===----------------------------------------------------------------------===//
#include "PtxEmuFixture.h"

namespace moec::ptxemu::testing {
namespace {

class PtxEmuAliasCvt : public PtxEmuFixture {};

TEST_F(PtxEmuAliasCvt, CvtReadsItsSourceBeforeWritingOverIt) {
  const std::string text = ptx(R"PTX(
.visible .entry cvt_alias(.param .u64 .ptr .align 1 cvt_alias_param_0, .param .u64 .ptr .align 1 cvt_alias_param_1)
{
  .reg .b32 %r<24>;
  .reg .b64 %rd<16>;

  ld.param.u64 %rd14, [cvt_alias_param_0];
  ld.param.u64 %rd15, [cvt_alias_param_1];
  ld.global.b16 %r1, [%rd14];
  cvt.f32.f16 %r1, %r1;
  mov.b32 %r2, 0xABCD3555;
  cvt.f32.f16 %r2, %r2;
  mov.b32 %r3, 0x3F803000;
  cvt.rn.f16.f32 %r3, %r3;
  mov.b32 %r4, 0x4788B800;
  cvt.rz.f16.f32 %r4, %r4;
  mov.b32 %r5, 0x40200000;
  cvt.rni.f32.f32 %r5, %r5;
  mov.b32 %r6, 0xC0200000;
  cvt.rzi.s32.f32 %r6, %r6;
  mov.b32 %r7, -3;
  cvt.rn.f32.s32 %r7, %r7;
  mov.b32 %r8, 0x12345680;
  cvt.s32.s8 %r8, %r8;
  mov.b32 %r9, 0x3F800000;
  mov.b32 %r10, 0xC0000000;
  cvt.rn.f16x2.f32 %r9, %r9, %r10;
  mov.b32 %r11, 0x3F808000;
  mov.b32 %r12, 0x3F818000;
  cvt.rn.bf16x2.f32 %r11, %r12, %r11;
  mov.b32 %r13, 0x12345678;
  cvt.u16.u32 %r13, %r13;
  mov.b32 %r14, 300;
  cvt.sat.s8.s32 %r14, %r14;
  mov.b32 %r15, -300;
  cvt.sat.s8.s32 %r15, %r15;
  mov.b32 %r16, 0x80000000;
  cvt.u32.s32 %r16, %r16;
  mov.b64 %rd1, 0xFFFFFFFF80000001;
  cvt.u64.u32 %rd1, %rd1;
  mov.b64 %rd2, 0x0000000080000001;
  cvt.s64.s32 %rd2, %rd2;
  mov.b64 %rd3, 0x123456789ABCDEF0;
  cvt.u32.u64 %rd3, %rd3;
  mov.b64 %rd4, 0xDEADBEEF3FC00000;
  cvt.f64.f32 %rd4, %rd4;
  mov.b64 %rd5, 0x3FF0000000000001;
  cvt.rn.f32.f64 %rd5, %rd5;
  mov.b64 %rd6, 0x4045000000000000;
  cvt.rzi.u64.f64 %rd6, %rd6;
  mov.b64 %rd7, -5;
  cvt.rn.f64.s64 %rd7, %rd7;
  mov.b64 %rd8, 0x00000000FFFFFF80;
  cvt.s64.s8 %rd8, %rd8;
  st.global.v4.b32 [%rd15], {%r1, %r2, %r3, %r4};
  st.global.v4.b32 [%rd15+16], {%r5, %r6, %r7, %r8};
  st.global.v4.b32 [%rd15+32], {%r9, %r11, %r13, %r14};
  st.global.v2.b32 [%rd15+48], {%r15, %r16};
  st.global.v2.b64 [%rd15+64], {%rd1, %rd2};
  st.global.v2.b64 [%rd15+80], {%rd3, %rd4};
  st.global.v2.b64 [%rd15+96], {%rd5, %rd6};
  st.global.v2.b64 [%rd15+112], {%rd7, %rd8};
  ret;
}
)PTX");
  uint64_t dIn = upload(std::vector<uint16_t>{0x3C01}), dOut = zeros<uint32_t>(32);
  run(text, "cvt_alias", {1}, {1}, dIn, dOut);
  std::vector<uint32_t> o = download<uint32_t>(dOut, 14);
  std::vector<uint64_t> w = download<uint64_t>(dOut + 64, 8);
  // f16 1 + 2^-10 (loaded as .b16 into a .b32 register, zero-extended): f32 exponent 127, fraction bit
  // 2^-10 = 0x2000.
  EXPECT_EQ(o[0], 0x3F802000u) << "ld.b16 %r; cvt.f32.f16 %r, %r";
  // Only the low half 0x3555 is the f16 source: 0.333251953125 = 0x3EAAA000 (the upper 0xABCD chopped).
  EXPECT_EQ(o[1], 0x3EAAA000u) << "cvt.f32.f16 d, d with other bits above the f16";
  // f32 1 + 3*2^-11 ties between f16 0x3C01 and 0x3C02: even 0x3C02; the .b32 destination is zero-extended.
  EXPECT_EQ(o[2], 0x00003C02u) << "cvt.rn.f16.f32 d, d";
  // 70000 (f32 0x4788B800) is past f16's largest finite 65504 (0x7BFF): .rz keeps 0x7BFF, zero-extended.
  EXPECT_EQ(o[3], 0x00007BFFu) << "cvt.rz.f16.f32 d, d";
  // 2.5 rounded to an integral value, ties to even: 2.0.
  EXPECT_EQ(o[4], 0x40000000u) << "cvt.rni.f32.f32 d, d";
  EXPECT_EQ(o[5], uint32_t(-2)) << "cvt.rzi.s32.f32 d, d of -2.5";
  EXPECT_EQ(o[6], 0xC0400000u) << "cvt.rn.f32.s32 d, d of -3";
  // The low byte 0x80 as s8 is -128, sign-extended to 32 bits.
  EXPECT_EQ(o[7], 0xFFFFFF80u) << "cvt.s32.s8 d, d";
  // a = 1.0 -> f16 0x3C00 above, b = -2.0 -> 0xC000 below; a read before d (the same register) is written.
  EXPECT_EQ(o[8], 0x3C00C000u) << "cvt.rn.f16x2.f32 d, d, b";
  // a = 0x3F818000 -> bf16 0x3F82 above, b (= d) = 0x3F808000 ties down to even 0x3F80 below.
  EXPECT_EQ(o[9], 0x3F823F80u) << "cvt.rn.bf16x2.f32 d, a, d";
  EXPECT_EQ(o[10], 0x5678u) << "cvt.u16.u32 d, d keeps the low 16 bits, zero-extended";
  EXPECT_EQ(o[11], 0x7Fu) << "cvt.sat.s8.s32 d, d of 300 clamps to 127";
  EXPECT_EQ(o[12], 0xFFFFFF80u) << "cvt.sat.s8.s32 d, d of -300 clamps to -128, sign-extended";
  EXPECT_EQ(o[13], 0x80000000u) << "cvt.u32.s32 d, d (no .sat) keeps the bits";
  EXPECT_EQ(w[0], 0x0000000080000001ull) << "cvt.u64.u32 d, d: the low 32 bits, zero-extended";
  EXPECT_EQ(w[1], 0xFFFFFFFF80000001ull) << "cvt.s64.s32 d, d: the low 32 bits, sign-extended";
  EXPECT_EQ(w[2], 0x000000009ABCDEF0ull) << "cvt.u32.u64 d, d in a .b64 register: zero-extended";
  // f32 1.5 (0x3FC00000, the low half; 0xDEADBEEF above chopped) widens to f64 0x3FF8000000000000.
  EXPECT_EQ(w[3], 0x3FF8000000000000ull) << "cvt.f64.f32 d, d";
  // f64 1 + 2^-52 rounds to f32 1.0 (0x3F800000), zero-extended in the .b64 register.
  EXPECT_EQ(w[4], 0x000000003F800000ull) << "cvt.rn.f32.f64 d, d";
  EXPECT_EQ(w[5], 42u) << "cvt.rzi.u64.f64 d, d of 42.0";
  EXPECT_EQ(w[6], 0xC014000000000000ull) << "cvt.rn.f64.s64 d, d of -5";
  EXPECT_EQ(w[7], 0xFFFFFFFFFFFFFF80ull) << "cvt.s64.s8 d, d";
}

// Pointer chasing (ld.u64 d, [d]), vector loads whose address register is one of the elements, and atomics
// whose destination is their operand b, c or address.
TEST_F(PtxEmuAliasCvt, LoadsAndAtomicsReadTheirAddressAndOperandsFirst) {
  const std::string text = ptx(R"PTX(
.visible .entry mem_alias(.param .u64 .ptr .align 1 mem_alias_param_0, .param .u64 .ptr .align 1 mem_alias_param_1,
                          .param .u64 .ptr .align 1 mem_alias_param_2)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<16>;

  ld.param.u64 %rd1, [mem_alias_param_0];
  ld.param.u64 %rd10, [mem_alias_param_1];
  ld.param.u64 %rd11, [mem_alias_param_2];
  add.s64 %rd2, %rd1, 16;
  add.s64 %rd5, %rd1, 32;
  ld.global.u64 %rd1, [%rd1];
  ld.global.u64 %rd1, [%rd1];
  ld.global.v2.u64 {%rd2, %rd3}, [%rd2];
  ld.global.v2.u64 {%rd4, %rd5}, [%rd5];
  mov.u32 %r1, 5;
  atom.global.add.u32 %r1, [%rd10], %r1;
  mov.u32 %r2, 7;
  mov.u32 %r3, 20;
  atom.global.cas.b32 %r2, [%rd10+4], %r3, %r2;
  mov.u32 %r4, 99;
  atom.global.exch.b32 %r4, [%rd10+8], %r4;
  add.s64 %rd6, %rd10, 16;
  atom.global.add.u64 %rd6, [%rd6], 1;
  st.global.v4.b32 [%rd11], {%r1, %r2, %r4, %r3};
  st.global.v2.b64 [%rd11+16], {%rd1, %rd2};
  st.global.v2.b64 [%rd11+32], {%rd3, %rd4};
  st.global.v2.b64 [%rd11+48], {%rd5, %rd6};
  ret;
}
)PTX");
  // chain[0] -> &chain[3], chain[3] -> &chain[1]: two loads through %rd1 end at &chain[1].
  uint64_t dChain = zeros<uint64_t>(8);
  std::vector<uint64_t> chain = {dChain + 24, 0xC1, 0x1111, dChain + 8, 0x4444, 0x5555, 0, 0};
  uint8_t *host = mem.find(dChain, 64);
  ASSERT_NE(host, nullptr);
  std::memcpy(host, chain.data(), 64);
  // Words: 10 (add 5), 20 (cas: equal to 20, so 7 goes in), 30 (exch 99), then a u64 counter 1000 at +16.
  uint64_t dAtom = upload(std::vector<uint32_t>{10, 20, 30, 0, 1000, 0});
  uint64_t dOut = zeros<uint64_t>(8);
  run(text, "mem_alias", {1}, {1}, dChain, dAtom, dOut);
  std::vector<uint32_t> o = download<uint32_t>(dOut, 4);
  std::vector<uint64_t> w = download<uint64_t>(dOut + 16, 6);
  EXPECT_EQ(o[0], 10u) << "atom.add d, [a], d returns the old word";
  EXPECT_EQ(o[1], 20u) << "atom.cas d, [a], b, d returns the old word";
  EXPECT_EQ(o[2], 30u) << "atom.exch d, [a], d returns the old word";
  EXPECT_EQ(o[3], 20u) << "cas's b unchanged";
  EXPECT_EQ(w[0], dChain + 8) << "ld.u64 d, [d] twice";
  EXPECT_EQ(w[1], 0x1111u) << "ld.v2 {d, e}, [d]: d";
  EXPECT_EQ(w[2], dChain + 8) << "ld.v2 {d, e}, [d]: e from the same address";
  EXPECT_EQ(w[3], 0x4444u) << "ld.v2 {d, e}, [e]: d";
  EXPECT_EQ(w[4], 0x5555u) << "ld.v2 {d, e}, [e]: e";
  EXPECT_EQ(w[5], 1000u) << "atom.add.u64 d, [d], 1 returns the old value";
  // Memory after: 10 + 5, 7 (the old %r2, not the returned 20), 99 (the old %r4), 1000 + 1.
  std::vector<uint32_t> after = download<uint32_t>(dAtom, 6);
  EXPECT_EQ(after[0], 15u) << "atom.add added the old d";
  EXPECT_EQ(after[1], 7u) << "atom.cas stored the old d";
  EXPECT_EQ(after[2], 99u) << "atom.exch stored the old d";
  EXPECT_EQ(after[4] | uint64_t(after[5]) << 32, 1001u) << "atom.add.u64 through the address it overwrites";
}

} // namespace
} // namespace moec::ptxemu::testing
