//===- DLPack.h - Tensors borrowed from Python objects through DLPack -*- C++ -*-===//
//
// Any array library that implements the DLPack protocol (`__dlpack__`, `__dlpack_device__`: numpy >= 1.22,
// torch, cupy, jax ...) hands moec its tensors without a copy: the view points into the producer's memory,
// and the capsule that keeps that memory alive is held for as long as the view is used.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/runtime/Tensor.h"

#include <pybind11/pybind11.h>

#include <string>

namespace moec::python {

/// A tensor borrowed from a Python object: the view the runtime checks and launches on, and the DLPack
/// capsule that owns the producer's side. The capsule is left unconsumed (named "dltensor"), so its own
/// destructor hands the tensor back to the producer when the last reference goes.
struct Borrowed {
  TensorView view;
  pybind11::object capsule;
};

/// Borrows `obj` (an object with `__dlpack__`, or a "dltensor" capsule) as tensor `tensor` of op `op`, whose
/// element type there is `expected`. `stream`: passed to `__dlpack__(stream=...)` when not None (CUDA: the
/// stream the kernels run on, so that the producer orders its work before them).
///
/// DLPack types map to moec's: float16/32, bfloat16, int8, int32; uint8 is a bool tensor (torch and numpy
/// export bool as bytes); uint16 is bf16 bits where the op expects bf16 (numpy has no bf16). The device:
/// CPU and CUDA pinned host memory are the host, CUDA and CUDA managed memory the GPU. Anything else throws
/// ArgumentError naming the op, the tensor, what it expected and what it got.
Borrowed borrow(pybind11::handle obj, const std::string &op, const std::string &tensor, DType expected,
                pybind11::handle stream);

/// The DLPack type as text, for messages: "float64", "uint16", "bfloat16", "int32x4".
std::string dlpackTypeName(uint8_t code, uint8_t bits, uint16_t lanes);

} // namespace moec::python
