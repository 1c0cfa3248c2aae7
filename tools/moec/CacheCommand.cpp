//===- CacheCommand.cpp - moec cache list|clear|stats -----------------------===//
#include "Commands.h"
#include "TuneReport.h"

#include "moec/runtime/DiskCache.h"
#include "moec/tune/ConfigSpace.h"
#include "moec/tune/TuningDb.h"

#include <fmt/core.h>

#include <cctype>
#include <cstdlib>

namespace moec::cli {

namespace {

constexpr const char *kTuningFolder = "tuning", *kReportsFolder = "reports"; // moec tune's, in the cache

/// "op moe_unpermute 1f2e..." -> "moe_unpermute"; the key text's lines say what an entry is.
std::string keyLine(const std::string &keyText, const std::string &field) {
  size_t at = keyText.find("\n" + field + " ");
  if (at == std::string::npos)
    return "?";
  size_t begin = at + field.size() + 2, end = keyText.find('\n', begin);
  return keyText.substr(begin, end - begin);
}

std::string firstWord(const std::string &s) { return s.substr(0, s.find(' ')); }

/// The key's schedule ("r16.t1.v8.u4.d1", Schedule::str()) as a config prints ("vector=8,threads=1,rows=16,
/// unroll=4,off=streaming-stores"; "heuristic": the compiler's choice). A key without one (an Ascend tiling
/// of the compiler's plan) is the heuristic; text that does not read as a schedule is shown as it is.
std::string scheduleOf(const std::string &keyText) {
  size_t at = keyText.find("\nschedule ");
  if (at == std::string::npos)
    return tune::configText(Schedule{});
  std::string text = keyLine(keyText, "schedule");
  Schedule s;
  size_t start = 0;
  while (start < text.size()) {
    size_t dot = text.find('.', start), end = dot == std::string::npos ? text.size() : dot;
    std::string item = text.substr(start, end - start);
    char *stop = nullptr;
    long long value = item.size() > 1 ? std::strtoll(item.c_str() + 1, &stop, 10) : -1;
    if (value < 0 || !stop || *stop || !std::isdigit(uint8_t(item[1])))
      return text;
    switch (item[0]) {
    case 'r': s.rowsPerBlock = value; break;
    case 't': s.threads = value; break;
    case 'v': s.vector = value; break;
    case 'u': s.unroll = value; break;
    case 'd': s.disabled = uint32_t(value); break;
    case 'e': s.enabled = uint32_t(value); break;
    case 'b': s.buffers = value; break;
    case 'c': s.chunk = value; break;
    default: return text;
    }
    start = end + 1;
  }
  return s.str() == text ? tune::configText(s) : text;
}

tune::TuningDb tuningOf(const DiskCache &cache) {
  return tune::TuningDb(cache.dir() / kTuningFolder, [](const std::string &line) {
    fmt::print(stderr, "moec: warning: {}\n", line);
  });
}

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
  cmd->add_subcommand("list", "One line per entry: key hash, op, dtype, target, statics, size, schedule")->callback([dir] {
    std::unique_ptr<DiskCache> cache;
    openCache(*dir, cache);
    std::vector<DiskCache::EntryInfo> entries = cache->list();
    if (!entries.empty())
      fmt::print("{:<16}  {:<42} {:<5} {:<11} {:<40} {:>11}  {}\n", "key", "op", "dtype", "target", "statics", "size",
                 "schedule");
    for (const DiskCache::EntryInfo &e : entries)
      fmt::print("{}  {:<42} {:<5} {:<11} {:<40} {:>9} B  {}\n", e.keyHash.substr(0, 16), firstWord(keyLine(e.keyText, "op")),
                 keyLine(e.keyText, "dtype"), keyLine(e.keyText, "target"), keyLine(e.keyText, "statics"), e.bytes,
                 scheduleOf(e.keyText));
  });
  auto tuning = std::make_shared<bool>(false);
  CLI::App *clear = cmd->add_subcommand(
      "clear", "Remove every kernel (files moec did not write are left alone); with --tuning, moec tune's results too");
  clear->add_flag("--tuning", *tuning,
                  "also remove the tuning files (the schedules moec tune chose) and their reports; only files moec "
                  "wrote and nobody edited since");
  clear->callback([dir, tuning] {
    std::unique_ptr<DiskCache> cache;
    openCache(*dir, cache);
    DiskCache::ClearResult r = cache->clear({kTuningFolder});
    size_t leftAlone = r.leftAlone;
    fmt::print("removed {} entries", r.removed);
    tune::TuningDb db(cache->dir() / kTuningFolder, [](const std::string &) {});
    if (*tuning) {
      std::filesystem::path reports = db.dir() / kReportsFolder;
      size_t reportFiles = removeReports(reports.string(), leftAlone);
      tune::TuningDb::ClearResult t = db.clear({kReportsFolder});
      leftAlone += t.leftAlone;
      fmt::print(", {} tuning files and {} report files", t.removed, reportFiles);
      std::error_code ec;
      if (std::filesystem::is_empty(db.dir(), ec))
        std::filesystem::remove(db.dir(), ec);
    } else if (size_t kept = db.list().size()) {
      fmt::print("; kept {} tuning files (moec tune's results: `moec cache clear --tuning` removes them)", kept);
    }
    if (leftAlone)
      fmt::print("; left alone {} files and directories that are not moec's", leftAlone);
    fmt::print("\n");
  });
  cmd->add_subcommand("stats", "Entries and bytes, and how many tuning files")->callback([dir] {
    std::unique_ptr<DiskCache> cache;
    openCache(*dir, cache);
    DiskCache::Stats s = cache->stats();
    fmt::print("{} entries, {} bytes\n", s.entries, s.bytes);
    // Tuning files live beside the kernels (moec tune); `moec tune --list` shows what each holds.
    size_t buckets = 0;
    std::vector<tune::TuningFile> tuned = tuningOf(*cache).list();
    for (const tune::TuningFile &f : tuned)
      buckets += f.buckets.size();
    fmt::print("{} tuning files, {} tuned token buckets\n", tuned.size(), buckets);
  });
}

} // namespace moec::cli
