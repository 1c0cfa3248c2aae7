//===- HalfTest.cpp - float <-> bf16 / binary16 conversions ---------------===//
//
// Every check compares against an independent reference computed in double: a 16-bit pattern's value is
// decoded from its fields with ldexp, and the correctly rounded encoding of a float is the nearest entry
// of the table of all finite values (ties to the even pattern), with Inf standing at the next power of
// two past the largest finite value, as IEEE rounding places it.
//===----------------------------------------------------------------------===//
#include "moec/contracts/Half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace moec {
namespace {

struct Format {
  const char *name;
  int expBits;
  int manBits;
  uint16_t (*encode)(float);
  float (*decode)(uint16_t);

  int bias() const { return (1 << (expBits - 1)) - 1; }
  uint16_t signBit() const { return 0x8000; }
  uint16_t infBits() const { return static_cast<uint16_t>(((1u << expBits) - 1) << manBits); }
  uint32_t mantissa(uint16_t bits) const { return bits & ((1u << manBits) - 1); }
  uint32_t exponent(uint16_t bits) const { return (bits >> manBits) & ((1u << expBits) - 1); }
  bool isNaN(uint16_t bits) const { return exponent(bits) == (1u << expBits) - 1 && mantissa(bits) != 0; }
  bool isQuietNaN(uint16_t bits) const { return isNaN(bits) && (mantissa(bits) >> (manBits - 1)) == 1; }

  /// The value of a finite or infinite pattern, from its fields.
  double value(uint16_t bits) const {
    uint32_t man = mantissa(bits), exp = exponent(bits);
    double magnitude = exp == (1u << expBits) - 1 ? std::numeric_limits<double>::infinity()
                       : exp == 0 ? std::ldexp(man, 1 - bias() - manBits)
                                  : std::ldexp(man + (1u << manBits), int(exp) - bias() - manBits);
    return (bits & signBit()) ? -magnitude : magnitude;
  }
};

void PrintTo(const Format &format, std::ostream *os) { *os << format.name; } // names the failing param

const Format kF16{"f16", 5, 10, floatToF16, f16ToFloat};
const Format kBf16{"bf16", 8, 7, floatToBf16, bf16ToFloat};

uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

float floatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

class HalfTest : public ::testing::TestWithParam<Format> {
protected:
  void SetUp() override {
    // Magnitudes of patterns 0 .. Inf, increasing with the pattern; Inf stands at 2^(bias + 1).
    for (uint16_t p = 0; p < f.infBits(); ++p)
      magnitudes.push_back(f.value(p));
    magnitudes.push_back(std::ldexp(1.0, f.bias() + 1));
  }

  /// The correctly rounded encoding of finite `x`: nearest by distance, ties to the even pattern.
  uint16_t nearest(float x) const {
    uint16_t sign = std::signbit(x) ? f.signBit() : 0;
    double a = std::fabs(double(x));
    if (a >= magnitudes.back())
      return sign | f.infBits();
    size_t hi = std::upper_bound(magnitudes.begin(), magnitudes.end(), a) - magnitudes.begin();
    size_t lo = hi - 1; // magnitudes[lo] <= a < magnitudes[hi]
    double below = a - magnitudes[lo], above = magnitudes[hi] - a;
    size_t pick = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
    return static_cast<uint16_t>(sign | pick);
  }

  /// Midway between patterns p and p + 1 (both non-negative); exact in float, which has the bits to spare.
  float midpoint(uint16_t p) const {
    double mid = (magnitudes[p] + magnitudes[p + 1]) / 2;
    EXPECT_EQ(double(float(mid)), mid);
    return float(mid);
  }

  const Format &f = GetParam();
  std::vector<double> magnitudes;
};

TEST_P(HalfTest, DecodesEveryPatternExactly) {
  for (uint32_t p = 0; p <= 0xffff; ++p) {
    auto bits = static_cast<uint16_t>(p);
    float x = f.decode(bits);
    ASSERT_EQ(std::signbit(x), (bits & f.signBit()) != 0) << std::hex << p;
    if (f.isNaN(bits)) {
      ASSERT_TRUE(std::isnan(x)) << std::hex << p;
    } else {
      ASSERT_EQ(double(x), f.value(bits)) << std::hex << p;
    }
  }
}

TEST_P(HalfTest, EveryNonNaNPatternRoundTrips) {
  for (uint32_t p = 0; p <= 0xffff; ++p) {
    auto bits = static_cast<uint16_t>(p);
    if (!f.isNaN(bits)) {
      ASSERT_EQ(f.encode(f.decode(bits)), bits) << std::hex << p;
    }
  }
}

TEST_P(HalfTest, NaNStaysAQuietNaNWithItsSign) {
  // Quiet, signalling and payload-only-in-the-low-bits NaNs (truncating the last gives Inf).
  for (uint32_t nan : {0x7fc00000u, 0x7fbfffffu, 0x7f800001u, 0x7fa00000u, 0x7fffffffu}) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      uint16_t bits = f.encode(floatOf(nan | sign));
      EXPECT_TRUE(f.isQuietNaN(bits)) << std::hex << (nan | sign) << " -> " << bits;
      EXPECT_EQ((bits & f.signBit()) != 0, sign != 0) << std::hex << (nan | sign);
    }
  }
  for (uint32_t p = 0; p <= 0xffff; ++p) {
    auto bits = static_cast<uint16_t>(p);
    if (f.isNaN(bits)) {
      ASSERT_TRUE(f.isQuietNaN(f.encode(f.decode(bits)))) << std::hex << p;
    }
  }
}

