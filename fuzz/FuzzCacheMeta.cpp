//===- FuzzCacheMeta.cpp - libFuzzer: the disk cache's meta.json reader ----===//
//
// Every input becomes the meta.json of one entry (key text "fuzz-key", with two artifact files) in a
// fresh cache directory; list(), stats() and load() must return (load: the entry, or nullopt for a
// corrupt or foreign entry), never throw or crash. A loaded entry must hold exactly the files on disk.
//
// MOEC_FUZZ_WRITE_SEED=PATH writes the meta.json of a valid entry for this harness to PATH and exits
// (for the seed corpus).
//===----------------------------------------------------------------------===//
#include "moec/runtime/DiskCache.h"

#include "FuzzUtil.h"

#include <cstdio>
#include <filesystem>

using namespace moec;
namespace fs = std::filesystem;

namespace {

const char *kKeyText = "fuzz-key";
const std::map<std::string, std::string> kFiles = {{"kernel.o", std::string("\x7f" "ELF fuzz\0\1", 11)},
                                                   {"op.moe", "op fuzz\n"}};

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  if (const char *seed = std::getenv("MOEC_FUZZ_WRITE_SEED")) {
    DiskCache cache(fuzz::scratchDir() / "seed");
    cache.store(cacheKeyHash(kKeyText), {kKeyText, kFiles, {{"target", "cpu"}, {"kernels", {"k0", "k1"}}}});
    fs::copy_file(cache.dir() / cacheKeyHash(kKeyText) / "meta.json", seed, fs::copy_options::overwrite_existing);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 64 * 1024)
    return -1;
  static const fs::path dir = fuzz::scratchDir() / "cache";
  static const std::string keyHash = cacheKeyHash(kKeyText);
  static DiskCache cache(dir);
  static const bool ready = [] {
    if (!cache.enabled())
      std::abort();
    cache.setWarningHandler([](const std::string &) {});
    return true;
  }();
  (void)ready;
  // load() removes a corrupt entry: rebuild it every time.
  fs::create_directories(dir / keyHash);
  for (const auto &[name, bytes] : kFiles)
    fuzz::writeFile(dir / keyHash / name, bytes);
  fuzz::writeFile(dir / keyHash / "meta.json", data, size);
  (void)cache.list();
  (void)cache.stats();
  std::optional<DiskCache::Entry> entry = cache.load(keyHash, kKeyText);
  if (entry) {
    for (const auto &[name, bytes] : entry->files) {
      auto it = kFiles.find(name);
      if (it == kFiles.end() || it->second != bytes) {
        std::fprintf(stderr, "fuzz-cache-meta: loaded file '%s' that is not the entry's\n", name.c_str());
        std::abort();
      }
    }
  }
  return 0;
}
