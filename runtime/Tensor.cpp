//===- Tensor.cpp ------------------------------------------------------------===//
#include "moec/runtime/Tensor.h"

namespace moec {

int64_t TensorView::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

bool TensorView::isContiguous() const {
  if (strides.empty())
    return true;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected)
      return false;
    expected *= shape[i];
  }
  return true;
}

std::string TensorView::shapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace moec
