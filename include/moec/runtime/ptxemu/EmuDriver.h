//===- EmuDriver.h - The PTX emulator as a CUDA driver ----------*- C++ -*-===//
//
// The emulator behind the driver API moec already uses: cuModuleLoadDataEx parses the PTX, cuLaunchKernel
// runs the launch to completion (synchronously) on the host, cuMemAlloc/cuMemcpy* move bytes in and out of
// the emulated device's memory. One device, compute capability 9.0, named "moec PTX emulator (H200 model)".
// A launch that faults returns CUDA_ERROR_ILLEGAL_ADDRESS / _MISALIGNED_ADDRESS / _ILLEGAL_INSTRUCTION, and
// cuGetErrorString then carries the emulator's message (kernel, PTX line, block, thread).
//
// The runtime gets it through CudaDriver::emulator(), or CudaDriver::instance() when MOEC_GPU=emu.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/ptxemu/Emulator.h"

#include <vector>

namespace moec::ptxemu {

/// The entry points of the process-wide emulated device.
CudaDriverTable emulatorTable();

/// Options for the launches that follow (sampling for profiles, the instruction budget).
void setLaunchOptions(const LaunchOptions &options);
LaunchOptions launchOptions();

/// The profiles of the launches since the last call, oldest first (then forgotten).
std::vector<Profile> takeProfiles();

/// Bytes allocated on the emulated device now (for leak checks in tests).
size_t allocatedBytes();

} // namespace moec::ptxemu
