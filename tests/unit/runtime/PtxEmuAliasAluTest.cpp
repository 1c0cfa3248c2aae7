//===- PtxEmuAliasAluTest.cpp - Arithmetic whose destination is a source --===//
//
// Arithmetic, logic, shifts, selp and setp with one register as both destination and source, which moec's
// PTX does not produce today. The PTX ISA (instruction sections cited by title, whose numbers shift between
// ISA versions) defines every instruction on its sources' values before it executes: 9.2, "PTX
// Instructions": "the d operand is the destination operand, while a, b, and c are source operands"; each
// Semantics section (9.6) computes d from a, b, c in C; so `add d, d, d` doubles d, `mad d, a, b, d` adds
// the old d.
//  - "Integer Arithmetic Instructions", "Floating Point Instructions", "Half Precision Floating Point
//    Instructions" (f16x2 / bf16x2: each 16-bit half on its own), "Logic and Shift Instructions": shl / shr
//    "Shift amounts greater than the register width N are clamped to N", the amount b an unsigned 32-bit
//    value; shr of a signed type fills with the sign bit.
//  - "Comparison and Selection Instructions: setp": "t = (a CmpOp b) ? 1 : 0; p = BoolOp(t, c); q =
//    BoolOp(!t, c);" - both from c as it was, even when c is p or q.
// Expected values are derived in the comments (IEEE bit patterns) or computed with plain C++ arithmetic.
// ptxas (CUDA 13.0, -arch=sm_90) accepts every kernel here as written.
//===----------------------------------------------------------------------===//
#include "PtxEmuFixture.h"

#include <bit>
#include <cmath>

