//===- DiskCache.h - On-disk cache of compiled kernels -----------*- C++ -*-===//
//
// A directory of entries, one per cache key: `<dir>/<keyHash>/` holds the artifacts of one compilation
// (named files: "op.moe", "moe.mlir", "kernel.ll", "kernel.ptx", "kernel.o", ...) and `meta.json`,
// which records the key text, the creation time, each file's size and content hash, caller-defined
// metadata under "user", and a checksum over all of that: an entry whose meta.json was edited is corrupt.
//
// Concurrency: safe across threads and processes without locks. An entry is written into a private
// temp directory and published with one rename(2), which is atomic; renaming a directory onto an
// existing non-empty one fails, so the first publisher wins and the others discard their copy. Entries
// are removed by renaming them aside first. A reader therefore sees no entry or a complete one.
//===----------------------------------------------------------------------===//
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace moec {

/// 32 hex digits of XXH3-128 of the canonical key text (compiler version, source hash, dtype, statics,
/// target, schedule, toolchain, ...; the caller builds it).
std::string cacheKeyHash(const std::string &keyText);

/// 32 hex digits of XXH3-128 of `bytes`.
std::string contentHash(const std::string &bytes);

/// $MOEC_CACHE_DIR, else $XDG_CACHE_HOME/moec, else $HOME/.cache/moec (HOME from the password database
/// when unset). Empty variables count as unset.
std::filesystem::path defaultCacheDir();

class DiskCache {
public:
  struct Entry {
    std::string keyText;
    std::map<std::string, std::string> files; // file name -> contents
    nlohmann::json meta;                      // caller-defined; stored under "user" in meta.json
  };

  struct EntryInfo {
    std::string keyHash;
    std::string keyText;
    uint64_t bytes = 0; // on disk, meta.json included
    std::chrono::system_clock::time_point created;
    std::vector<std::string> files; // artifact names, meta.json excluded
  };

  struct Stats {
    size_t entries = 0;
    uint64_t bytes = 0;
  };

  using WarningHandler = std::function<void(const std::string &)>;

  /// Creates `dir` if missing. If it cannot be created or written, the cache is disabled: load misses,
  /// store does nothing, and disabledReason() says why (the caller warns once and caches in memory).
  explicit DiskCache(std::filesystem::path dir);

  const std::filesystem::path &dir() const { return dir_; }
  bool enabled() const { return disabledReason_.empty(); }
  const std::string &disabledReason() const { return disabledReason_; }

  /// Receives one line, without newline, per corrupt entry (default: printed to stderr).
  void setWarningHandler(WarningHandler handler);

  /// The entry for `keyHash`, or nullopt if there is none, it belongs to another key text (a hash
  /// collision), or it is corrupt. A corrupt entry (unparsable meta.json, a missing file, a wrong size or
  /// hash) is reported once per process, removed, and missed, so the caller recompiles.
  std::optional<Entry> load(const std::string &keyHash, const std::string &keyText);

  /// For an entry that load() returned but the caller could not use (its code would not load, its
  /// metadata is invalid): reports it as corrupt (once per process) and removes it, so it is rebuilt.
  void discard(const std::string &keyHash, const std::string &reason);

  /// Publishes `entry` atomically (see above). If an entry for `keyHash` already exists, it is kept.
  /// Throws std::invalid_argument for an entry without files or with a bad name, std::runtime_error
  /// (path and errno text) on I/O errors; does nothing when disabled.
  void store(const std::string &keyHash, const Entry &entry);

  /// Valid entries, sorted by key hash. Anything in the directory that moec did not write is ignored.
  std::vector<EntryInfo> list() const;

  struct ClearResult {
    size_t removed = 0;   // entries
    size_t leftAlone = 0; // files and directories that are not moec's
    size_t kept = 0;      // of the names the caller keeps (`keep`) that are there
  };
  /// Removes every entry moec wrote (a directory named by the hash of the key its meta.json holds) and
  /// stale temp directories of its own; never anything else, so a cache dir set to a home directory by
  /// mistake loses nothing but moec's entries. `keep` names what else in the directory is moec's but no
  /// entry (the tuning folder): neither removed nor counted as left alone.
  ClearResult clear(const std::set<std::string> &keep = {});
  Stats stats() const;

private:
  void reportCorrupt(const std::filesystem::path &entryPath, const std::string &reason);

  std::filesystem::path dir_;
  std::string disabledReason_;
  std::mutex handlerMutex_;
  WarningHandler warningHandler_;
};

} // namespace moec
