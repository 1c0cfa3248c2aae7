//===- DLPack.cpp -----------------------------------------------------------===//
#include "DLPack.h"

#include "moec/runtime/Binding.h" // ArgumentError
#include "moec/runtime/CudaDriver.h" // kCudaDevice

#include <dlpack/dlpack.h>

#include <optional>

namespace py = pybind11;

namespace moec::python {

namespace {

constexpr const char *kCapsuleName = "dltensor";
// DLPack 0.8 added a bool code; 0.6's header (Debian's) stops at complex. Producers that know it use 6.
constexpr uint8_t kDLBoolCode = 6;

[[noreturn]] void fail(const std::string &op, const std::string &message) { throw ArgumentError(op + ": " + message); }

/// moec's element type for a DLPack type, or nothing.
std::optional<DType> elementType(const DLDataType &t, DType expected) {
  if (t.lanes != 1)
    return std::nullopt;
  switch (t.code) {
  case kDLFloat:
    if (t.bits == 32)
      return DType::F32;
    if (t.bits == 16)
      return DType::F16;
    return std::nullopt;
  case kDLBfloat:
    return t.bits == 16 ? std::optional(DType::BF16) : std::nullopt;
  case kDLInt:
    if (t.bits == 32)
      return DType::I32;
    if (t.bits == 8)
      return DType::I8;
    return std::nullopt;
  case kDLUInt:
    if (t.bits == 8) // bool as bytes: torch's and numpy's bool tensors, viewed as uint8, export this way
      return DType::Bool;
    if (t.bits == 16 && expected == DType::BF16) // numpy has no bf16: its bits in a uint16 array
      return DType::BF16;
    return std::nullopt;
  case kDLBoolCode:
    return t.bits == 8 ? std::optional(DType::Bool) : std::nullopt;
  default:
    return std::nullopt;
  }
}

} // namespace

std::string dlpackTypeName(uint8_t code, uint8_t bits, uint16_t lanes) {
  const char *base = code == kDLInt       ? "int"
                     : code == kDLUInt    ? "uint"
                     : code == kDLFloat   ? "float"
                     : code == kDLBfloat  ? "bfloat"
                     : code == kDLComplex ? "complex"
                     : code == kDLBoolCode ? "bool"
                                          : nullptr;
  std::string name = base ? std::string(base) + std::to_string(bits)
                          : "DLPack type code " + std::to_string(code) + " of " + std::to_string(bits) + " bits";
  if (lanes != 1)
    name += "x" + std::to_string(lanes);
  return name;
}

Borrowed borrow(py::handle obj, const std::string &op, const std::string &tensor, DType expected, py::handle stream) {
  Borrowed b;
  if (PyCapsule_CheckExact(obj.ptr())) {
    b.capsule = py::reinterpret_borrow<py::object>(obj);
  } else if (py::hasattr(obj, "__dlpack__")) {
    // The stream goes only to producers on a CUDA device: numpy, for one, refuses any stream.
    bool onCuda = false;
    if (!stream.is_none() && py::hasattr(obj, "__dlpack_device__")) {
      int type = py::tuple(obj.attr("__dlpack_device__")())[0].cast<int>();
      onCuda = type == kDLCUDA || type == kDLCUDAManaged;
    }
    py::object method = obj.attr("__dlpack__");
    try {
      b.capsule = onCuda ? method(py::arg("stream") = stream) : method();
    } catch (py::error_already_set &e) {
      // The producer cannot export this array (numpy: a read-only one, since DLPack 0.6 cannot say so).
      if (!e.matches(PyExc_BufferError))
        throw;
      fail(op, "tensor '" + tensor + "' cannot be passed through DLPack: " + std::string(py::str(e.value())));
    }
  } else {
    fail(op, "tensor '" + tensor + "': expected an array with __dlpack__ (numpy >= 1.22, torch, cupy ...) or a "
             "DLPack capsule, got " + Py_TYPE(obj.ptr())->tp_name);
  }
  if (!PyCapsule_IsValid(b.capsule.ptr(), kCapsuleName))
    fail(op, "tensor '" + tensor + "': __dlpack__ gave no unused \"dltensor\" capsule (a capsule can be used once)");
  auto *managed = static_cast<DLManagedTensor *>(PyCapsule_GetPointer(b.capsule.ptr(), kCapsuleName));
  const DLTensor &t = managed->dl_tensor;

  std::optional<DType> type = elementType(t.dtype, expected);
  if (!type)
    fail(op, "tensor '" + tensor + "': expected dtype " + dsl::dtypeName(expected) + ", got " +
                 dlpackTypeName(t.dtype.code, t.dtype.bits, t.dtype.lanes) +
                 (expected == DType::BF16 ? " (bf16 from numpy: its bits as uint16, see moec.to_bf16)" : ""));
  TensorView &v = b.view;
  v.dtype = *type;
  switch (t.device.device_type) {
  case kDLCPU:
  case kDLCUDAHost: // pinned host memory: the host reads it
    v.device = Device::Host;
    break;
  case kDLCUDA:
  case kDLCUDAManaged:
    v.device = Device::Cuda;
    break;
  default:
    fail(op, "tensor '" + tensor + "' is on DLPack device type " + std::to_string(t.device.device_type) +
                 "; moec runs on the CPU (1) and CUDA (2)");
  }
  // Another GPU's memory: a kernel on moec's device would fault on it, or read whatever lies at the same
  // address there. Managed memory (kDLCUDAManaged) is reachable from every device, and pinned host memory
  // from every device and the host.
  if (t.device.device_type == kDLCUDA && t.device.device_id != kCudaDevice)
    fail(op, "tensor '" + tensor + "' is on CUDA device " + std::to_string(t.device.device_id) +
                 ", but moec runs on CUDA device " + std::to_string(kCudaDevice) +
                 " (the first of CUDA_VISIBLE_DEVICES): move it there (torch: .to('cuda:" +
                 std::to_string(kCudaDevice) + "'))");
  if (t.ndim < 0)
    fail(op, "tensor '" + tensor + "': DLPack gave " + std::to_string(t.ndim) + " dims");
  v.shape.assign(t.shape, t.shape + t.ndim);
  if (t.strides) // DLPack strides are in elements, as TensorView's; none: row-major
    v.strides.assign(t.strides, t.strides + t.ndim);
  v.data = static_cast<char *>(t.data) + t.byte_offset;
  return b;
}

} // namespace moec::python