namespace moec::ptxemu::testing {
namespace {

class PtxEmuAliasAlu : public PtxEmuFixture {};

// Each thread reads x, y, z from in[3 tid ..] and writes 128 bytes: 28 words, one per in-place instruction
// (predicates as 0/1), then two 64-bit results.
const std::string kIntAlias = ptx(R"PTX(
.visible .entry int_alias(.param .u64 .ptr .align 1 int_alias_param_0, .param .u64 .ptr .align 1 int_alias_param_1)
{
  .reg .pred %p<12>;
  .reg .b32 %r<48>;
  .reg .b64 %rd<16>;

  ld.param.u64 %rd1, [int_alias_param_0];
  ld.param.u64 %rd2, [int_alias_param_1];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 12;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r2, [%rd4];
  ld.global.u32 %r3, [%rd4+4];
  ld.global.u32 %r4, [%rd4+8];
  mov.b32 %r10, %r2;
  add.s32 %r10, %r10, %r10;
  mov.b32 %r11, %r3;
  sub.s32 %r11, %r2, %r11;
  mov.b32 %r12, %r2;
  mul.lo.s32 %r12, %r12, %r3;
  mov.b32 %r13, %r2;
  mul.hi.u32 %r13, %r13, %r13;
  mov.b32 %r14, %r4;
  mad.lo.s32 %r14, %r2, %r3, %r14;
  mov.b32 %r15, %r2;
  mad.lo.s32 %r15, %r15, %r15, %r15;
  mov.b32 %r16, %r3;
  min.s32 %r16, %r2, %r16;
  mov.b32 %r17, %r2;
  max.u32 %r17, %r17, %r3;
  mov.b32 %r18, %r2;
  and.b32 %r18, %r18, %r3;
  mov.b32 %r19, %r3;
  or.b32 %r19, %r2, %r19;
  mov.b32 %r20, %r2;
  xor.b32 %r20, %r20, %r20;
  and.b32 %r21, %r4, 31;
  shl.b32 %r21, %r21, %r21;
  mov.b32 %r22, %r4;
  shl.b32 %r22, %r2, %r22;
  mov.b32 %r23, %r2;
  shr.s32 %r23, %r23, %r23;
  mov.b32 %r24, %r3;
  setp.lt.s32 %p1, %r2, %r3;
  selp.b32 %r24, %r2, %r24, %p1;
  mov.b32 %r25, %r4;
  prmt.b32 %r25, %r2, %r3, %r25;
  mov.b32 %r26, %r2;
  neg.s32 %r26, %r26;
  mov.b32 %r27, %r2;
  not.b32 %r27, %r27;
  mov.b32 %r28, %r2;
  popc.b32 %r28, %r28;
  mov.b32 %r29, %r2;
  brev.b32 %r29, %r29;
  mov.b32 %r30, %r3;
  div.s32 %r30, %r2, %r30;
  mov.b32 %r31, %r3;
  rem.u32 %r31, %r31, %r31;
  cvt.u64.u32 %rd5, %r2;
  cvt.u64.u32 %rd6, %r3;
  shl.b64 %rd5, %rd5, 32;
  or.b64 %rd5, %rd5, %rd6;
  add.s64 %rd5, %rd5, %rd5;
  cvt.u64.u32 %rd7, %r4;
  mad.wide.u32 %rd7, %r2, %r3, %rd7;
  setp.ge.s32 %p2, %r2, 0;
  setp.lt.and.s32 %p2, %r2, %r3, %p2;
  selp.u32 %r32, 1, 0, %p2;
  setp.lt.u32 %p3, %r4, 100;
  setp.ne.or.s32 %p3|%p4, %r2, %r3, %p3;
  selp.u32 %r33, 1, 0, %p3;
  selp.u32 %r34, 1, 0, %p4;
  setp.lt.u32 %p6, %r4, 100;
  setp.eq.xor.s32 %p5|%p6, %r2, %r3, %p6;
  selp.u32 %r35, 1, 0, %p5;
  selp.u32 %r36, 1, 0, %p6;
  setp.ne.u32 %p7, %r2, 0;
  xor.pred %p7, %p7, %p7;
  selp.u32 %r37, 1, 0, %p7;
  mul.wide.u32 %rd8, %r1, 128;
  add.s64 %rd9, %rd2, %rd8;
  st.global.v4.b32 [%rd9], {%r10, %r11, %r12, %r13};
  st.global.v4.b32 [%rd9+16], {%r14, %r15, %r16, %r17};
  st.global.v4.b32 [%rd9+32], {%r18, %r19, %r20, %r21};
  st.global.v4.b32 [%rd9+48], {%r22, %r23, %r24, %r25};
  st.global.v4.b32 [%rd9+64], {%r26, %r27, %r28, %r29};
  st.global.v4.b32 [%rd9+80], {%r30, %r31, %r32, %r33};
  st.global.v4.b32 [%rd9+96], {%r34, %r35, %r36, %r37};
  st.global.v2.b64 [%rd9+112], {%rd5, %rd7};
  ret;
}
)PTX");

TEST_F(PtxEmuAliasAlu, IntegerArithmeticReadsItsSourcesBeforeWritingThem) {
  struct In {
    uint32_t x, y, z;
  };
  // x, y nonzero (y divides); z small for the shifts and large for prmt's selector bytes.
  const std::vector<In> rows = {{7, 3, 5}, {0xFFFFFFF8u /* -8 */, 5, 40}, {0x80000001u, 0xFFFFFFFFu, 0x7531},
                                {123456789, 1000, 0x4062}, {0x7FFFFFFF, 2, 31}};
  std::vector<uint32_t> in;
  for (const In &r : rows)
    in.insert(in.end(), {r.x, r.y, r.z});
  uint64_t dIn = upload(in), dOut = zeros<uint32_t>(rows.size() * 32);
  run(kIntAlias, "int_alias", {1}, {unsigned(rows.size())}, dIn, dOut);
  std::vector<uint32_t> out = download<uint32_t>(dOut, rows.size() * 32);
  for (size_t t = 0; t < rows.size(); ++t) {
    SCOPED_TRACE("x = " + std::to_string(int32_t(rows[t].x)) + ", y = " + std::to_string(int32_t(rows[t].y)) +
                 ", z = " + std::to_string(rows[t].z));
    const uint32_t *o = &out[32 * t];
    const uint64_t w[2] = {o[28] | uint64_t(o[29]) << 32, o[30] | uint64_t(o[31]) << 32};
    const uint32_t x = rows[t].x, y = rows[t].y, z = rows[t].z;
    const int32_t sx = int32_t(x), sy = int32_t(y);
    EXPECT_EQ(o[0], x + x) << "add d, d, d";
    EXPECT_EQ(o[1], x - y) << "sub d, a, d";
    EXPECT_EQ(o[2], x * y) << "mul.lo d, d, b";
    EXPECT_EQ(o[3], uint32_t((uint64_t(x) * x) >> 32)) << "mul.hi d, d, d";
    EXPECT_EQ(o[4], x * y + z) << "mad.lo d, a, b, d";
    EXPECT_EQ(o[5], x * x + x) << "mad.lo d, d, d, d";
    EXPECT_EQ(o[6], uint32_t(std::min(sx, sy))) << "min.s32 d, a, d";
    EXPECT_EQ(o[7], std::max(x, y)) << "max.u32 d, d, b";
    EXPECT_EQ(o[8], x & y) << "and d, d, b";
    EXPECT_EQ(o[9], x | y) << "or d, a, d";
    EXPECT_EQ(o[10], 0u) << "xor d, d, d";
    uint32_t s = z & 31;
    EXPECT_EQ(o[11], s << s) << "shl d, d, d";
    EXPECT_EQ(o[12], z >= 32 ? 0u : x << z) << "shl d, a, d (amounts past 32 clamp to 32)";
    // shr.s32 d, d, d: the amount is x read as .u32; past 31 it clamps to 32, which fills with the sign.
    uint32_t sr = x >= 32 ? (sx < 0 ? 0xFFFFFFFFu : 0u) : uint32_t(sx >> x);
    EXPECT_EQ(o[13], sr) << "shr.s32 d, d, d";
    EXPECT_EQ(o[14], sx < sy ? x : y) << "selp d, a, d, p";
    // prmt.b32 d, a, b, d: byte i of d is byte z[4i+2:4i] of {b, a} (a the low four), sign-spread if z[4i+3].
    uint64_t bytes = (uint64_t(y) << 32) | x;
    uint32_t perm = 0;
    for (int i = 0; i < 4; ++i) {
      unsigned sel = (z >> (4 * i)) & 0xF;
      uint32_t byte = (bytes >> (8 * (sel & 7))) & 0xFF;
      if (sel & 8)
        byte = (byte & 0x80) ? 0xFF : 0;
      perm |= byte << (8 * i);
    }
    EXPECT_EQ(o[15], perm) << "prmt d, a, b, d (the selector is the destination)";
    EXPECT_EQ(o[16], 0u - x) << "neg d, d";
    EXPECT_EQ(o[17], ~x) << "not d, d";
    EXPECT_EQ(o[18], uint32_t(std::popcount(x))) << "popc d, d";
    uint32_t rev = 0;
    for (int i = 0; i < 32; ++i)
      rev |= ((x >> i) & 1u) << (31 - i);
    EXPECT_EQ(o[19], rev) << "brev d, d";
    EXPECT_EQ(o[20], uint32_t(sx / sy)) << "div.s32 d, a, d (truncates toward zero)";
    EXPECT_EQ(o[21], 0u) << "rem.u32 d, d, d";
    EXPECT_EQ(o[22], uint32_t(sx >= 0 && sx < sy)) << "setp.lt.and p, a, b, p";
    // setp.ne.or p|q, x, y, p with p = (z < 100) before: p = (x != y) || c, q = (x == y) || c.
    bool c = z < 100;
    EXPECT_EQ(o[23], uint32_t(x != y || c)) << "setp.ne.or p|q, a, b, p: p";
    EXPECT_EQ(o[24], uint32_t(x == y || c)) << "setp.ne.or p|q, a, b, p: q from the old p";
    // setp.eq.xor p|q, x, y, q with q = (z < 100) before: p = (x == y) ^ c, q = (x != y) ^ c.
    EXPECT_EQ(o[25], uint32_t((x == y) != c)) << "setp.eq.xor p|q, a, b, q: p";
    EXPECT_EQ(o[26], uint32_t((x != y) != c)) << "setp.eq.xor p|q, a, b, q: q";
    EXPECT_EQ(o[27], 0u) << "xor.pred p, p, p";
    uint64_t xy = (uint64_t(x) << 32) | y;
    EXPECT_EQ(w[0], xy + xy) << "add.s64 d, d, d";
    EXPECT_EQ(w[1], uint64_t(x) * y + z) << "mad.wide.u32 d, a, b, d (a 64-bit c)";
  }
}

// Each thread reads a, b (f32) from in[2 tid ..] and writes 12 words: ten f32 results and one f64.
const std::string kFloatAlias = ptx(R"PTX(
.visible .entry float_alias(.param .u64 .ptr .align 1 float_alias_param_0,
                            .param .u64 .ptr .align 1 float_alias_param_1)
{
  .reg .f32 %f<24>;
  .reg .f64 %fd<4>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<8>;

  ld.param.u64 %rd1, [float_alias_param_0];
  ld.param.u64 %rd2, [float_alias_param_1];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 8;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.v2.f32 {%f1, %f2}, [%rd4];
  mov.f32 %f10, %f1;
  add.rn.f32 %f10, %f10, %f10;
  mov.f32 %f11, %f2;
  sub.rn.f32 %f11, %f1, %f11;
  mov.f32 %f12, %f1;
  fma.rn.f32 %f12, %f12, %f2, %f12;
  mov.f32 %f13, %f1;
  mul.rn.f32 %f13, %f13, %f13;
  mov.f32 %f14, %f2;
  min.f32 %f14, %f1, %f14;
  mov.f32 %f15, %f1;
  max.f32 %f15, %f15, %f2;
  mov.f32 %f16, %f1;
  neg.f32 %f16, %f16;
  mov.f32 %f17, %f2;
  abs.f32 %f17, %f17;
  mov.f32 %f18, %f2;
  div.rn.f32 %f18, %f1, %f18;
  mov.f32 %f19, %f2;
  mad.rn.f32 %f19, %f1, %f19, %f19;
  cvt.f64.f32 %fd1, %f1;
  cvt.f64.f32 %fd2, %f2;
  add.rn.f64 %fd1, %fd1, %fd2;
  mul.wide.u32 %rd5, %r1, 48;
  add.s64 %rd6, %rd2, %rd5;
  st.global.v4.f32 [%rd6], {%f10, %f11, %f12, %f13};
  st.global.v4.f32 [%rd6+16], {%f14, %f15, %f16, %f17};
  st.global.v2.f32 [%rd6+32], {%f18, %f19};
  st.global.f64 [%rd6+40], %fd1;
  ret;
}
)PTX");

TEST_F(PtxEmuAliasAlu, FloatArithmeticReadsItsSourcesBeforeWritingThem) {
  // Nonzero, non-NaN pairs (min/max of signed zeros and NaN are other tests' business); a few inexact.
  const std::vector<float> in = {1.5f, 2.25f, -3.0f, 0.1f, 1e30f, -7.5e-3f, 3.0f, 3.0f};
  uint64_t dIn = upload(in), dOut = zeros<uint32_t>(12 * in.size() / 2);
  run(kFloatAlias, "float_alias", {1}, {unsigned(in.size() / 2)}, dIn, dOut);
  std::vector<uint32_t> out = download<uint32_t>(dOut, 12 * in.size() / 2);
  auto bits = [](float f) { return std::bit_cast<uint32_t>(f); };
  for (size_t t = 0; t < in.size() / 2; ++t) {
    const float a = in[2 * t], b = in[2 * t + 1];
    SCOPED_TRACE("a = " + std::to_string(a) + ", b = " + std::to_string(b));
    const uint32_t *o = &out[12 * t];
    // The host's float arithmetic rounds to nearest even, as .rn does; std::fma rounds once, as fma.rn.
    EXPECT_EQ(o[0], bits(a + a)) << "add d, d, d";
    EXPECT_EQ(o[1], bits(a - b)) << "sub d, a, d";
    EXPECT_EQ(o[2], bits(std::fma(a, b, a))) << "fma d, d, b, d";
    EXPECT_EQ(o[3], bits(a * a)) << "mul d, d, d";
    EXPECT_EQ(o[4], bits(std::fmin(a, b))) << "min d, a, d";
    EXPECT_EQ(o[5], bits(std::fmax(a, b))) << "max d, d, b";
    EXPECT_EQ(o[6], bits(-a)) << "neg d, d";
    EXPECT_EQ(o[7], bits(std::fabs(b))) << "abs d, d";
    EXPECT_EQ(o[8], bits(a / b)) << "div.rn d, a, d";
    EXPECT_EQ(o[9], bits(std::fma(a, b, b))) << "mad.rn.f32 (fused, as fma) d, a, d, d";
    double sum = double(a) + double(b);
    EXPECT_EQ(o[10] | uint64_t(o[11]) << 32, std::bit_cast<uint64_t>(sum)) << "add.f64 d, d, b";
  }
}

// Half-precision pairs in .b32 registers and one f16 in a .b16 register, each written over a source. Halves
// are packed "d[31:16] = a's upper element, d[15:0] = the lower" and each is computed on its own; every value
// below is exact in its format, so the expected bits are the inputs' sums and products encoded by hand:
// f16 1.0 = 0x3C00, 1.5 = 0x3E00, 1.75 = 0x3F00, 2.0 = 0x4000, 2.25 = 0x4080, 3.0 = 0x4200, 6.0 = 0x4600,
// 12.0 = 0x4A00, 0.25 = 0x3400, -1.0 = 0xBC00, -2.0 = 0xC000; bf16 (an f32's upper half) 0.5 = 0x3F00,
// 1.0 = 0x3F80, 2.0 = 0x4000, 3.0 = 0x4040, 4.0 = 0x4080.
TEST_F(PtxEmuAliasAlu, HalfPrecisionArithmeticReadsItsSourcesBeforeWritingThem) {
  const std::string text = ptx(R"PTX(
.visible .entry half_alias(.param .u64 .ptr .align 1 half_alias_param_0)
{
  .reg .b16 %h<4>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<2>;

  ld.param.u64 %rd1, [half_alias_param_0];
  mov.b32 %r1, 0x3E004000;
  mov.b32 %r2, 0x3400BC00;
  add.rn.f16x2 %r1, %r1, %r2;
  mov.b32 %r3, 0x40004200;
  fma.rn.f16x2 %r3, %r3, %r3, %r3;
  mov.b32 %r4, 0x3F804000;
  mov.b32 %r5, 0x40403F00;
  fma.rn.bf16x2 %r4, %r4, %r5, %r4;
  mov.b32 %r6, 0x3F803F80;
  mov.b32 %r7, 0x40404080;
  sub.rn.bf16x2 %r6, %r7, %r6;
  mov.b32 %r8, 0x3C00BC00;
  neg.f16x2 %r8, %r8;
  mov.b32 %r9, 0x3C00C000;
  mov.b32 %r10, 0x4000BC00;
  max.f16x2 %r9, %r9, %r10;
  mov.b16 %h1, 0x3E00;
  mul.rn.f16 %h1, %h1, %h1;
  cvt.u32.u16 %r11, %h1;
  st.global.v4.b32 [%rd1], {%r1, %r3, %r4, %r6};
  st.global.v4.b32 [%rd1+16], {%r8, %r9, %r11, %r11};
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint32_t>(8);
  run(text, "half_alias", {1}, {1}, dOut);
  std::vector<uint32_t> o = download<uint32_t>(dOut, 8);
  EXPECT_EQ(o[0], 0x3F003C00u) << "add.f16x2 d, d, b: (1.5 + 0.25, 2.0 + -1.0)";
  EXPECT_EQ(o[1], 0x46004A00u) << "fma.f16x2 d, d, d, d: (2*2 + 2, 3*3 + 3)";
  EXPECT_EQ(o[2], 0x40804040u) << "fma.bf16x2 d, d, b, d: (1*3 + 1, 2*0.5 + 2)";
  EXPECT_EQ(o[3], 0x40004040u) << "sub.bf16x2 d, a, d: (3 - 1, 4 - 1)";
  EXPECT_EQ(o[4], 0xBC003C00u) << "neg.f16x2 d, d";
  EXPECT_EQ(o[5], 0x4000BC00u) << "max.f16x2 d, d, b: (max(1, 2), max(-2, -1))";
  EXPECT_EQ(o[6], 0x4080u) << "mul.f16 d, d, d: 1.5 * 1.5 = 2.25";
}

} // namespace
} // namespace moec::ptxemu::testing
