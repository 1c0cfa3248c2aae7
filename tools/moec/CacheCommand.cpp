//===- CacheCommand.cpp - moec cache list|clear|stats -----------------------===//
#include "Commands.h"

#include "moec/runtime/DiskCache.h"
#include "moec/tune/TuningDb.h"

#include <fmt/core.h>

namespace moec::cli {

namespace {

/// "op moe_unpermute 1f2e..." -> "moe_unpermute"; the key text's lines say what an entry is.
std::string keyLine(const std::string &keyText, const std::string &field) {
  size_t at = keyText.find("\n" + field + " ");
  if (at == std::string::npos)
    return "?";
  size_t begin = at + field.size() + 2, end = keyText.find('\n', begin);
  return keyText.substr(begin, end - begin);
}

std::string firstWord(const std::string &s) { return s.substr(0, s.find(' ')); }

void openCache(const std::string &dir, std::unique_ptr<DiskCache> &cache) {
  cache = std::make_unique<DiskCache>(dir.empty() ? defaultCacheDir() : std::filesystem::path(dir));
  if (!cache->enabled())
    throw std::runtime_error(cache->disabledReason());
}

} // namespace

void registerCacheCommand(CLI::App &app) {
  auto dir = std::make_shared<std::string>();
  CLI::App *cmd = app.add_subcommand("cache", "Inspect or clear the kernel cache ($MOEC_CACHE_DIR, "
                                               "$XDG_CACHE_HOME/moec or ~/.cache/moec)");
  cmd->add_option("--dir", *dir, "the cache directory (default: as the runtime finds it)");
  cmd->require_subcommand(1);
  cmd->add_subcommand("list", "One line per entry: key hash, op, dtype, target, statics, size")->callback([dir] {
    std::unique_ptr<DiskCache> cache;
    openCache(*dir, cache);
    for (const DiskCache::EntryInfo &e : cache->list())
      fmt::print("{}  {:<42} {:<5} {:<11} {:<40} {:>9} B\n", e.keyHash.substr(0, 16), firstWord(keyLine(e.keyText, "op")),
                 keyLine(e.keyText, "dtype"), keyLine(e.keyText, "target"), keyLine(e.keyText, "statics"), e.bytes);
  });
  cmd->add_subcommand("clear", "Remove every entry (files moec did not write are left alone)")->callback([dir] {
    std::unique_ptr<DiskCache> cache;
    openCache(*dir, cache);
    DiskCache::ClearResult r = cache->clear();
    fmt::print("removed {} entries", r.removed);
    if (r.leftAlone)
      fmt::print("; left alone {} files and directories that are not moec's", r.leftAlone);
    fmt::print("\n");
  });
  cmd->add_subcommand("stats", "Entries and bytes, and how many tuning files")->callback([dir] {
    std::unique_ptr<DiskCache> cache;
    openCache(*dir, cache);
    DiskCache::Stats s = cache->stats();
    fmt::print("{} entries, {} bytes\n", s.entries, s.bytes);
    // Tuning files live beside the kernels (moec tune); `moec tune --list` shows what each holds.
    size_t buckets = 0;
    std::vector<tune::TuningFile> tuned = tune::TuningDb(cache->dir() / "tuning", [](const std::string &line) {
                                            fmt::print(stderr, "moec: warning: {}\n", line);
                                          }).list();
    for (const tune::TuningFile &f : tuned)
      buckets += f.buckets.size();
    fmt::print("{} tuning files, {} tuned token buckets\n", tuned.size(), buckets);
  });
}

} // namespace moec::cli
