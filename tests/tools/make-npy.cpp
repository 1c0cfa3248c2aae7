//===- make-npy.cpp - Write a .npy file from the command line -------------===//
//
//   make-npy OUT.npy TYPE SHAPE VALUES       VALUES: comma-separated numbers, one per element
//   make-npy OUT.npy TYPE SHAPE --iota       0, 1, 2, ...
//   make-npy OUT.npy TYPE SHAPE --fill V     every element V
//
// TYPE: float32 | float16 | int32 | int64 | int8 | uint8 | bool. SHAPE: `4,2`, `8`, or `scalar`.
// float16 values are rounded to nearest even (moec::floatToF16). Exits 1 with a message on bad input.
//===----------------------------------------------------------------------===//
#include "moec/contracts/Half.h"
#include "moec/contracts/Npy.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

using namespace moec;

namespace {

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "make-npy: %s\n", message.c_str());
  std::exit(1);
}

std::vector<std::string> split(const std::string &text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos)
      return parts;
    start = comma + 1;
  }
}

NpyType parseType(const std::string &name) {
  static const std::pair<const char *, NpyType> types[] = {
      {"float32", NpyType::F32}, {"float16", NpyType::F16}, {"int32", NpyType::I32}, {"int64", NpyType::I64},
      {"int8", NpyType::I8},     {"uint8", NpyType::U8},    {"bool", NpyType::Bool}};
  for (const auto &[n, t] : types)
    if (name == n)
      return t;
  fail("unknown type '" + name + "' (float32, float16, int32, int64, int8, uint8, bool)");
}

std::vector<int64_t> parseShape(const std::string &text) {
  std::vector<int64_t> shape;
  if (text == "scalar")
    return shape;
  for (const std::string &part : split(text)) {
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end || errno || v < 0)
      fail("bad shape '" + text + "' (expected e.g. 4,2 or scalar)");
    shape.push_back(v);
  }
  return shape;
}

double parseNumber(const std::string &text) {
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || errno == EINVAL)
    fail("bad value '" + text + "'");
  return v;
}

template <typename T> void put(std::vector<uint8_t> &data, size_t i, T value) {
  std::memcpy(data.data() + i * sizeof(T), &value, sizeof(T));
}

void store(NpyArray &a, size_t i, double v) {
  switch (a.type) {
  case NpyType::F32: put<float>(a.data, i, static_cast<float>(v)); break;
  case NpyType::F16: put<uint16_t>(a.data, i, floatToF16(static_cast<float>(v))); break;
  case NpyType::F64: put<double>(a.data, i, v); break;
  case NpyType::I32: put<int32_t>(a.data, i, static_cast<int32_t>(v)); break;
  case NpyType::I64: put<int64_t>(a.data, i, static_cast<int64_t>(v)); break;
  case NpyType::I8: put<int8_t>(a.data, i, static_cast<int8_t>(v)); break;
  case NpyType::U8: put<uint8_t>(a.data, i, static_cast<uint8_t>(v)); break;
  case NpyType::Bool: put<uint8_t>(a.data, i, v != 0 ? 1 : 0); break;
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 5)
    fail("usage: make-npy OUT.npy TYPE SHAPE (VALUES | --iota | --fill V)");
  std::string out = argv[1];
  NpyArray a;
  a.type = parseType(argv[2]);
  a.shape = parseShape(argv[3]);
  size_t n = static_cast<size_t>(a.elements());
  a.data.assign(n * npyTypeBytes(a.type), 0);

  std::string mode = argv[4];
  if (mode == "--iota") {
    if (argc != 5)
      fail("--iota takes no value");
    for (size_t i = 0; i < n; ++i)
      store(a, i, static_cast<double>(i));
  } else if (mode == "--fill") {
    if (argc != 6)
      fail("--fill takes one value");
    double v = parseNumber(argv[5]);
    for (size_t i = 0; i < n; ++i)
      store(a, i, v);
  } else {
    if (argc != 5)
      fail("expected VALUES as one comma-separated argument");
    std::vector<std::string> values = split(mode);
    if (n == 0 && values.size() == 1 && values[0].empty())
      values.clear();
    if (values.size() != n)
      fail(std::to_string(values.size()) + " values for " + std::to_string(n) + " elements");
    for (size_t i = 0; i < n; ++i)
      store(a, i, parseNumber(values[i]));
  }
  try {
    writeNpy(out, a);
  } catch (const std::exception &e) {
    fail(e.what());
  }
  return 0;
}
