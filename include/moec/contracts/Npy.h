//===- Npy.h - Read and write NumPy .npy files -------------------*- C++ -*-===//
//
// The subset of the .npy format that test data and reference outputs use: C-order, little-endian arrays
// of the element types below. Reading accepts format versions 1.0, 2.0 and 3.0; writing produces 1.0
// (2.0 only if the header would not fit 1.0's 16-bit length, as numpy does).
//
// Errors throw std::runtime_error whose text starts with the file's path and says what is wrong.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moec {

enum class NpyType { F32, F16, F64, I32, I64, I8, U8, Bool };

struct NpyArray {
  NpyType type = NpyType::F32;
  std::vector<int64_t> shape; // empty = scalar
  std::vector<uint8_t> data;  // C order, little-endian, npyTypeBytes(type) bytes per element

  /// The product of `shape` (1 for a scalar).
  int64_t elements() const;
};

NpyArray readNpy(const std::string &path);

/// Writes atomically: to a temporary file in the same directory, then renamed over `path`.
/// Throws if `array.data` does not hold exactly elements() * npyTypeBytes(type) bytes.
void writeNpy(const std::string &path, const NpyArray &array);

const char *npyTypeName(NpyType t); // numpy's name: "float32", "float16", ..., "bool"
int npyTypeBytes(NpyType t);

} // namespace moec
