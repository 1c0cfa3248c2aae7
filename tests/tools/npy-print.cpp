//===- npy-print.cpp - Print a .npy file as text for FileCheck ------------===//
//
//   npy-print FILE.npy
//
// First line: `DTYPE [D0, D1, ...]` (numpy's dtype name; `[]` for a scalar). Then one line per row of
// the last dim, values separated by spaces: floats as %.9g (float32 and float16, which round-trips a
// float32 exactly), float64 as %.17g, integers exactly, bool as True/False.
//===----------------------------------------------------------------------===//
#include "moec/contracts/Half.h"
#include "moec/contracts/Npy.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

using namespace moec;

namespace {

template <typename T> T get(const NpyArray &a, size_t i) {
  T v;
  std::memcpy(&v, a.data.data() + i * sizeof(T), sizeof(T));
  return v;
}

std::string format(const NpyArray &a, size_t i) {
  char buf[64];
  switch (a.type) {
  case NpyType::F32: std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(get<float>(a, i))); break;
  case NpyType::F16:
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f16ToFloat(get<uint16_t>(a, i))));
    break;
  case NpyType::F64: std::snprintf(buf, sizeof buf, "%.17g", get<double>(a, i)); break;
  case NpyType::I32: std::snprintf(buf, sizeof buf, "%" PRId32, get<int32_t>(a, i)); break;
  case NpyType::I64: std::snprintf(buf, sizeof buf, "%" PRId64, get<int64_t>(a, i)); break;
  case NpyType::I8: std::snprintf(buf, sizeof buf, "%d", static_cast<int>(get<int8_t>(a, i))); break;
  case NpyType::U8: std::snprintf(buf, sizeof buf, "%u", static_cast<unsigned>(get<uint8_t>(a, i))); break;
  case NpyType::Bool: std::snprintf(buf, sizeof buf, "%s", get<uint8_t>(a, i) ? "True" : "False"); break;
  }
  return buf;
}

} // namespace

int main(int argc, char **argv) {
  const char *usage = "usage: npy-print FILE.npy\n";
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(usage, stdout);
    return 0;
  }
  if (argc != 2) {
    std::fputs(usage, stderr);
    return 1;
  }
  NpyArray a;
  try {
    a = readNpy(argv[1]);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "npy-print: %s\n", e.what());
    return 1;
  }
  std::string header = std::string(npyTypeName(a.type)) + " [";
  for (size_t d = 0; d < a.shape.size(); ++d)
    header += (d ? ", " : "") + std::to_string(a.shape[d]);
  std::printf("%s]\n", header.c_str());

  size_t n = static_cast<size_t>(a.elements());
  size_t row = a.shape.empty() ? 1 : static_cast<size_t>(a.shape.back());
  if (row == 0)
    return 0;
  for (size_t i = 0; i < n; ++i)
    std::printf("%s%s", format(a, i).c_str(), (i + 1) % row == 0 ? "\n" : " ");
  return 0;
}
