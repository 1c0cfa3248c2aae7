//===- KernelAbi.h - How a compiled CPU kernel is called -------------*- C++ -*-===//
//
// A contract between the compiler, which emits each CPU kernel's packed entry point, and the runtime, which
// calls it.
//===----------------------------------------------------------------------===//
#pragma once

namespace moec {

/// Every CPU kernel is called through one uniform signature, like cuLaunchKernel's kernelParams:
/// args[i] points at the i-th argument's value. The arguments are the lean ABI (one pointer per tensor
/// in declaration order, the runtime dims, the runtime attributes) followed by row_begin and row_end.
using PackedKernelFn = void (*)(void **args);

} // namespace moec
