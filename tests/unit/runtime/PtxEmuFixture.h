//===- PtxEmuFixture.h - Launching hand-written PTX in the emulator (tests) -===//
//
// What the PtxEmu*Test.cpp files share: the PTX header, a DeviceMemory with upload / download helpers, launches
// that pass one value per kernel parameter, and the fault a launch throws.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/runtime/ptxemu/Emulator.h"
#include "moec/runtime/ptxemu/Ptx.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace moec::ptxemu::testing {

inline std::string ptx(std::string_view body) {
  return ".version 8.0\n.target sm_90\n.address_size 64\n" + std::string(body);
}

/// The 1-based line of the first occurrence of `needle` in `text` (the PTX lexer counts lines from 1).
inline int lineOf(std::string_view text, std::string_view needle) {
  size_t at = text.find(needle);
  EXPECT_NE(at, std::string_view::npos) << needle;
  int line = 1;
  for (size_t i = 0; i < at && i < text.size(); ++i)
    line += text[i] == '\n';
  return line;
}
/// How a launch fault names the line of `needle`: "kernel: PTX line N ('opcode'): ...".
inline std::string faultLine(std::string_view text, std::string_view needle) {
  return "PTX line " + std::to_string(lineOf(text, needle)) + " (";
}

class PtxEmuFixture : public ::testing::Test {
protected:
  DeviceMemory mem;

  template <typename T> uint64_t upload(const std::vector<T> &v) {
    size_t bytes = v.size() * sizeof(T);
    uint64_t a = mem.allocate(bytes);
    EXPECT_NE(a, 0u);
    uint8_t *p = mem.find(a, bytes);
    EXPECT_NE(p, nullptr) << "the allocation just made";
    if (p && bytes)
      std::memcpy(p, v.data(), bytes);
    return a;
  }
  /// A zero-filled allocation of `n` elements of T.
  template <typename T> uint64_t zeros(size_t n) {
    uint64_t a = mem.allocate(n * sizeof(T));
    EXPECT_NE(a, 0u);
    return a;
  }
  template <typename T> std::vector<T> download(uint64_t a, size_t n) {
    std::vector<T> v(n);
    const uint8_t *p = mem.find(a, n * sizeof(T));
    EXPECT_NE(p, nullptr);
    if (p && n != 0) // an empty vector's data() may be null, which memcpy must not get
      std::memcpy(v.data(), p, n * sizeof(T));
    return v;
  }

  /// Parses `text` and launches `name` with `dynamicShared` bytes of dynamic shared memory, `options`, and one
  /// value per kernel parameter (in declaration order).
  template <typename... Args>
  Profile launchWith(const std::string &text, const char *name, Dim3 grid, Dim3 block, unsigned dynamicShared,
                     const LaunchOptions &options, Args... args) {
    Module m = parsePtx(text);
    const Kernel *k = m.find(name);
    if (!k)
      throw std::runtime_error(std::string("no kernel ") + name);
    void *params[sizeof...(Args) + 1] = {static_cast<void *>(&args)..., nullptr};
    return launchKernel(*k, grid, block, dynamicShared, params, mem, options);
  }
  template <typename... Args>
  Profile launchShared(const std::string &text, const char *name, Dim3 grid, Dim3 block, unsigned dynamicShared,
                       Args... args) {
    return launchWith(text, name, grid, block, dynamicShared, LaunchOptions{}, args...);
  }
  template <typename... Args>
  Profile run(const std::string &text, const char *name, Dim3 grid, Dim3 block, Args... args) {
    return launchShared(text, name, grid, block, 0, args...);
  }
  /// The fault the launch throws (a test failure when it does not throw one).
  template <typename... Args>
  EmuFault faultWith(const std::string &text, const char *name, Dim3 grid, Dim3 block, unsigned dynamicShared,
                     const LaunchOptions &options, Args... args) {
    try {
      launchWith(text, name, grid, block, dynamicShared, options, args...);
    } catch (const EmuFault &f) {
      return f;
    }
    ADD_FAILURE() << name << ": the launch did not fault";
    return EmuFault(CUDA_SUCCESS, "");
  }
  template <typename... Args>
  EmuFault faultShared(const std::string &text, const char *name, Dim3 grid, Dim3 block, unsigned dynamicShared,
                       Args... args) {
    return faultWith(text, name, grid, block, dynamicShared, LaunchOptions{}, args...);
  }
  template <typename... Args>
  EmuFault fault(const std::string &text, const char *name, Dim3 grid, Dim3 block, Args... args) {
    return faultShared(text, name, grid, block, 0, args...);
  }
};

} // namespace moec::ptxemu::testing
