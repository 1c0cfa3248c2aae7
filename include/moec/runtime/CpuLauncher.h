//===- CpuLauncher.h - Running a compiled CPU kernel --------------*- C++ -*-===//
#pragma once

#include "moec/runtime/ThreadPool.h"

#include <cstdint>
#include <vector>

namespace moec {

/// Every CPU kernel is called through one uniform signature, like cuLaunchKernel's kernelParams:
/// args[i] points at the i-th argument's value. The arguments are the lean ABI (one pointer per tensor
/// in declaration order, the runtime dims, the runtime attributes) followed by row_begin and row_end.
using PackedKernelFn = void (*)(void **args);

/// Runs `kernel` over `rows` rows, split across `pool` in chunks of at least `minRows` rows.
void launchCpu(PackedKernelFn kernel, const std::vector<void *> &tensors, const std::vector<int64_t> &scalars,
               int64_t rows, ThreadPool &pool, int64_t minRows = 16);

} // namespace moec
