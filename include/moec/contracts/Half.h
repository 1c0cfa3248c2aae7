//===- Half.h - float <-> bf16 / IEEE binary16 conversions -------*- C++ -*-===//
//
// Host-side conversions for the 16-bit float types kernels read and write, done with plain bit
// manipulation so they behave the same on every compiler and host. Float to 16-bit rounds to nearest,
// ties to even, like the hardware conversions: values past the largest finite one round to +-Inf, NaN
// stays a quiet NaN with its sign. 16-bit to float is exact.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace moec {

uint16_t floatToBf16(float x);
float bf16ToFloat(uint16_t b);

uint16_t floatToF16(float x); // IEEE binary16, subnormals included
float f16ToFloat(uint16_t h);

} // namespace moec