TEST_P(HalfTest, InfinityAndOverflow) {
  float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f.encode(inf), f.infBits());
  EXPECT_EQ(f.encode(-inf), f.signBit() | f.infBits());
  EXPECT_EQ(f.encode(std::numeric_limits<float>::max()), f.infBits());
  EXPECT_EQ(f.encode(-std::numeric_limits<float>::max()), f.signBit() | f.infBits());
  EXPECT_EQ(f.encode(0.0f), 0);
  EXPECT_EQ(f.encode(-0.0f), f.signBit());
}

// Between every two neighbouring values, including 0 and the smallest subnormal and the largest finite
// value and Inf: the midpoint goes to the even pattern, the floats either side of it to the nearer value.
TEST_P(HalfTest, MidpointsTieToEven) {
  for (uint16_t p = 0; p < f.infBits(); ++p) {
    float mid = midpoint(p);
    auto even = static_cast<uint16_t>(p % 2 == 0 ? p : p + 1);
    auto up = static_cast<uint16_t>(p + 1);
    for (uint16_t sign : {uint16_t(0), f.signBit()}) {
      float s = sign ? -1.0f : 1.0f;
      ASSERT_EQ(f.encode(s * mid), sign | even) << std::hex << p;
      ASSERT_EQ(f.encode(s * std::nextafter(mid, 0.0f)), sign | p) << std::hex << p;
      ASSERT_EQ(f.encode(s * std::nextafter(mid, 2 * mid)), sign | up) << std::hex << p;
    }
  }
}

TEST_P(HalfTest, RandomFloatsRoundToNearest) {
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> significand(1.0f, 2.0f);
  // Exponents from below half the smallest subnormal to past the overflow threshold.
  int lowest = 1 - f.bias() - f.manBits - 2, highest = f.bias() + 2;
  std::uniform_int_distribution<int> exponent(std::max(lowest, -149), std::min(highest, 127));
  for (int i = 0; i < 1000000; ++i) {
    float x = std::ldexp(significand(rng), exponent(rng)) * (rng() % 2 ? -1.0f : 1.0f);
    ASSERT_EQ(f.encode(x), nearest(x)) << std::hexfloat << x;
  }
}

TEST_P(HalfTest, RandomBitPatternsRoundToNearest) {
  std::mt19937 rng(54321);
  for (int i = 0; i < 1000000; ++i) {
    float x = floatOf(static_cast<uint32_t>(rng()));
    if (!std::isnan(x)) {
      ASSERT_EQ(f.encode(x), nearest(x)) << std::hexfloat << x;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, HalfTest, ::testing::Values(kF16, kBf16),
                         [](const ::testing::TestParamInfo<Format> &param) { return std::string(param.param.name); });

TEST(HalfKnownValues, F16) {
  EXPECT_EQ(floatToF16(1.0f), 0x3c00);
  EXPECT_EQ(floatToF16(-2.0f), 0xc000);
  EXPECT_EQ(floatToF16(3.14159265f), 0x4248);
  EXPECT_EQ(floatToF16(65504.0f), 0x7bff);
  EXPECT_EQ(floatToF16(0x1p-14f), 0x0400); // smallest normal
  EXPECT_EQ(floatToF16(0x1p-24f), 0x0001); // smallest subnormal
  EXPECT_EQ(f16ToFloat(0x3555), 0x1.554p-2f);
  EXPECT_EQ(f16ToFloat(0x03ff), 0x1.ff8p-15f); // largest subnormal
}

TEST(HalfKnownValues, Bf16) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(3.14159265f), 0x4049);
  EXPECT_EQ(floatToBf16(-1.0e30f), 0xf14a); // 0xf149f2ca rounds up
  EXPECT_EQ(bf16ToFloat(0x4049), 3.140625f);
  EXPECT_EQ(bf16ToFloat(0x0001), 0x1p-133f); // smallest subnormal
  EXPECT_EQ(bitsOf(bf16ToFloat(0x8000)), 0x80000000u);
}

} // namespace
} // namespace moec
