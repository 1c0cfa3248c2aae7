//===- FreshCache.cpp - Every test process starts with its own empty cache -===//
//
// Linked into every gtest program (moec_gtest). ctest runs each test as its own process with
// MOEC_TEST_CACHE_ROOT set to a folder under the build tree; before main, this makes <root>/<pid>, empty,
// and points MOEC_CACHE_DIR at <root>/<pid>/cache, so a Runtime made without an explicit cacheDir never
// sees a kernel another test (or an older build) left behind, and TMPDIR at <root>/<pid>/tmp, so the
// fresh cache folders tests make (temp_directory_path) are under the build tree too. Removed at exit.
//===----------------------------------------------------------------------===//
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace {

struct FreshCache {
  std::filesystem::path dir;
  FreshCache() {
    const char *root = std::getenv("MOEC_TEST_CACHE_ROOT");
    if (!root || !*root)
      return;
    dir = std::filesystem::path(root) / std::to_string(::getpid());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "tmp");
    ::setenv("MOEC_CACHE_DIR", (dir / "cache").c_str(), 1);
    ::setenv("TMPDIR", (dir / "tmp").c_str(), 1);
  }
  ~FreshCache() {
    std::error_code ignored;
    if (!dir.empty())
      std::filesystem::remove_all(dir, ignored);
  }
} freshCache;

} // namespace
