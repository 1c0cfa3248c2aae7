// Lists a bundle (`moec bundle -o DIR`) with moec::runtime alone: what a deployment without a compiler does.
#include "moec/runtime/Bundle.h"
#include "moec/runtime/CudaDriver.h"

#include <iostream>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: runtime_app BUNDLE_DIR\n";
    return 2;
  }
  try {
    auto bundle = moec::Bundle::open(argv[1], moec::CudaDriver::instance());
    for (const moec::Bundle::Entry &e : bundle->entries())
      std::cout << e.op << " " << moec::dsl::dtypeName(e.dtype) << " " << e.target << ": " << e.kernels.size()
                << " kernel(s)\n";
  } catch (const std::exception &e) {
    std::cerr << "runtime_app: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
