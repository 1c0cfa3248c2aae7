//===- TempDir.h - A fresh, empty folder name under the test's temp directory -*- C++ -*-===//
//
// Under ctest, TMPDIR is the test process's own folder (tests/unit/FreshCache.cpp), removed at exit.
//===----------------------------------------------------------------------===//
#pragma once

#include <filesystem>
#include <random>
#include <string>
#include <unistd.h>

namespace moec::tests {

/// `<temp dir>/moec-<tag>-<pid>-<random>`, removed if it somehow exists; not created.
inline std::filesystem::path freshTempDir(const std::string &tag) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("moec-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()));
  std::filesystem::remove_all(dir);
  return dir;
}

} // namespace moec::tests
