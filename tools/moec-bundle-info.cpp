//===- moec-bundle-info.cpp - Lists an AOT bundle with the runtime alone ---===//
//
// Links moec_runtime only: no LLVM, no MLIR. Opens the bundle, parses its ops, and for each
// specialization prints what it is and whether it can be loaded here (a CUDA device is needed).
//===----------------------------------------------------------------------===//
#include "moec/runtime/Bundle.h"
#include "moec/runtime/CudaDriver.h"

#include <iostream>
#include <string>

int main(int argc, char **argv) {
  const char *usage = "usage: moec-bundle-info BUNDLE_DIR\n";
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::cout << usage;
    return 0;
  }
  if (argc != 2) {
    std::cerr << usage;
    return 2;
  }
  try {
    moec::CudaDriver &driver = moec::CudaDriver::instance();
    auto bundle = moec::Bundle::open(argv[1], driver);
    for (const moec::Bundle::Entry &e : bundle->entries()) {
      std::cout << e.op << " " << moec::dsl::dtypeName(e.dtype) << " " << e.target;
      for (const auto &[k, v] : e.statics)
        std::cout << " " << k << "=" << v;
      for (const std::string &p : e.present)
        std::cout << " +" << p;
      std::cout << ": " << e.kernels.size() << " kernels in " << e.codeFile << "\n";
      for (const moec::KernelMeta &k : e.kernels)
        std::cout << "  " << k.name << " -> " << k.output << " " << k.schedule.str()
                  << (k.pointPerWarp ? " warp-per-point" : "") << (k.rowGroups ? " row-groups" : "")
                  << (k.pointRuns ? " point-runs" : "") << "\n";
      for (const std::string &output : e.workspace)
        std::cout << "  workspace: a zeroed byte per row of " << output << "\n";
    }
    std::cout << (driver.available() ? "CUDA device: " + driver.archName(0)
                                     : "cannot launch here: " + driver.unavailableReason())
              << "\n";
  } catch (const std::exception &e) {
    std::cerr << "moec-bundle-info: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
