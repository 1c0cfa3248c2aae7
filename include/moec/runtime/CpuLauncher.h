//===- CpuLauncher.h - Running a compiled CPU kernel --------------*- C++ -*-===//
#pragma once

#include "moec/contracts/KernelAbi.h"
#include "moec/runtime/ThreadPool.h"

#include <cstdint>
#include <vector>

namespace moec {

/// Runs `kernel` over `rows` rows, split across `pool` in chunks of at least `minRows` rows.
void launchCpu(PackedKernelFn kernel, const std::vector<void *> &tensors, const std::vector<int64_t> &scalars,
               int64_t rows, ThreadPool &pool, int64_t minRows = 16);

} // namespace moec
