//===- FuzzPtx.cpp - libFuzzer: the PTX emulator's parser and interpreter --===//
//
// The input is PTX text. parsePtx either accepts it or throws PtxError; each accepted kernel (up to four)
// then runs on a small grid with 256-byte buffers for its pointer parameters, small values for the others
// and an instruction budget: it either completes or throws EmuFault. Anything else (a crash, a sanitizer
// report, a hang past libFuzzer's timeout, another exception) is a finding.
//===----------------------------------------------------------------------===//
#include "moec/runtime/ptxemu/Emulator.h"

#include <cstring>

using namespace moec::ptxemu;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 16)
    return -1;
  std::string text(reinterpret_cast<const char *>(data), size);
  Module module;
  try {
    module = parsePtx(text);
  } catch (const PtxError &) {
    return 0;
  }
  for (size_t k = 0; k < module.kernels.size() && k < 4; ++k) {
    const Kernel &kernel = module.kernels[k];
    DeviceMemory memory;
    std::vector<std::vector<uint8_t>> values;
    std::vector<void *> params;
    for (size_t i = 0; i < kernel.params.size(); ++i) {
      const Symbol &s = kernel.symbols[size_t(kernel.params[i])];
      std::vector<uint8_t> &v = values.emplace_back(size_t(s.size), 0);
      uint64_t value = s.size == 8 ? memory.allocate(256) : 3; // a pointer-sized parameter gets a buffer
      std::memcpy(v.data(), &value, std::min<size_t>(v.size(), 8));
      params.push_back(v.data());
    }
    Dim3 block{kernel.reqntid[0] ? kernel.reqntid[0] : 64, kernel.reqntid[1] ? kernel.reqntid[1] : 1,
               kernel.reqntid[2] ? kernel.reqntid[2] : 1};
    if (block.count() > 1024)
      continue;
    LaunchOptions options;
    options.maxWarpInstructions = 20000;
    try {
      launchKernel(kernel, {2, 1, 1}, block, 0, params.data(), memory, options);
    } catch (const EmuFault &) {
    }
  }
  return 0;
}
