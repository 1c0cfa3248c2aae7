//===- FileTestSupport.h - Tests of moec's stored files: a scratch directory, text in and out -===//
//
// What DiskCacheTest, TuningDbTest and TuningDbClearTest share: a fixture with an empty directory of its own
// (`root`, removed after each test), whole files read and written as text, a directory's sorted names, and
// a JSON document signed again as moec would have written it (to tell an edited file from a torn one).
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/runtime/DiskCache.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <stdlib.h>

namespace moec::testing {

inline std::string readText(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void writeText(const std::filesystem::path &path, const std::string &text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

/// The names in `dir`, sorted.
inline std::vector<std::string> names(const std::filesystem::path &dir) {
  std::vector<std::string> out;
  for (const auto &e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

/// `doc` as a writer would save it: with a matching checksum over the compact dump of the rest.
inline std::string resign(nlohmann::json doc) {
  doc.erase("checksum");
  doc["checksum"] = contentHash(doc.dump());
  return doc.dump(2);
}

/// A test with an empty directory of its own, `root`, removed after it.
class ScratchDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "moec-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }

  std::filesystem::path root;
};

/// A ScratchDirTest whose store (a TuningDb, a DiskCache) is in `root` and sends its warnings to `warnings`.
class ScratchStoreTest : public ScratchDirTest {
protected:
  std::function<void(const std::string &)> collectWarnings() {
    return [this](const std::string &line) { warnings.push_back(line); };
  }

  std::vector<std::string> warnings;
};

} // namespace moec::testing
