//===- PyKernel.h - A moec::Kernel called with Python arrays ------*- C++ -*-===//
#pragma once

#include "moec/runtime/Kernel.h"

#include <pybind11/pybind11.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moec::python {

/// A kernel from Runtime::get, with what a Python call needs: the inputs it takes in order (the op's
/// required inputs and the optional ones it was requested `with`), the outputs it produces, and the runtime
/// attributes it was requested with (to derive output shapes as the launch will).
class PyKernel {
public:
  PyKernel(std::string op, std::string target, Kernel kernel, std::map<std::string, int64_t> runtimeAttrs);

  const std::string &op() const { return opName; }
  const std::string &target() const { return targetName; }
  const LoadedOp &specialization() const { return kernel.specialization(); }
  std::vector<std::string> inputNames() const;
  std::vector<std::string> outputNames() const;
  /// The element type of each tensor, by name, as this specialization takes it ("bf16", "i32", "bool").
  std::map<std::string, std::string> dtypes() const;
  const std::map<std::string, int64_t> &runtimeAttrs() const { return attrs; }

  /// Runs the kernel on `inputs` (objects with __dlpack__, in inputNames() order). `out`: None, or the
  /// outputs (DLPack objects, outputNames() order) to write. With None, `allocate(name, dtype, shape)` is
  /// called for each output and returns (the array to give back, the object to borrow it through); the
  /// arrays are returned as a list. `stream`: the CUstream the kernels run on (0 on the CPU);
  /// `dlpackStream`: what `__dlpack__(stream=...)` gets (None on the CPU). The GIL is released while the
  /// outputs' shapes are derived and while the kernels run.
  pybind11::list run(const pybind11::sequence &inputs, const pybind11::object &out, uintptr_t stream,
                     const pybind11::object &dlpackStream, const pybind11::object &allocate) const;

  /// The shapes of the outputs a call with these input views produces, by name (the launch's binding).
  std::map<std::string, std::vector<int64_t>> outputShapes(const std::map<std::string, TensorView> &inputs) const;

private:
  std::string opName, targetName;
  Kernel kernel;
  std::map<std::string, int64_t> attrs;
  std::vector<const dsl::TensorDecl *> ins, outs; // into the specialization's op, which the kernel keeps
};

} // namespace moec::python
