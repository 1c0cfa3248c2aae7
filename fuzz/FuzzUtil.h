//===- FuzzUtil.h - Helpers shared by the libFuzzer harnesses ----*- C++ -*-===//
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace moec::fuzz {

/// A private scratch directory under $TMPDIR (else /dev/shm, so that fsync costs nothing, else /tmp),
/// created once per process and removed at exit.
inline const std::filesystem::path &scratchDir() {
  static const std::filesystem::path dir = [] {
    const char *tmp = std::getenv("TMPDIR");
    std::string base = tmp && *tmp ? tmp : ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string pattern = base + "/moec-fuzz-XXXXXX";
    if (!::mkdtemp(pattern.data()))
      std::abort();
    std::filesystem::path p(pattern);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratchDir(), ignored);
    });
    return p;
  }();
  return dir;
}

inline void writeFile(const std::filesystem::path &path, const void *data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char *>(data), static_cast<std::streamsize>(size));
  if (!out)
    std::abort();
}

inline void writeFile(const std::filesystem::path &path, const std::string &text) {
  writeFile(path, text.data(), text.size());
}

/// Consumes bytes of the fuzz input; past the end it yields zeros.
class Bytes {
public:
  Bytes(const uint8_t *data, size_t size) : p_(data), end_(data + size) {}
  uint8_t u8() { return p_ < end_ ? *p_++ : 0; }
  uint16_t u16() { return uint16_t(u8() | (u8() << 8)); }
  uint32_t u32() { return uint32_t(u16()) | (uint32_t(u16()) << 16); }
  uint64_t u64() { return uint64_t(u32()) | (uint64_t(u32()) << 32); }
  size_t left() const { return size_t(end_ - p_); }

private:
  const uint8_t *p_, *end_;
};

} // namespace moec::fuzz
