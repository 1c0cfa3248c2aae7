//===- PtxEmuTest.cpp - The PTX emulator against the PTX ISA's semantics ---===//
//
// Small hand-written PTX kernels run through moec::ptxemu. Every expected value is derived here from the
// PTX ISA text (written out as hex constants with their derivation, or computed with plain C++ integer
// arithmetic), never by calling the emulator's own Alu / Numeric code.
//
// The PTX ISA rules these tests rely on:
//  - cvt: ".rn rounding to nearest, with ties to even; .rz toward zero; .rm toward negative infinity; .rp
//    toward positive infinity"; "By default, subnormal numbers are supported"; "For float-to-integer
//    conversions, the result is clamped to the destination range by default"; "In float-to-integer
//    conversions ... NaN input results in ... Zero if source is not .f64 and destination is not .s64,
//    .u64. Otherwise 1 << (BitWidth(dst) - 1)"; for .f16x2/.bf16x2 "d[31:16] = convert(a); d[15:0] =
//    convert(b)".
//  - shfl.sync: j = lane ^ b (bfly), lane + b (down), lane - b (up), minLane | (b & ~segmask) (idx);
//    pval = j <= maxLane (j >= maxLane for up); "if (!pval) j = lane"; d = a[j].
//  - div/rem on integers truncate toward zero, as C does.
//===----------------------------------------------------------------------===//
#include "PtxEmuFixture.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace moec::ptxemu {
namespace {

using testing::faultLine;
using testing::lineOf;
using testing::ptx;

/// How a parse error names the line of `needle`: "PTX line N: ...".
std::string parseLine(std::string_view text, std::string_view needle) {
  return "PTX line " + std::to_string(lineOf(text, needle)) + ":";
}

bool isNanF16(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0; }
bool isNanBf16(uint16_t h) { return (h & 0x7F80) == 0x7F80 && (h & 0x007F) != 0; }
bool isNanF32(uint32_t f) { return (f & 0x7F800000u) == 0x7F800000u && (f & 0x007FFFFFu) != 0; }

class PtxEmu : public testing::PtxEmuFixture {
protected:
  /// The PtxError parsing `text` throws (a test failure when it parses).
  static std::string parseError(const std::string &text) {
    try {
      parsePtx(text);
    } catch (const PtxError &e) {
      return e.what();
    }
    ADD_FAILURE() << "the PTX parsed";
    return "";
  }
};

// ===================================================================================================
// 1. cvt
// ===================================================================================================

// Each lane converts in[tid] (f32) eight ways: f16 rn/rz/rm/rp, then bf16 rn/rz/rm/rp, into out[8*tid..].
const std::string kCvt16 = ptx(R"PTX(
.visible .entry cvt16(.param .u64 .ptr .align 1 cvt16_param_0, .param .u64 .ptr .align 1 cvt16_param_1)
{
  .reg .b16 %h<8>;
  .reg .b32 %r<2>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<8>;

  ld.param.u64 %rd1, [cvt16_param_0];
  ld.param.u64 %rd2, [cvt16_param_1];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  cvt.rn.f16.f32 %h0, %f1;
  cvt.rz.f16.f32 %h1, %f1;
  cvt.rm.f16.f32 %h2, %f1;
  cvt.rp.f16.f32 %h3, %f1;
  cvt.rn.bf16.f32 %h4, %f1;
  cvt.rz.bf16.f32 %h5, %f1;
  cvt.rm.bf16.f32 %h6, %f1;
  cvt.rp.bf16.f32 %h7, %f1;
  mul.wide.u32 %rd5, %r1, 16;
  add.s64 %rd6, %rd2, %rd5;
  st.global.v4.b16 [%rd6], {%h0, %h1, %h2, %h3};
  st.global.v4.b16 [%rd6+8], {%h4, %h5, %h6, %h7};
  ret;
}
)PTX");

struct Cvt16Row {
  uint32_t in;
  uint16_t rn, rz, rm, rp;
  const char *what;
};

TEST_F(PtxEmu, CvtF32ToF16Rounding) {
  // binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits; 1.0 = 0x3C00, ulp(1) = 2^-10, max finite
  // 65504 = 0x7BFF, Inf = 0x7C00, smallest subnormal 2^-24 = 0x0001.
  const std::vector<Cvt16Row> rows = {
      {0x3F800000, 0x3C00, 0x3C00, 0x3C00, 0x3C00, "1.0 exact"},
      // 1 + 2^-11 (f32 fraction bit 12 set: 0x1000) lies halfway between 0x3C00 and 0x3C01: even is 0x3C00.
      {0x3F801000, 0x3C00, 0x3C00, 0x3C00, 0x3C01, "tie 1+2^-11"},
      // 1 + 3*2^-11 (0x3000) lies halfway between 0x3C01 and 0x3C02: even is 0x3C02.
      {0x3F803000, 0x3C02, 0x3C01, 0x3C01, 0x3C02, "tie 1+3*2^-11"},
      // One f32 ulp above the first tie: nearest is 0x3C01.
      {0x3F801001, 0x3C01, 0x3C00, 0x3C00, 0x3C01, "just above tie"},
      // One f32 ulp below the first tie: nearest is 0x3C00, rp still rounds up.
      {0x3F800FFF, 0x3C00, 0x3C00, 0x3C00, 0x3C01, "just below tie"},
      // -(1 + 2^-11): a tie; rm goes away from zero (more negative) to 0xBC01, rp toward zero to 0xBC00.
      {0xBF801000, 0xBC00, 0xBC00, 0xBC01, 0xBC00, "negative tie"},
      // -(1 + 2^-11 + 2^-23): nearest is 0xBC01.
      {0xBF801001, 0xBC01, 0xBC00, 0xBC01, 0xBC00, "negative just above tie"},
      // 70000 = 1.068115234375 * 2^16 (f32 0x4788B800) > 65504: overflow. rn/rp -> Inf, rz/rm -> max finite.
      {0x4788B800, 0x7C00, 0x7BFF, 0x7BFF, 0x7C00, "70000 overflows"},
      // -70000: rn/rm -> -Inf, rz/rp -> -65504.
      {0xC788B800, 0xFC00, 0xFBFF, 0xFC00, 0xFBFF, "-70000 overflows"},
      // 65520 = 0x477FF000 is halfway between 65504 (0x7BFF, odd) and 65536 (the next binade = Inf): rn -> Inf.
      {0x477FF000, 0x7C00, 0x7BFF, 0x7BFF, 0x7C00, "65520 ties to Inf"},
      // One f32 ulp below 65520 rounds to nearest 65504.
      {0x477FEFFF, 0x7BFF, 0x7BFF, 0x7BFF, 0x7C00, "just below 65520"},
      {0x7F800000, 0x7C00, 0x7C00, 0x7C00, 0x7C00, "+Inf"},
      // 2^-14 (f32 0x38800000) is the smallest f16 normal 0x0400.
      {0x38800000, 0x0400, 0x0400, 0x0400, 0x0400, "smallest normal"},
      // Subnormal results. 2^-25 (0x33000000) is halfway between 0 and 2^-24 (0x0001): even is 0.
      {0x33000000, 0x0000, 0x0000, 0x0000, 0x0001, "2^-25 ties to zero"},
      // 1.5 * 2^-24 (0x33C00000) is halfway between 0x0001 and 0x0002: even is 0x0002.
      {0x33C00000, 0x0002, 0x0001, 0x0001, 0x0002, "1.5*2^-24 ties to 2"},
      // 1.25 * 2^-24 (0x33A00000): nearest 0x0001.
      {0x33A00000, 0x0001, 0x0001, 0x0001, 0x0002, "1.25*2^-24"},
      // -2^-25 (0xB3000000): rn/rz/rp give -0 (0x8000), rm goes to -2^-24 (0x8001).
      {0xB3000000, 0x8000, 0x8000, 0x8001, 0x8000, "-2^-25"},
      // The smallest f32 normal 2^-126 is far below 2^-25: zero, except rp -> 0x0001.
      {0x00800000, 0x0000, 0x0000, 0x0000, 0x0001, "2^-126"},
  };
  std::vector<uint32_t> in;
  for (const Cvt16Row &r : rows)
    in.push_back(r.in);
  in.push_back(0x7FC00000); // NaN
  in.push_back(0xFF800001); // a negative signaling NaN: still a NaN, never Inf
  uint64_t dIn = upload(in), dOut = zeros<uint16_t>(8 * in.size());
  run(kCvt16, "cvt16", {1}, {unsigned(in.size())}, dIn, dOut);
  std::vector<uint16_t> out = download<uint16_t>(dOut, 8 * in.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const Cvt16Row &r = rows[i];
    SCOPED_TRACE(r.what);
    EXPECT_EQ(out[8 * i + 0], r.rn) << std::hex << "rn of 0x" << r.in;
    EXPECT_EQ(out[8 * i + 1], r.rz) << std::hex << "rz of 0x" << r.in;
    EXPECT_EQ(out[8 * i + 2], r.rm) << std::hex << "rm of 0x" << r.in;
    EXPECT_EQ(out[8 * i + 3], r.rp) << std::hex << "rp of 0x" << r.in;
  }
  for (size_t i = rows.size(); i < in.size(); ++i)
    for (int m = 0; m < 4; ++m)
      EXPECT_TRUE(isNanF16(out[8 * i + m])) << std::hex << "f16 of NaN 0x" << in[i] << " gave 0x" << out[8 * i + m];
}

TEST_F(PtxEmu, CvtF32ToBf16Rounding) {
  // bf16 is the upper half of an f32: 1.0 = 0x3F80; the 16 dropped bits decide the rounding (0x8000 = half).
  const std::vector<Cvt16Row> rows = {
      {0x3F800000, 0x3F80, 0x3F80, 0x3F80, 0x3F80, "1.0 exact"},
      // Dropped 0x8000 above 0x3F80 (even): tie -> 0x3F80.
      {0x3F808000, 0x3F80, 0x3F80, 0x3F80, 0x3F81, "tie to even below"},
      // Dropped 0x8000 above 0x3F81 (odd): tie -> 0x3F82.
      {0x3F818000, 0x3F82, 0x3F81, 0x3F81, 0x3F82, "tie to even above"},
      {0x3F808001, 0x3F81, 0x3F80, 0x3F80, 0x3F81, "just above tie"},
      {0x3F807FFF, 0x3F80, 0x3F80, 0x3F80, 0x3F81, "just below tie"},
      // Negative: magnitude rounds like the positive case; rm away from zero, rp toward zero.
      {0xBF808001, 0xBF81, 0xBF80, 0xBF81, 0xBF80, "negative just above tie"},
      {0xBF818000, 0xBF82, 0xBF81, 0xBF82, 0xBF81, "negative tie"},
      // FLT_MAX 0x7F7FFFFF: dropped 0xFFFF > half above 0x7F7F (bf16 max finite); up is 0x7F80 = Inf.
      {0x7F7FFFFF, 0x7F80, 0x7F7F, 0x7F7F, 0x7F80, "FLT_MAX overflows"},
      {0xFF7FFFFF, 0xFF80, 0xFF7F, 0xFF80, 0xFF7F, "-FLT_MAX overflows"},
      // 0x7F7F8000: halfway between 0x7F7F (odd) and 2^128 (even, = Inf): rn -> Inf.
      {0x7F7F8000, 0x7F80, 0x7F7F, 0x7F7F, 0x7F80, "tie to Inf"},
      {0x7F7F7FFF, 0x7F7F, 0x7F7F, 0x7F7F, 0x7F80, "just below the Inf tie"},
      {0xFF800000, 0xFF80, 0xFF80, 0xFF80, 0xFF80, "-Inf"},
      // Subnormal results (f32 subnormal inputs, kept since cvt has no .ftz here).
      // 0x00008000 is halfway between 0 and bf16 0x0001: even is 0.
      {0x00008000, 0x0000, 0x0000, 0x0000, 0x0001, "subnormal tie to zero"},
      // 0x00018000 is halfway between 0x0001 and 0x0002: even is 0x0002.
      {0x00018000, 0x0002, 0x0001, 0x0001, 0x0002, "subnormal tie to 2"},
      // -(0x00008001): just above half of 0x0001 in magnitude: rn -> 0x8001, rz/rp -> -0.
      {0x80008001, 0x8001, 0x8000, 0x8001, 0x8000, "negative subnormal"},
      // The smallest f32 subnormal: 0, except rp -> 0x0001.
      {0x00000001, 0x0000, 0x0000, 0x0000, 0x0001, "smallest f32 subnormal"},
  };
  std::vector<uint32_t> in;
  for (const Cvt16Row &r : rows)
    in.push_back(r.in);
  in.push_back(0x7FC00000); // NaN
  in.push_back(0x7F800001); // a signaling NaN whose upper half alone (0x7F80) would read as Inf
  uint64_t dIn = upload(in), dOut = zeros<uint16_t>(8 * in.size());
  run(kCvt16, "cvt16", {1}, {unsigned(in.size())}, dIn, dOut);
  std::vector<uint16_t> out = download<uint16_t>(dOut, 8 * in.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const Cvt16Row &r = rows[i];
    SCOPED_TRACE(r.what);
    EXPECT_EQ(out[8 * i + 4], r.rn) << std::hex << "rn of 0x" << r.in;
    EXPECT_EQ(out[8 * i + 5], r.rz) << std::hex << "rz of 0x" << r.in;
    EXPECT_EQ(out[8 * i + 6], r.rm) << std::hex << "rm of 0x" << r.in;
    EXPECT_EQ(out[8 * i + 7], r.rp) << std::hex << "rp of 0x" << r.in;
  }
  for (size_t i = rows.size(); i < in.size(); ++i)
    for (int m = 4; m < 8; ++m)
      EXPECT_TRUE(isNanBf16(out[8 * i + m])) << std::hex << "bf16 of NaN 0x" << in[i] << " gave 0x" << out[8 * i + m];
}

TEST_F(PtxEmu, CvtPackedX2PutsAInTheUpperHalf) {
  const std::string text = ptx(R"PTX(
.visible .entry pack(.param .u64 .ptr .align 1 pack_param_0)
{
  .reg .b32 %r<8>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [pack_param_0];
  cvta.to.global.u64 %rd1, %rd1;
  mov.b32 %f1, 0f3F800000;
  mov.b32 %f2, 0fC0000000;
  cvt.rn.bf16x2.f32 %r1, %f1, %f2;
  mov.b32 %f3, 0f3F818000;
  mov.b32 %f4, 0f3F808000;
  cvt.rn.bf16x2.f32 %r2, %f3, %f4;
  cvt.rn.f16x2.f32 %r3, %f1, %f2;
  mov.b32 %f5, 0f3F803000;
  mov.b32 %f6, 0f4788B800;
  cvt.rn.f16x2.f32 %r4, %f5, %f6;
  st.global.v4.b32 [%rd1], {%r1, %r2, %r3, %r4};
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint32_t>(4);
  run(text, "pack", {1}, {1}, dOut);
  std::vector<uint32_t> out = download<uint32_t>(dOut, 4);
  // a = 1.0 -> bf16 0x3F80 (upper), b = -2.0 (0xC0000000) -> bf16 0xC000 (lower).
  EXPECT_EQ(out[0], 0x3F80C000u);
  // a = 0x3F818000 ties to 0x3F82 (upper); b = 0x3F808000 ties to 0x3F80 (lower).
  EXPECT_EQ(out[1], 0x3F823F80u);
  // f16x2: 1.0 -> 0x3C00 (upper), -2.0 -> 0xC000 (lower).
  EXPECT_EQ(out[2], 0x3C00C000u);
  // f16x2: 1+3*2^-11 ties to 0x3C02 (upper); 70000 overflows to Inf 0x7C00 under rn (lower).
  EXPECT_EQ(out[3], 0x3C027C00u);
}

TEST_F(PtxEmu, CvtF32ToS32IntegerRounding) {
  const std::string text = ptx(R"PTX(
.visible .entry cvti(.param .u64 .ptr .align 1 cvti_param_0, .param .u64 .ptr .align 1 cvti_param_1)
{
  .reg .b32 %r<8>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<8>;

  ld.param.u64 %rd1, [cvti_param_0];
  ld.param.u64 %rd2, [cvti_param_1];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  cvt.rzi.s32.f32 %r2, %f1;
  cvt.rni.s32.f32 %r3, %f1;
  cvt.rmi.s32.f32 %r4, %f1;
  cvt.rpi.s32.f32 %r5, %f1;
  mul.wide.u32 %rd5, %r1, 16;
  add.s64 %rd6, %rd2, %rd5;
  st.global.v4.b32 [%rd6], {%r2, %r3, %r4, %r5};
  ret;
}
)PTX");
  struct Row {
    uint32_t in;
    int32_t rzi, rni, rmi, rpi;
    const char *what;
  };
  const std::vector<Row> rows = {
      {0x40200000, 2, 2, 2, 3, "2.5: rni ties to even 2"},
      {0xC0200000, -2, -2, -3, -2, "-2.5"},
      {0x40600000, 3, 4, 3, 4, "3.5: rni ties to even 4"},
      {0xBF000000, 0, 0, -1, 0, "-0.5"},
      {0x3F000001, 0, 1, 0, 1, "just above 0.5"},
      {0xBFC00000, -1, -2, -2, -1, "-1.5"},
      // 2147483520 = 0x4EFFFFFF, the largest f32 below 2^31: exact.
      {0x4EFFFFFF, 0x7FFFFF80, 0x7FFFFF80, 0x7FFFFF80, 0x7FFFFF80, "largest f32 below 2^31"},
      // -2^31 (0xCF000000) is representable: INT32_MIN exactly.
      {0xCF000000, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, "-2^31"},
      // Out of range: clamped to the destination range by default.
      {0x4F000000, INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX, "2^31 saturates"},
      {0x501502F9, INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX, "1e10 saturates"},
      {0xD01502F9, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, "-1e10 saturates"},
      {0x7F800000, INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX, "+Inf"},
      {0xFF800000, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, "-Inf"},
      // NaN with an .f32 source and an .s32 destination: zero.
      {0x7FC00000, 0, 0, 0, 0, "NaN"},
      {0xFFFFFFFF, 0, 0, 0, 0, "negative NaN"},
  };
  std::vector<uint32_t> in;
  for (const Row &r : rows)
    in.push_back(r.in);
  uint64_t dIn = upload(in), dOut = zeros<int32_t>(4 * in.size());
  run(text, "cvti", {1}, {unsigned(in.size())}, dIn, dOut);
  std::vector<int32_t> out = download<int32_t>(dOut, 4 * in.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(rows[i].what);
    EXPECT_EQ(out[4 * i + 0], rows[i].rzi);
    EXPECT_EQ(out[4 * i + 1], rows[i].rni);
    EXPECT_EQ(out[4 * i + 2], rows[i].rmi);
    EXPECT_EQ(out[4 * i + 3], rows[i].rpi);
  }
}

// EMULATOR BUG: Numeric.cpp's floatToInt returns 0 for every NaN, but the PTX ISA (cvt, Integer Notes) says:
// "In float-to-integer conversions, depending upon conversion types, NaN input results in following value:
// 1. Zero if source is not .f64 and destination is not .s64, .u64. 2. Otherwise 1 << (BitWidth(dst) - 1)
// corresponding to the value of (MAXINT >> 1) + 1 for unsigned type or MININT for signed type."
TEST_F(PtxEmu, CvtNaNTo64BitOrFromF64) {
  const std::string text = ptx(R"PTX(
.visible .entry nan64(.param .u64 .ptr .align 1 nan64_param_0)
{
  .reg .b32 %r<4>;
  .reg .f32 %f<2>;
  .reg .f64 %fd<2>;
  .reg .b64 %rd<8>;

  ld.param.u64 %rd1, [nan64_param_0];
  cvta.to.global.u64 %rd1, %rd1;
  mov.b32 %f1, 0f7FC00000;
  mov.b64 %fd1, 0d7FF8000000000000;
  cvt.rzi.s64.f32 %rd2, %f1;
  cvt.rzi.u64.f32 %rd3, %f1;
  cvt.rzi.s64.f64 %rd4, %fd1;
  cvt.rzi.s32.f64 %r1, %fd1;
  cvt.u64.u32 %rd5, %r1;
  st.global.v2.b64 [%rd1], {%rd2, %rd3};
  st.global.v2.b64 [%rd1+16], {%rd4, %rd5};
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint64_t>(4);
  run(text, "nan64", {1}, {1}, dOut);
  std::vector<uint64_t> out = download<uint64_t>(dOut, 4);
  EXPECT_EQ(out[0], 0x8000000000000000ull) << "cvt.rzi.s64.f32 NaN: MININT of s64";
  EXPECT_EQ(out[1], 0x8000000000000000ull) << "cvt.rzi.u64.f32 NaN: (MAXINT >> 1) + 1 of u64";
  EXPECT_EQ(out[2], 0x8000000000000000ull) << "cvt.rzi.s64.f64 NaN";
  EXPECT_EQ(out[3], 0x80000000ull) << "cvt.rzi.s32.f64 NaN: MININT of s32";
}

TEST_F(PtxEmu, CvtWidenF16AndBf16ToF32IsExact) {
  const std::string text = ptx(R"PTX(
.visible .entry widen(.param .u64 .ptr .align 1 widen_param_0, .param .u64 .ptr .align 1 widen_param_1)
{
  .reg .b16 %h<2>;
  .reg .b32 %r<2>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<8>;

  ld.param.u64 %rd1, [widen_param_0];
  ld.param.u64 %rd2, [widen_param_1];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 2;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.b16 %h1, [%rd4];
  cvt.f32.f16 %f1, %h1;
  cvt.f32.bf16 %f2, %h1;
  mul.wide.u32 %rd5, %r1, 8;
  add.s64 %rd6, %rd2, %rd5;
  st.global.v2.f32 [%rd6], {%f1, %f2};
  ret;
}
)PTX");
  struct Row {
    uint16_t in;
    uint32_t fromF16, fromBf16;
    const char *what;
  };
  // f16 -> f32: exponent rebiased by 127 - 15 = 112, fraction shifted left by 13; bf16 -> f32: bits << 16.
  const std::vector<Row> rows = {
      {0x3C01, 0x3F802000, 0x3C010000, "1 + 2^-10"},
      {0x0001, 0x33800000, 0x00010000, "smallest subnormal: 2^-24; bf16 stays an f32 subnormal"},
      // 0x03FF = 1023 * 2^-24 = 1.998046875 * 2^-15: exponent 112 (0x38000000), fraction 0x3FF << 14.
      {0x03FF, 0x387FC000, 0x03FF0000, "largest f16 subnormal"},
      {0x7BFF, 0x477FE000, 0x7BFF0000, "65504"},
      {0xFC00, 0xFF800000, 0xFC000000, "-Inf in f16"},
      {0x8000, 0x80000000, 0x80000000, "-0"},
      {0xC000, 0xC0000000, 0xC0000000, "-2"},
      {0x3555, 0x3EAAA000, 0x35550000, "0.333251953125 in f16"},
  };
  std::vector<uint16_t> in;
  for (const Row &r : rows)
    in.push_back(r.in);
  in.push_back(0x7FC1); // NaN in both formats
  uint64_t dIn = upload(in), dOut = zeros<uint32_t>(2 * in.size());
  run(text, "widen", {1}, {unsigned(in.size())}, dIn, dOut);
  std::vector<uint32_t> out = download<uint32_t>(dOut, 2 * in.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(rows[i].what);
    EXPECT_EQ(out[2 * i], rows[i].fromF16) << std::hex << out[2 * i];
    EXPECT_EQ(out[2 * i + 1], rows[i].fromBf16) << std::hex << out[2 * i + 1];
  }
  size_t n = rows.size();
  EXPECT_TRUE(isNanF32(out[2 * n])) << std::hex << out[2 * n];
  EXPECT_TRUE(isNanF32(out[2 * n + 1])) << std::hex << out[2 * n + 1];
}

TEST_F(PtxEmu, CvtIntegerWidths) {
  const std::string text = ptx(R"PTX(
.visible .entry ints(.param .u64 .ptr .align 1 ints_param_0)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<12>;

  ld.param.u64 %rd1, [ints_param_0];
  cvta.to.global.u64 %rd1, %rd1;
  mov.b32 %r1, -5;
  cvt.s64.s32 %rd2, %r1;
  cvt.u64.u32 %rd3, %r1;
  mov.b64 %rd4, 0x123456789ABCDEF0;
  cvt.u32.u64 %r2, %rd4;
  cvt.u64.u32 %rd5, %r2;
  cvt.s64.s32 %rd6, %r2;
  mov.b32 %r3, 0x180;
  cvt.s32.s8 %r4, %r3;
  cvt.u64.u32 %rd7, %r4;
  mov.b32 %r5, 0x17F;
  cvt.s32.s8 %r6, %r5;
  cvt.u64.u32 %rd8, %r6;
  st.global.v2.b64 [%rd1], {%rd2, %rd3};
  st.global.v2.b64 [%rd1+16], {%rd5, %rd6};
  st.global.v2.b64 [%rd1+32], {%rd7, %rd8};
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint64_t>(6);
  run(text, "ints", {1}, {1}, dOut);
  std::vector<uint64_t> out = download<uint64_t>(dOut, 6);
  EXPECT_EQ(out[0], 0xFFFFFFFFFFFFFFFBull) << "cvt.s64.s32 of -5 sign-extends";
  EXPECT_EQ(out[1], 0x00000000FFFFFFFBull) << "cvt.u64.u32 of 0xFFFFFFFB zero-extends";
  EXPECT_EQ(out[2], 0x000000009ABCDEF0ull) << "cvt.u32.u64 keeps the low 32 bits";
  EXPECT_EQ(out[3], 0xFFFFFFFF9ABCDEF0ull) << "0x9ABCDEF0 as s32 is negative";
  EXPECT_EQ(out[4], 0x00000000FFFFFF80ull) << "cvt.s32.s8 of low byte 0x80 is -128";
  EXPECT_EQ(out[5], 0x000000000000007Full) << "cvt.s32.s8 of low byte 0x7F is 127";
}

// ===================================================================================================
// 2. shfl.sync
// ===================================================================================================

TEST_F(PtxEmu, ShflSyncModes) {
  const std::string text = ptx(R"PTX(
.visible .entry shfl(.param .u64 .ptr .align 1 shfl_param_0)
{
  .reg .pred %p<4>;
  .reg .b32 %r<32>;
  .reg .b64 %rd<8>;

  ld.param.u64 %rd1, [shfl_param_0];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %laneid;
  mad.lo.u32 %r2, %r1, 3, 100;
  shfl.sync.bfly.b32 %r10, %r2, 1, 31, -1;
  shfl.sync.bfly.b32 %r11, %r2, 2, 31, -1;
  shfl.sync.bfly.b32 %r12, %r2, 4, 31, -1;
  shfl.sync.bfly.b32 %r13, %r2, 8, 31, -1;
  shfl.sync.bfly.b32 %r14, %r2, 16, 31, -1;
  shfl.sync.down.b32 %r15|%p1, %r2, 3, 31, -1;
  selp.u32 %r16, 1, 0, %p1;
  shfl.sync.up.b32 %r17|%p2, %r2, 2, 0, -1;
  selp.u32 %r18, 1, 0, %p2;
  shfl.sync.idx.b32 %r19, %r2, 5, 31, -1;
  sub.u32 %r3, 31, %r1;
  shfl.sync.idx.b32 %r20, %r2, %r3, 31, -1;
  shfl.sync.down.b32 %r21, %r2, 1, 0x181f, 0xffffffff;
  mul.wide.u32 %rd2, %r1, 48;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v4.b32 [%rd3], {%r10, %r11, %r12, %r13};
  st.global.v4.b32 [%rd3+16], {%r14, %r15, %r16, %r17};
  st.global.v4.b32 [%rd3+32], {%r18, %r19, %r20, %r21};
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint32_t>(32 * 12);
  run(text, "shfl", {1}, {32}, dOut);
  std::vector<uint32_t> out = download<uint32_t>(dOut, 32 * 12);
  auto value = [](int lane) { return uint32_t(lane * 3 + 100); };
  for (int lane = 0; lane < 32; ++lane) {
    SCOPED_TRACE("lane " + std::to_string(lane));
    const uint32_t *o = &out[size_t(lane) * 12];
    for (int k = 0; k < 5; ++k) // bfly with c = 31: maxLane = 31, every j = lane ^ b is in range
      EXPECT_EQ(o[k], value(lane ^ (1 << k))) << "bfly " << (1 << k);
    // down 3, c = 31: j = lane + 3, in range when j <= 31; otherwise the lane keeps its own value.
    EXPECT_EQ(o[5], lane + 3 <= 31 ? value(lane + 3) : value(lane));
    EXPECT_EQ(o[6], lane + 3 <= 31 ? 1u : 0u);
    // up 2, c = 0: maxLane = 0, j = lane - 2 in range when j >= 0.
    EXPECT_EQ(o[7], lane >= 2 ? value(lane - 2) : value(lane));
    EXPECT_EQ(o[8], lane >= 2 ? 1u : 0u);
    EXPECT_EQ(o[9], value(5)) << "idx 5";
    EXPECT_EQ(o[10], value(31 - lane)) << "idx 31 - lane";
    // down 1 in segments of 8 lanes: c = ((32 - 8) << 8) | 31, segmask = 0x18, maxLane = (lane & 0x18) | 7.
    int maxLane = (lane & 0x18) | 7;
    EXPECT_EQ(o[11], lane + 1 <= maxLane ? value(lane + 1) : value(lane)) << "segmented down";
  }
}

TEST_F(PtxEmu, ShflSyncButterflyReduction) {
  const std::string text = ptx(R"PTX(
.visible .entry wsum(.param .u64 .ptr .align 1 wsum_param_0)
{
  .reg .b32 %r<16>;
  .reg .b64 %rd<8>;

  ld.param.u64 %rd1, [wsum_param_0];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %tid.x;
  add.u32 %r2, %r1, 1;
  shfl.sync.bfly.b32 %r3, %r2, 16, 31, -1;
  add.u32 %r2, %r2, %r3;
  shfl.sync.bfly.b32 %r3, %r2, 8, 31, -1;
  add.u32 %r2, %r2, %r3;
  shfl.sync.bfly.b32 %r3, %r2, 4, 31, -1;
  add.u32 %r2, %r2, %r3;
  shfl.sync.bfly.b32 %r3, %r2, 2, 31, -1;
  add.u32 %r2, %r2, %r3;
  shfl.sync.bfly.b32 %r3, %r2, 1, 31, -1;
  add.u32 %r2, %r2, %r3;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r2;
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint32_t>(64);
  run(text, "wsum", {1}, {64}, dOut); // two warps, each reduces 1..32 on its own (tid + 1 per warp differs)
  std::vector<uint32_t> out = download<uint32_t>(dOut, 64);
  for (int t = 0; t < 64; ++t) {
    uint32_t expected = 0;
    for (int l = 0; l < 32; ++l)
      expected += uint32_t((t / 32) * 32 + l + 1);
    EXPECT_EQ(out[size_t(t)], expected) << "thread " << t; // 528 in warp 0, 1552 in warp 1
  }
}

// ===================================================================================================
// 3. Predicated loads and stores
// ===================================================================================================

TEST_F(PtxEmu, PredicatedLoadsAndStores) {
  const std::string text = ptx(R"PTX(
.visible .entry pred(.param .u64 .ptr .align 1 pred_param_0, .param .u64 .ptr .align 1 pred_param_1,
                     .param .u64 .ptr .align 1 pred_param_2)
{
  .reg .pred %p<5>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<12>;

  ld.param.u64 %rd1, [pred_param_0];
  ld.param.u64 %rd2, [pred_param_1];
  ld.param.u64 %rd3, [pred_param_2];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd4, %r1, 4;
  add.s64 %rd5, %rd1, %rd4;
  add.s64 %rd6, %rd2, %rd4;
  add.s64 %rd7, %rd3, %rd4;
  setp.lt.u32 %p1, %r1, 16;
  mov.u32 %r2, 0xDEAD;
  @%p1 ld.global.u32 %r2, [%rd5];
  st.global.u32 [%rd6], %r2;
  and.b32 %r3, %r1, 1;
  setp.eq.u32 %p2, %r3, 1;
  add.u32 %r4, %r1, 1000;
  @%p2 st.global.u32 [%rd7], %r4;
  setp.ge.u32 %p4, %r1, 16;
  @!%p4 ld.global.u32 %r6, [%rd5];
  setp.gt.u32 %p3, %r1, 100;
  mov.u64 %rd8, 0x10000000000;
  @%p3 ld.global.u32 %r5, [%rd8];
  ret;
}
)PTX");
  // in holds 16 words: lanes 16..31 address past its end, but only under a false predicate.
  std::vector<uint32_t> in(16);
  for (int i = 0; i < 16; ++i)
    in[size_t(i)] = uint32_t(7 * i + 1);
  uint64_t dIn = upload(in), dOut = zeros<uint32_t>(32), dOdd = upload(std::vector<uint32_t>(32, 0x5555));
  Profile p;
  ASSERT_NO_THROW(p = run(text, "pred", {1}, {32}, dIn, dOut, dOdd));
  std::vector<uint32_t> out = download<uint32_t>(dOut, 32), odd = download<uint32_t>(dOdd, 32);
  for (int t = 0; t < 32; ++t) {
    EXPECT_EQ(out[size_t(t)], t < 16 ? uint32_t(7 * t + 1) : 0xDEADu) << "lane " << t;
    EXPECT_EQ(odd[size_t(t)], t % 2 ? uint32_t(t + 1000) : 0x5555u) << "lane " << t;
  }
  // The two loads that had executing lanes count as requests, each for the 16 in-bounds lanes' 64 bytes;
  // the load no lane executed is no request.
  EXPECT_EQ(p.globalLoadRequests, 2);
  EXPECT_EQ(p.loadBytes, 128);
}

// ===================================================================================================
// 4. Integer division, remainder, multiplication
// ===================================================================================================

TEST_F(PtxEmu, IntegerDivRemMul) {
  const std::string text = ptx(R"PTX(
.visible .entry intops(.param .u64 .ptr .align 1 intops_param_0, .param .u64 .ptr .align 1 intops_param_1)
{
  .reg .b32 %r<32>;
  .reg .b64 %rd<48>;

  ld.param.u64 %rd1, [intops_param_0];
  ld.param.u64 %rd2, [intops_param_1];
  mov.b32 %r1, -7;
  mov.b32 %r2, 2;
  mov.b32 %r3, -2;
  mov.b32 %r4, 7;
  div.s32 %r10, %r1, %r2;
  rem.s32 %r11, %r1, %r2;
  div.s32 %r12, %r4, %r3;
  rem.s32 %r13, %r4, %r3;
  div.s32 %r14, %r1, %r3;
  rem.s32 %r15, %r1, %r3;
  div.u32 %r16, %r1, %r2;
  rem.u32 %r17, %r1, %r2;
  div.u32 %r18, %r1, %r4;
  rem.u32 %r19, %r1, %r4;
  mov.b32 %r5, 0xFFFFFFFF;
  mov.b32 %r6, -3;
  mov.b32 %r7, 0x7FFFFFFF;
  mov.b32 %r8, 0x80000000;
  mul.hi.u32 %r20, %r5, %r5;
  mul.hi.s32 %r21, %r6, %r7;
  mul.lo.s32 %r22, %r6, %r7;
  mul.hi.s32 %r23, %r8, %r8;
  st.global.v4.b32 [%rd1], {%r10, %r11, %r12, %r13};
  st.global.v4.b32 [%rd1+16], {%r14, %r15, %r16, %r17};
  st.global.v4.b32 [%rd1+32], {%r18, %r19, %r20, %r21};
  st.global.v2.b32 [%rd1+48], {%r22, %r23};

  mov.b64 %rd10, -7000000000;
  mov.b64 %rd11, 3;
  mov.b64 %rd12, 7000000000;
  mov.b64 %rd13, -3;
  div.s64 %rd20, %rd10, %rd11;
  rem.s64 %rd21, %rd10, %rd11;
  div.s64 %rd22, %rd12, %rd13;
  rem.s64 %rd23, %rd12, %rd13;
  div.s64 %rd24, %rd10, %rd13;
  rem.s64 %rd25, %rd10, %rd13;
  div.u64 %rd26, %rd10, %rd11;
  rem.u64 %rd27, %rd10, %rd11;
  mul.wide.u32 %rd28, %r5, %r5;
  mul.wide.s32 %rd29, %r6, %r7;
  mul.wide.s32 %rd30, %r8, %r8;
  mul.wide.u32 %rd31, %r1, %r5;
  mul.wide.s32 %rd32, %r1, %r5;
  mov.b64 %rd14, 0x4000000000000000;
  mov.b64 %rd15, 8;
  mul.hi.u64 %rd33, %rd14, %rd15;
  mov.b64 %rd16, -1;
  mul.hi.u64 %rd34, %rd16, %rd16;
  mul.hi.s64 %rd35, %rd16, %rd16;
  mul.hi.s64 %rd36, %rd10, %rd12;
  st.global.v2.b64 [%rd2], {%rd20, %rd21};
  st.global.v2.b64 [%rd2+16], {%rd22, %rd23};
  st.global.v2.b64 [%rd2+32], {%rd24, %rd25};
  st.global.v2.b64 [%rd2+48], {%rd26, %rd27};
  st.global.v2.b64 [%rd2+64], {%rd28, %rd29};
  st.global.v2.b64 [%rd2+80], {%rd30, %rd31};
  st.global.v2.b64 [%rd2+96], {%rd32, %rd33};
  st.global.v2.b64 [%rd2+112], {%rd34, %rd35};
  st.global.u64 [%rd2+128], %rd36;
  ret;
}
)PTX");
  uint64_t d32 = zeros<uint32_t>(14), d64 = zeros<uint64_t>(17);
  run(text, "intops", {1}, {1}, d32, d64);
  std::vector<uint32_t> o32 = download<uint32_t>(d32, 14);
  std::vector<uint64_t> o64 = download<uint64_t>(d64, 17);
  auto s32 = [](uint32_t v) { return int32_t(v); };
  EXPECT_EQ(s32(o32[0]), -3) << "-7 / 2 truncates toward zero";
  EXPECT_EQ(s32(o32[1]), -1) << "-7 % 2 has the dividend's sign";
  EXPECT_EQ(s32(o32[2]), -3) << "7 / -2";
  EXPECT_EQ(s32(o32[3]), 1) << "7 % -2";
  EXPECT_EQ(s32(o32[4]), 3) << "-7 / -2";
  EXPECT_EQ(s32(o32[5]), -1) << "-7 % -2";
  EXPECT_EQ(o32[6], 0x7FFFFFFCu) << "0xFFFFFFF9 / 2 unsigned";
  EXPECT_EQ(o32[7], 1u) << "0xFFFFFFF9 % 2 unsigned";
  EXPECT_EQ(o32[8], 613566755u) << "4294967289 / 7"; // 7 * 613566755 = 4294967285
  EXPECT_EQ(o32[9], 4u) << "4294967289 % 7";
  // (2^32 - 1)^2 = 2^64 - 2^33 + 1 = 0xFFFFFFFE_00000001.
  EXPECT_EQ(o32[10], 0xFFFFFFFEu) << "mul.hi.u32";
  // -3 * 0x7FFFFFFF = -6442450941 = 0xFFFFFFFE_80000003.
  EXPECT_EQ(o32[11], 0xFFFFFFFEu) << "mul.hi.s32";
  EXPECT_EQ(o32[12], 0x80000003u) << "mul.lo.s32";
  // (-2^31)^2 = 2^62 = 0x40000000_00000000.
  EXPECT_EQ(o32[13], 0x40000000u) << "mul.hi.s32 of INT32_MIN squared";

  EXPECT_EQ(int64_t(o64[0]), -2333333333) << "-7e9 / 3";
  EXPECT_EQ(int64_t(o64[1]), -1) << "-7e9 % 3"; // -7e9 = 3 * -2333333333 - 1
  EXPECT_EQ(int64_t(o64[2]), -2333333333) << "7e9 / -3";
  EXPECT_EQ(int64_t(o64[3]), 1) << "7e9 % -3";
  EXPECT_EQ(int64_t(o64[4]), 2333333333) << "-7e9 / -3";
  EXPECT_EQ(int64_t(o64[5]), -1) << "-7e9 % -3";
  const uint64_t big = uint64_t(0) - 7000000000ull; // -7e9 as u64
  EXPECT_EQ(o64[6], big / 3) << "div.u64";
  EXPECT_EQ(o64[7], big % 3) << "rem.u64";
  EXPECT_EQ(o64[8], 0xFFFFFFFE00000001ull) << "mul.wide.u32 0xFFFFFFFF^2";
  EXPECT_EQ(o64[9], 0xFFFFFFFE80000003ull) << "mul.wide.s32 -3 * 0x7FFFFFFF";
  EXPECT_EQ(o64[10], 0x4000000000000000ull) << "mul.wide.s32 INT32_MIN^2";
  // (2^32 - 7) * (2^32 - 1) = 2^64 - 8 * 2^32 + 7.
  EXPECT_EQ(o64[11], 0xFFFFFFF800000007ull) << "mul.wide.u32 0xFFFFFFF9 * 0xFFFFFFFF";
  EXPECT_EQ(o64[12], 7ull) << "mul.wide.s32 -7 * -1";
  EXPECT_EQ(o64[13], 2ull) << "mul.hi.u64 2^62 * 8 = 2^65";
  // (2^64 - 1)^2 = 2^128 - 2^65 + 1: the high half is 2^64 - 2.
  EXPECT_EQ(o64[14], 0xFFFFFFFFFFFFFFFEull) << "mul.hi.u64 of all ones squared";
  EXPECT_EQ(o64[15], 0ull) << "mul.hi.s64 -1 * -1 = 1";
  __int128 product = __int128(-7000000000ll) * __int128(7000000000ll);
  EXPECT_EQ(o64[16], uint64_t(product >> 64)) << "mul.hi.s64 -7e9 * 7e9"; // -4.9e19: high half -3
  EXPECT_EQ(int64_t(o64[16]), -3);
}

// ===================================================================================================
// 5. Divergence and reconvergence
// ===================================================================================================

TEST_F(PtxEmu, IfElseDivergenceReconverges) {
  const std::string text = ptx(R"PTX(
.visible .entry ifelse(.param .u64 .ptr .align 1 ifelse_param_0, .param .u64 .ptr .align 1 ifelse_param_1)
{
  .reg .pred %p<2>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<8>;

  ld.param.u64 %rd1, [ifelse_param_0];
  ld.param.u64 %rd2, [ifelse_param_1];
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 1;
  setp.eq.u32 %p1, %r2, 1;
  @%p1 bra ODD;
  mov.u32 %r3, 100;
  bra JOIN;
ODD:
  mov.u32 %r3, 200;
JOIN:
  add.u32 %r4, %r3, %r1;
  add.u32 %r5, %r1, 1;
  and.b32 %r5, %r5, 31;
  shfl.sync.idx.b32 %r6, %r4, %r5, 31, -1;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3;
  st.global.u32 [%rd4], %r4;
  add.s64 %rd5, %rd2, %rd3;
  st.global.u32 [%rd5], %r6;
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint32_t>(32), dShfl = zeros<uint32_t>(32);
  run(text, "ifelse", {1}, {32}, dOut, dShfl);
  std::vector<uint32_t> out = download<uint32_t>(dOut, 32), sh = download<uint32_t>(dShfl, 32);
  auto expected = [](int t) { return uint32_t((t % 2 ? 200 : 100) + t); };
  for (int t = 0; t < 32; ++t) {
    EXPECT_EQ(out[size_t(t)], expected(t)) << "lane " << t;
    // The full-mask shfl after the join only works if all 32 lanes are executing together again.
    EXPECT_EQ(sh[size_t(t)], expected((t + 1) % 32)) << "lane " << t;
  }
}

TEST_F(PtxEmu, NestedIfInsideLoopWithPerLaneTripCount) {
  const std::string text = ptx(R"PTX(
.visible .entry loop(.param .u64 .ptr .align 1 loop_param_0, .param .u64 .ptr .align 1 loop_param_1)
{
  .reg .pred %p<4>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<8>;

  ld.param.u64 %rd1, [loop_param_0];
  ld.param.u64 %rd2, [loop_param_1];
  mov.u32 %r1, %laneid;
  mov.u32 %r2, 0;
  mov.u32 %r3, 0;
LOOP:
  setp.ge.u32 %p1, %r2, %r1;
  @%p1 bra DONE;
  add.u32 %r4, %r2, %r1;
  and.b32 %r4, %r4, 1;
  setp.eq.u32 %p2, %r4, 0;
  @%p2 bra EVEN;
  add.u32 %r3, %r3, 1000;
  bra NEXT;
EVEN:
  add.u32 %r3, %r3, %r2;
NEXT:
  add.u32 %r2, %r2, 1;
  bra LOOP;
DONE:
  setp.ne.u32 %p3, %r3, 0;
  vote.sync.ballot.b32 %r5, %p3, -1;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3;
  st.global.u32 [%rd4], %r3;
  add.s64 %rd5, %rd2, %rd3;
  st.global.u32 [%rd5], %r5;
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint32_t>(32), dBallot = zeros<uint32_t>(32);
  run(text, "loop", {1}, {32}, dOut, dBallot);
  std::vector<uint32_t> out = download<uint32_t>(dOut, 32), ballot = download<uint32_t>(dBallot, 32);
  for (int lane = 0; lane < 32; ++lane) {
    uint32_t acc = 0;
    for (int i = 0; i < lane; ++i)
      acc += (i + lane) % 2 ? 1000u : uint32_t(i);
    EXPECT_EQ(out[size_t(lane)], acc) << "lane " << lane;
    // Only lane 0 (no iterations) ends with 0; the full-mask vote needs every lane back together.
    EXPECT_EQ(ballot[size_t(lane)], 0xFFFFFFFEu) << "lane " << lane;
  }
}

TEST_F(PtxEmu, UniformBranches) {
  const std::string text = ptx(R"PTX(
.visible .entry uniform(.param .u64 .ptr .align 1 uniform_param_0)
{
  .reg .pred %p<4>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<8>;

  ld.param.u64 %rd1, [uniform_param_0];
  mov.u32 %r1, %tid.x;
  mov.u32 %r9, %ntid.x;
  setp.eq.u32 %p1, %r9, 64;
  @%p1 bra TAKEN;
  mov.u32 %r2, 1;
  bra END;
TAKEN:
  mov.u32 %r2, 2;
END:
  setp.ne.u32 %p2, %r9, 64;
  @%p2 bra SKIP;
  add.u32 %r2, %r2, 10;
SKIP:
  @!%p1 bra SKIP2;
  add.u32 %r2, %r2, 100;
SKIP2:
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3;
  st.global.u32 [%rd4], %r2;
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint32_t>(64);
  run(text, "uniform", {1}, {64}, dOut);
  EXPECT_EQ(download<uint32_t>(dOut, 64), std::vector<uint32_t>(64, 112u));
  uint64_t dOut2 = zeros<uint32_t>(32);
  run(text, "uniform", {1}, {32}, dOut2); // every branch goes the other way, still uniformly
  EXPECT_EQ(download<uint32_t>(dOut2, 32), std::vector<uint32_t>(32, 1u));
}

// A branch to a label placed after the last instruction leaves the kernel (found by fuzz-ptx: the
// post-dominator pass indexed past its block table).
TEST_F(PtxEmu, BranchToALabelAfterTheLastInstructionExits) {
  const std::string text = ptx(R"PTX(
.visible .entry tail(.param .u64 .ptr .align 1 tail_param_0)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<8>;

  ld.param.u64 %rd1, [tail_param_0];
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 7;
  @%p1 bra END;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3;
  st.global.u32 [%rd4], %r1;
END:
}
)PTX");
  uint64_t dOut = zeros<uint32_t>(32);
  run(text, "tail", {1}, {32}, dOut);
  std::vector<uint32_t> expected(32, 0);
  for (uint32_t lane = 7; lane < 32; ++lane)
    expected[lane] = lane;
  EXPECT_EQ(download<uint32_t>(dOut, 32), expected);
}

// ===================================================================================================
// 6. Errors
// ===================================================================================================

// ld.global.u32 from [param_0 + param_1] into out[0].
const std::string kLoadAt = ptx(R"PTX(
.visible .entry load_at(.param .u64 .ptr .align 1 load_at_param_0, .param .u64 load_at_param_1,
                        .param .u64 .ptr .align 1 load_at_param_2)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<8>;

  ld.param.u64 %rd1, [load_at_param_0];
  ld.param.u64 %rd2, [load_at_param_1];
  ld.param.u64 %rd3, [load_at_param_2];
  add.s64 %rd4, %rd1, %rd2;
  ld.global.u32 %r1, [%rd4];
  st.global.u32 [%rd3], %r1;
  ret;
}
)PTX");

TEST_F(PtxEmu, FaultLoadOutsideEveryAllocationNamesWhere) {
  const std::string text = ptx(R"PTX(
.visible .entry bad_load(.param .u64 bad_load_param_0)
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [bad_load_param_0];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  setp.eq.u32 %p1, %r1, 5;
  setp.eq.u32 %p2, %r2, 1;
  and.pred %p3, %p1, %p2;
  @%p3 ld.global.u32 %r3, [%rd1];
  ret;
}
)PTX");
  uint64_t bogus = 0x1000; // allocations start far above: this address is in none of them
  zeros<uint32_t>(64);
  EmuFault f = fault(text, "bad_load", {2}, {32}, bogus);
  EXPECT_EQ(f.code(), CUDA_ERROR_ILLEGAL_ADDRESS);
  std::string m = f.what();
  EXPECT_NE(m.find("bad_load"), std::string::npos) << m;
  EXPECT_NE(m.find(faultLine(text, "@%p3 ld.global.u32")), std::string::npos) << m;
  EXPECT_NE(m.find("block ("), std::string::npos) << m;
  EXPECT_NE(m.find("thread ("), std::string::npos) << m;
  EXPECT_NE(m.find("block (1,0,0)"), std::string::npos) << m;
  EXPECT_NE(m.find("thread (5,0,0)"), std::string::npos) << m;
}

TEST_F(PtxEmu, FaultOnePastTheEndOfAnAllocation) {
  std::vector<uint32_t> data(16);
  for (int i = 0; i < 16; ++i)
    data[size_t(i)] = uint32_t(i * 11);
  uint64_t dIn = upload(data), dOut = zeros<uint32_t>(1);
  run(kLoadAt, "load_at", {1}, {1}, dIn, uint64_t(60), dOut); // the last word is fine
  EXPECT_EQ(download<uint32_t>(dOut, 1)[0], 15u * 11);
  EmuFault f = fault(kLoadAt, "load_at", {1}, {1}, dIn, uint64_t(64), dOut);
  EXPECT_EQ(f.code(), CUDA_ERROR_ILLEGAL_ADDRESS) << f.what();
  EXPECT_NE(std::string(f.what()).find(faultLine(kLoadAt, "ld.global.u32")), std::string::npos) << f.what();
  EmuFault g = fault(kLoadAt, "load_at", {1}, {1}, dIn, uint64_t(-4), dOut); // one word before the start
  EXPECT_EQ(g.code(), CUDA_ERROR_ILLEGAL_ADDRESS) << g.what();
}

TEST_F(PtxEmu, FaultMisalignedVectorLoad) {
  const std::string text = ptx(R"PTX(
.visible .entry load_v4(.param .u64 .ptr .align 1 load_v4_param_0, .param .u64 load_v4_param_1,
                        .param .u64 .ptr .align 1 load_v4_param_2)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;

  ld.param.u64 %rd1, [load_v4_param_0];
  ld.param.u64 %rd2, [load_v4_param_1];
  ld.param.u64 %rd3, [load_v4_param_2];
  add.s64 %rd4, %rd1, %rd2;
  ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd4];
  st.global.v4.b32 [%rd3], {%r1, %r2, %r3, %r4};
  ret;
}
)PTX");
  std::vector<uint32_t> data(16);
  for (int i = 0; i < 16; ++i)
    data[size_t(i)] = uint32_t(i);
  uint64_t dIn = upload(data), dOut = zeros<uint32_t>(4);
  run(text, "load_v4", {1}, {1}, dIn, uint64_t(16), dOut);
  EXPECT_EQ(download<uint32_t>(dOut, 4), (std::vector<uint32_t>{4, 5, 6, 7}));
  for (uint64_t off : {uint64_t(4), uint64_t(8), uint64_t(12)}) {
    EmuFault f = fault(text, "load_v4", {1}, {1}, dIn, off, dOut);
    EXPECT_EQ(f.code(), CUDA_ERROR_MISALIGNED_ADDRESS) << "offset " << off << ": " << f.what();
  }
}

TEST_F(PtxEmu, FaultUninitializedRegisterRead) {
  const std::string text = ptx(R"PTX(
.visible .entry uninit(.param .u64 .ptr .align 1 uninit_param_0)
{
  .reg .b32 %r<4>;
  .reg .b32 %never;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [uninit_param_0];
  add.u32 %r1, %never, 1;
  st.global.u32 [%rd1], %r1;
  ret;
}
.visible .entry halfinit(.param .u64 .ptr .align 1 halfinit_param_0)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .b32 %half;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [halfinit_param_0];
  mov.u32 %r1, %tid.x;
  setp.ge.u32 %p1, %r1, 3;
  @%p1 mov.u32 %half, 5;
  add.u32 %r2, %half, 1;
  st.global.u32 [%rd1], %r2;
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint32_t>(1);
  EmuFault f = fault(text, "uninit", {1}, {1}, dOut);
  std::string m = f.what();
  EXPECT_NE(f.code(), CUDA_SUCCESS);
  EXPECT_NE(m.find("%never"), std::string::npos) << m;
  EXPECT_NE(m.find(faultLine(text, "add.u32 %r1, %never")), std::string::npos) << m;
  // Only lanes 3.. wrote %half: lane 0 reads it unwritten.
  EmuFault g = fault(text, "halfinit", {1}, {32}, dOut);
  m = g.what();
  EXPECT_NE(m.find("%half"), std::string::npos) << m;
  EXPECT_NE(m.find("thread (0,0,0)"), std::string::npos) << m;
}

TEST_F(PtxEmu, FaultShflFullMaskInDivergentCode) {
  const std::string text = ptx(R"PTX(
.visible .entry divshfl(.param .u64 .ptr .align 1 divshfl_param_0, .param .u32 divshfl_param_1)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [divshfl_param_0];
  ld.param.u32 %r5, [divshfl_param_1];
  mov.u32 %r1, %laneid;
  setp.lt.u32 %p1, %r1, 16;
  @%p1 bra SKIP;
  shfl.sync.bfly.b32 %r2, %r1, 1, 31, %r5;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r2;
SKIP:
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint32_t>(32);
  // Lanes 16..31 are the ones executing: with their own mask the shuffle is fine.
  run(text, "divshfl", {1}, {32}, dOut, uint32_t(0xFFFF0000u));
  std::vector<uint32_t> out = download<uint32_t>(dOut, 32);
  for (uint32_t lane = 16; lane < 32; ++lane)
    EXPECT_EQ(out[lane], lane ^ 1u);
  EmuFault f = fault(text, "divshfl", {1}, {32}, dOut, uint32_t(0xFFFFFFFFu));
  EXPECT_NE(f.code(), CUDA_SUCCESS);
  EXPECT_NE(std::string(f.what()).find("member mask"), std::string::npos) << f.what();
  EXPECT_NE(std::string(f.what()).find(faultLine(text, "shfl.sync")), std::string::npos) << f.what();
}

TEST_F(PtxEmu, FaultBarrierInDivergentCode) {
  const std::string text = ptx(R"PTX(
.visible .entry divbar()
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;

  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 7;
  @%p1 bra SKIP;
  bar.sync 0;
SKIP:
  ret;
}
)PTX");
  EmuFault f = fault(text, "divbar", {1}, {32});
  EXPECT_NE(f.code(), CUDA_SUCCESS);
  EXPECT_NE(std::string(f.what()).find("divergent"), std::string::npos) << f.what();
  EXPECT_NE(std::string(f.what()).find(faultLine(text, "bar.sync")), std::string::npos) << f.what();
}

TEST_F(PtxEmu, FaultEndlessLoopRunsOutOfInstructions) {
  const std::string text = ptx(R"PTX(
.visible .entry spin()
{
  .reg .b32 %r<4>;

  mov.u32 %r1, 0;
LOOP:
  add.u32 %r1, %r1, 1;
  bra LOOP;
}
)PTX");
  EmuFault f = faultWith(text, "spin", {1}, {32}, 0, LaunchOptions{0, 10000});
  EXPECT_EQ(f.code(), CUDA_ERROR_LAUNCH_TIMEOUT) << f.what();
  EXPECT_NE(std::string(f.what()).find("spin"), std::string::npos) << f.what();
}

TEST_F(PtxEmu, FaultIntegerDivisionByZero) {
  const std::string text = ptx(R"PTX(
.visible .entry divzero(.param .u64 .ptr .align 1 divzero_param_0, .param .u32 divzero_param_1)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [divzero_param_0];
  ld.param.u32 %r1, [divzero_param_1];
  mov.u32 %r2, 100;
  div.u32 %r3, %r2, %r1;
  st.global.u32 [%rd1], %r3;
  ret;
}
.visible .entry remzero(.param .u64 .ptr .align 1 remzero_param_0, .param .u64 remzero_param_1)
{
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [remzero_param_0];
  ld.param.u64 %rd2, [remzero_param_1];
  rem.s64 %rd3, %rd1, %rd2;
  st.global.u64 [%rd1], %rd3;
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint64_t>(1);
  run(text, "divzero", {1}, {1}, dOut, uint32_t(7));
  EXPECT_EQ(download<uint32_t>(dOut, 1)[0], 14u);
  EmuFault f = fault(text, "divzero", {1}, {1}, dOut, uint32_t(0));
  EXPECT_NE(f.code(), CUDA_SUCCESS);
  EXPECT_NE(std::string(f.what()).find(faultLine(text, "div.u32")), std::string::npos) << f.what();
  EmuFault g = fault(text, "remzero", {1}, {1}, dOut, uint64_t(0));
  EXPECT_NE(g.code(), CUDA_SUCCESS);
  EXPECT_NE(std::string(g.what()).find("remzero"), std::string::npos) << g.what();
}

TEST_F(PtxEmu, ParseErrors) {
  const std::string bfe = ptx(R"PTX(
.visible .entry k()
{
  .reg .b32 %r<4>;
  mov.u32 %r1, 1;
  bfe.u32 %r2, %r1, 0, 8;
  ret;
}
)PTX");
  std::string e = parseError(bfe);
  EXPECT_NE(e.find(parseLine(bfe, "bfe.u32")), std::string::npos) << e;
  EXPECT_NE(e.find("bfe.u32"), std::string::npos) << e;

  // prmt's other modes are not run: refused, not taken for the default one.
  const std::string prmtMode = ptx(R"PTX(
.visible .entry k()
{
  .reg .b32 %r<4>;
  mov.u32 %r1, 1;
  prmt.b32.f4e %r2, %r1, %r1, 0x3210;
  ret;
}
)PTX");
  e = parseError(prmtMode);
  EXPECT_NE(e.find("f4e"), std::string::npos) << e;

  const std::string label = ptx(R"PTX(
.visible .entry k()
{
  .reg .b32 %r<4>;
  mov.u32 %r1, 1;
  bra NOWHERE;
  ret;
}
)PTX");
  e = parseError(label);
  EXPECT_NE(e.find(parseLine(label, "bra NOWHERE")), std::string::npos) << e;
  EXPECT_NE(e.find("NOWHERE"), std::string::npos) << e;

  const std::string reg = ptx(R"PTX(
.visible .entry k()
{
  .reg .b32 %r<4>;
  mov.u32 %r1, 1;
  add.u32 %r2, %zz, 1;
  ret;
}
)PTX");
  e = parseError(reg);
  EXPECT_NE(e.find(parseLine(reg, "%zz")), std::string::npos) << e;
  EXPECT_NE(e.find("%zz"), std::string::npos) << e;
  // A register range %r<4> declares %r0..%r3 only.
  const std::string range = ptx(R"PTX(
.visible .entry k()
{
  .reg .b32 %r<4>;
  mov.u32 %r4, 1;
  ret;
}
)PTX");
  e = parseError(range);
  EXPECT_NE(e.find(parseLine(range, "%r4")), std::string::npos) << e;
  EXPECT_NE(e.find("%r4"), std::string::npos) << e;
}

// ===================================================================================================
// 7. Shared memory and bar.sync
// ===================================================================================================

TEST_F(PtxEmu, SharedMemoryBarrierOrdersWarps) {
  const std::string text = ptx(R"PTX(
.visible .entry rotate(.param .u64 .ptr .align 1 rotate_param_0)
{
  .shared .align 4 .b8 smem[256];
  .reg .b32 %r<10>;
  .reg .b64 %rd<8>;

  ld.param.u64 %rd1, [rotate_param_0];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  mad.lo.u32 %r3, %r1, 4, %r2;
  st.shared.u32 [%r3], %r1;
  bar.sync 0;
  add.u32 %r4, %r1, 1;
  rem.u32 %r4, %r4, 64;
  mad.lo.u32 %r5, %r4, 4, %r2;
  ld.shared.u32 %r6, [%r5];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r6;
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint32_t>(128);
  run(text, "rotate", {2}, {64}, dOut); // twice: shared memory starts over in each block
  std::vector<uint32_t> out = download<uint32_t>(dOut, 64);
  for (uint32_t t = 0; t < 64; ++t)
    EXPECT_EQ(out[t], (t + 1) % 64) << "thread " << t; // threads 31 and 63 read the other warp's word
}

TEST_F(PtxEmu, FaultSharedAccessOutOfRange) {
  const std::string text = ptx(R"PTX(
.visible .entry shared_at(.param .u64 .ptr .align 1 shared_at_param_0, .param .u32 shared_at_param_1)
{
  .shared .align 4 .b8 smem[256];
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [shared_at_param_0];
  ld.param.u32 %r1, [shared_at_param_1];
  mov.u32 %r2, smem;
  add.u32 %r3, %r2, %r1;
  mov.u32 %r4, 77;
  st.shared.u32 [%r3], %r4;
  ld.shared.u32 %r5, [%r3];
  st.global.u32 [%rd1], %r5;
  ret;
}
.visible .entry shared_const(.param .u64 .ptr .align 1 shared_const_param_0)
{
  .shared .align 4 .b8 smem[256];
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [shared_const_param_0];
  ld.shared.u32 %r1, [smem+256];
  st.global.u32 [%rd1], %r1;
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint32_t>(1);
  run(text, "shared_at", {1}, {1}, dOut, uint32_t(252)); // the last word
  EXPECT_EQ(download<uint32_t>(dOut, 1)[0], 77u);
  EmuFault f = fault(text, "shared_at", {1}, {1}, dOut, uint32_t(256));
  EXPECT_EQ(f.code(), CUDA_ERROR_ILLEGAL_ADDRESS) << f.what();
  EXPECT_NE(std::string(f.what()).find(faultLine(text, "st.shared.u32 [%r3]")), std::string::npos) << f.what();
  EmuFault g = fault(text, "shared_const", {1}, {1}, dOut);
  EXPECT_EQ(g.code(), CUDA_ERROR_ILLEGAL_ADDRESS) << g.what();
}

// ===================================================================================================
// 8. vote.sync and popc
// ===================================================================================================

// prmt.b32 (the default mode), which byte shuffles of i8 and bf16 values compile to: byte i of the result
// is byte c[4i+2:4i] of {b, a} (a the low four), or that byte's sign spread when c[4i+3] is set.
TEST_F(PtxEmu, PrmtSelectsAndSignExtendsBytes) {
  const std::string text = ptx(R"PTX(
.visible .entry permute(.param .u64 .ptr .align 1 permute_param_0)
{
  .reg .b32 %r<10>;
  .reg .b64 %rd<2>;

  ld.param.u64 %rd1, [permute_param_0];
  mov.b32 %r1, 0x83828180;
  mov.b32 %r2, 0x07060504;
  prmt.b32 %r3, %r1, %r2, 0x3210;
  prmt.b32 %r4, %r1, %r2, 0x7654;
  prmt.b32 %r5, %r1, %r2, 0x0415;
  prmt.b32 %r6, %r1, %r2, 0x8C98;
  st.global.v4.b32 [%rd1], {%r3, %r4, %r5, %r6};
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint32_t>(4);
  run(text, "permute", {1}, {1}, dOut);
  std::vector<uint32_t> out = download<uint32_t>(dOut, 4);
  EXPECT_EQ(out[0], 0x83828180u); // a as it is
  EXPECT_EQ(out[1], 0x07060504u); // b
  EXPECT_EQ(out[2], 0x80048105u); // bytes 5, 1, 4, 0 from the low end up
  EXPECT_EQ(out[3], 0xFF00FFFFu); // signs: 8, 9 of bytes 0 and 1 (0x80, 0x81), C of byte 4 (0x04), 8
}

TEST_F(PtxEmu, VoteBallotAndPopc) {
  const std::string text = ptx(R"PTX(
.visible .entry ballot(.param .u64 .ptr .align 1 ballot_param_0)
{
  .reg .pred %p<4>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [ballot_param_0];
  mov.u32 %r1, %laneid;
  rem.u32 %r2, %r1, 3;
  setp.eq.u32 %p1, %r2, 0;
  vote.sync.ballot.b32 %r3, %p1, -1;
  popc.b32 %r4, %r3;
  vote.sync.any.pred %p2, %p1, -1;
  vote.sync.all.pred %p3, %p1, -1;
  selp.u32 %r5, 1, 0, %p2;
  selp.u32 %r6, 1, 0, %p3;
  mul.wide.u32 %rd2, %r1, 16;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v4.b32 [%rd3], {%r3, %r4, %r5, %r6};
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint32_t>(4 * 32);
  run(text, "ballot", {1}, {32}, dOut);
  std::vector<uint32_t> out = download<uint32_t>(dOut, 4 * 32);
  // Lanes 0, 3, ..., 30: bits 0b01001001... = 0x49249249, 11 of them.
  uint32_t mask = 0;
  for (int l = 0; l < 32; l += 3)
    mask |= 1u << l;
  ASSERT_EQ(mask, 0x49249249u);
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(out[size_t(lane) * 4 + 0], 0x49249249u) << "lane " << lane;
    EXPECT_EQ(out[size_t(lane) * 4 + 1], 11u) << "lane " << lane;
    EXPECT_EQ(out[size_t(lane) * 4 + 2], 1u) << "vote.any";
    EXPECT_EQ(out[size_t(lane) * 4 + 3], 0u) << "vote.all";
  }
}

// ===================================================================================================
// 9. Profile counts
// ===================================================================================================

// Each thread loads one f32 at in + (ctaid.x * ntid.x + tid.x) * stride; nothing is stored.
const std::string kStrided = ptx(R"PTX(
.visible .entry strided(.param .u64 .ptr .align 1 strided_param_0, .param .u32 strided_param_1)
{
  .reg .b32 %r<8>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [strided_param_0];
  ld.param.u32 %r1, [strided_param_1];
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mad.lo.u32 %r5, %r3, %r4, %r2;
  mul.wide.u32 %rd2, %r5, %r1;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.f32 %f1, [%rd3];
  ret;
}
)PTX");

TEST_F(PtxEmu, ProfileCoalescedVersusStrided) {
  uint64_t dIn = zeros<float>(32 * 8);
  Profile c = run(kStrided, "strided", {1}, {32}, dIn, uint32_t(4));
  EXPECT_EQ(c.blocks, 1u);
  EXPECT_EQ(c.blocksRun, 1u);
  EXPECT_EQ(c.globalLoadRequests, 1);
  EXPECT_EQ(c.globalStoreRequests, 0);
  EXPECT_EQ(c.loadSectors, 4);   // 128 contiguous bytes, 32-byte aligned: 4 sectors
  EXPECT_EQ(c.loadBytes, 128);
  EXPECT_EQ(c.storeSectors, 0);
  EXPECT_DOUBLE_EQ(c.coalescing(), 1.0);
  EXPECT_EQ(c.warpInstructions[size_t(InstrClass::GlobalMemory)], 1);

  Profile s = run(kStrided, "strided", {1}, {32}, dIn, uint32_t(32));
  EXPECT_EQ(s.globalLoadRequests, 1);
  EXPECT_EQ(s.loadSectors, 32); // one 4-byte word in each of 32 sectors
  EXPECT_EQ(s.loadBytes, 128);
  EXPECT_DOUBLE_EQ(s.coalescing(), 0.125);
}

TEST_F(PtxEmu, ProfileSamplingScalesToTheWholeGrid) {
  uint64_t dIn = zeros<float>(32 * 8);
  Profile full = run(kStrided, "strided", {8}, {32}, dIn, uint32_t(4));
  EXPECT_EQ(full.blocks, 8u);
  EXPECT_EQ(full.blocksRun, 8u);
  EXPECT_FALSE(full.sampled());
  EXPECT_EQ(full.globalLoadRequests, 8);
  EXPECT_EQ(full.loadSectors, 32);
  EXPECT_EQ(full.loadBytes, 1024);

  Profile sampled = launchWith(kStrided, "strided", {8}, {32}, 0, LaunchOptions{2}, dIn, uint32_t(4));
  EXPECT_EQ(sampled.blocks, 8u);
  EXPECT_EQ(sampled.blocksRun, 2u);
  EXPECT_TRUE(sampled.sampled());
  EXPECT_DOUBLE_EQ(sampled.globalLoadRequests, full.globalLoadRequests);
  EXPECT_DOUBLE_EQ(sampled.loadSectors, full.loadSectors);
  EXPECT_DOUBLE_EQ(sampled.loadBytes, full.loadBytes);
  EXPECT_DOUBLE_EQ(sampled.coalescing(), full.coalescing());
  for (int c = 0; c < kInstrClasses; ++c)
    EXPECT_DOUBLE_EQ(sampled.warpInstructions[size_t(c)], full.warpInstructions[size_t(c)]) << className(InstrClass(c));
  EXPECT_DOUBLE_EQ(sampled.totalWarpInstructions(), full.totalWarpInstructions());
}

// Each thread loads four f32 at in + 4 * tid + 128 * k and stores their sum. In `independent` the four loads
// are issued back to back and used after; in `chained` each load's value decides a branch before the next
// load, so each waits for the one before.
const std::string kLatency = ptx(R"PTX(
.visible .entry independent(.param .u64 .ptr .align 1 independent_param_0)
{
  .reg .b32 %r<2>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [independent_param_0];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.f32 %f1, [%rd3];
  ld.global.f32 %f2, [%rd3+128];
  ld.global.f32 %f3, [%rd3+256];
  ld.global.f32 %f4, [%rd3+384];
  add.f32 %f5, %f1, %f2;
  add.f32 %f6, %f3, %f4;
  add.f32 %f7, %f5, %f6;
  st.global.f32 [%rd3], %f7;
  ret;
}

.visible .entry chained(.param .u64 .ptr .align 1 chained_param_0)
{
  .reg .pred %p<4>;
  .reg .b32 %r<2>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [chained_param_0];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.f32 %f1, [%rd3];
  setp.lt.f32 %p1, %f1, 0f00000000;
  @%p1 bra $L__first;
$L__first:
  ld.global.f32 %f2, [%rd3+128];
  setp.lt.f32 %p2, %f2, 0f00000000;
  @%p2 bra $L__second;
$L__second:
  ld.global.f32 %f3, [%rd3+256];
  setp.lt.f32 %p3, %f3, 0f00000000;
  @%p3 bra $L__third;
$L__third:
  ld.global.f32 %f4, [%rd3+384];
  add.f32 %f5, %f1, %f2;
  add.f32 %f6, %f3, %f4;
  add.f32 %f7, %f5, %f6;
  st.global.f32 [%rd3], %f7;
  ret;
}
)PTX");

TEST_F(PtxEmu, ProfileLatencyOverlapsIndependentLoadsOnly) {
  uint64_t dIn = zeros<float>(32 * 4);
  Profile independent = run(kLatency, "independent", {1}, {32}, dIn);
  Profile chained = run(kLatency, "chained", {1}, {32}, dIn);
  // One warp: its cycles are one load's latency (the four overlap) plus a few, or four latencies in a row.
  EXPECT_GE(independent.warpCycles, double(kGlobalLoadCycles));
  EXPECT_LT(independent.warpCycles, 1.5 * double(kGlobalLoadCycles));
  EXPECT_GE(chained.warpCycles, 4.0 * double(kGlobalLoadCycles));
  EXPECT_LT(chained.warpCycles, 5.0 * double(kGlobalLoadCycles));
  EXPECT_EQ(independent.globalLoadRequests, chained.globalLoadRequests); // the same traffic
  // The latency bound: the warp's cycles over the one warp that runs, at the clock.
  GpuModel gpu;
  EXPECT_DOUBLE_EQ(bound(chained, gpu).latency, chained.warpCycles / gpu.clock);
  EXPECT_GT(boundSeconds(chained, gpu), boundSeconds(independent, gpu));
}

TEST_F(PtxEmu, ProfileResidentWarpsFollowRegisters) {
  Profile p;
  p.block = {256, 1, 1};
  p.registers = 0; // unknown: the hardware's limits only
  EXPECT_EQ(residentWarpsPerSm(p), 64u);
  p.registers = 64; // 2048 registers a warp, 16384 a block: 4 blocks
  EXPECT_EQ(residentWarpsPerSm(p), 32u);
  p.registers = 252; // 8064 a warp (allocated in 256s), 64512 a block: 1 block
  EXPECT_EQ(residentWarpsPerSm(p), 8u);
  p.block = {32, 1, 1};
  p.registers = 0; // at most 32 blocks an SM
  EXPECT_EQ(residentWarpsPerSm(p), 32u);
  // The latency bound spreads the warps' cycles over the warps running at once: all of a small grid's.
  p.blocks = 4;
  p.warpCycles = 4000;
  GpuModel gpu;
  EXPECT_DOUBLE_EQ(bound(p, gpu).latency, 1000 / gpu.clock);
}

} // namespace
} // namespace moec::ptxemu
