//===- FuzzNpy.cpp - libFuzzer: the .npy reader ----------------------------===//
//
// The input is the bytes of a .npy file (readNpy reads paths, so it goes through a memfd). An accepted
// array must have as many data bytes as its shape says, and must survive writeNpy + readNpy unchanged.
// std::runtime_error is the reader's error; anything else is a finding.
//===----------------------------------------------------------------------===//
#include "moec/contracts/Npy.h"

#include "FuzzUtil.h"

#include <sys/mman.h>

#include <cstdio>
#include <stdexcept>
#include <string>

using namespace moec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 20)
    return -1;
  static const int fd = ::memfd_create("fuzz.npy", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != ssize_t(size))
    std::abort();
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  NpyArray array;
  try {
    array = readNpy(path);
  } catch (const std::runtime_error &) {
    return 0;
  }
  if (int64_t(array.data.size()) != array.elements() * npyTypeBytes(array.type)) {
    std::fprintf(stderr, "fuzz-npy: %zu data bytes for %lld elements of %s\n", array.data.size(),
                 (long long)array.elements(), npyTypeName(array.type));
    std::abort();
  }
  static const std::string copy = (fuzz::scratchDir() / "copy.npy").string();
  writeNpy(copy, array);
  NpyArray back = readNpy(copy);
  if (back.type != array.type || back.shape != array.shape || back.data != array.data) {
    std::fprintf(stderr, "fuzz-npy: writeNpy + readNpy changed the array\n");
    std::abort();
  }
  return 0;
}
