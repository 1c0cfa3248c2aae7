//===- Tensor.h - Tensor views the runtime checks and launches on -*- C++ -*-===//
#pragma once

#include "moec/dsl/AST.h"

#include <cstdint>
#include <string>
#include <vector>

namespace moec {

using dsl::DType;

enum class Device { Host, Cuda };

/// A non-owning view of a tensor: pointer, element type, shape and strides (in elements).
struct TensorView {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides; // empty: contiguous, row-major
  Device device = Device::Host;

  int64_t elements() const;
  /// Row-major (strides empty, or equal to the row-major ones where a dim is not 1); false for a stride
  /// count that differs from the rank.
  bool isContiguous() const;
  /// "[4, 7168]"
  std::string shapeString() const;
};

} // namespace moec
