//===- TuningDb.h - Stored autotuning results, per op and machine -*- C++ -*-===//
//
// `moec tune` times schedule configs for one op specialization (a TuningKey) and keeps, per token-count
// bucket (a power of two), every config's median time and the fastest. This is where those results live:
// one JSON file per key in <cache dir>/tuning/, named by TuningKey::fileName(), written atomically.
//
//   {
//     "format": "moec-tuning",
//     "format_version": 1,
//     "moec_version": "0.1.0",
//     "key": {"op": "moe_init_routing_v2_grad", "target": "ptx-sm_90", "dtype": "bf16",
//             "statics": {"H": 7168, "top_k": 8}, "present": ["probs"]},
//     "buckets": {
//       "1024": {"best": "vector=8,threads=1,rows=16,unroll=4", "us": 12.3, "version": "0.1.0",
//                "timings": {"vector=4,threads=1,rows=16,unroll=4": 15.1,
//                            "vector=8,threads=1,rows=16,unroll=4": 12.3}}
//     },
//     "checksum": "<32 hex: contentHash of the compact dump of everything above>"
//   }
//
// Bucket names are decimal strings (JSON object keys). Objects are written with sorted keys, so the dump
// is canonical: the same TuningFile always gives the same bytes, and the checksum is over that dump.
//
// A stored file only steers the choice of a schedule, but a wrong one would make every call slow, so a
// file that fails any check (edited, damaged, another moec version, another key) is ignored with a
// warning and the runtime falls back to its heuristic. No input file makes this code crash: every
// problem becomes a std::runtime_error or a warning naming the file and the reason. Files moec did not
// write are never replaced.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace moec::tune {

/// The moec version (CMake's PROJECT_VERSION), written into and required of every tuning file.
const char *moecVersion();

/// What a tuning result belongs to: an op specialization on one machine kind.
struct TuningKey {
  std::string op;                         // "moe_init_routing_v2_grad"
  std::string target;                     // "cpu-<cpu model>" or "ptx-sm_90" or "ascend-910b"
  std::string dtype;                      // "bf16"
  std::map<std::string, int64_t> statics; // static dims and attrs: {"H": 7168, "top_k": 8}
  std::set<std::string> present;          // optional tensors passed

  /// Canonical one-line text of all fields; different keys give different texts (strings are quoted,
  /// with '"', '\\' and bytes outside printable ASCII escaped).
  std::string text() const;
  /// "<op>.<target>.<dtype>.<16 hex of contentHash(text())>.json", with any char outside
  /// [A-Za-z0-9_.-] in op, target and dtype replaced by '_' and each of them cut to 64 chars (the hash
  /// still tells keys apart), so the name is one short path component.
  std::string fileName() const;
  bool operator==(const TuningKey &) const = default;
};

/// The smallest power of two >= tokens (tokens >= 1); tokens < 1 gives 1. The bucket of a call with
/// `tokens` tokens. Throws std::out_of_range above 2^62 (the next power of two is no int64_t).
int64_t tokenBucket(int64_t tokens);

struct BucketResult {
  std::map<std::string, double> timings; // config text -> median microseconds, every config timed here
  std::string best;                      // the config with the least time (ties: the smaller config text)
  double us = 0;                         // its time
  std::string version;                   // moec version that measured it
  bool operator==(const BucketResult &) const = default;
};

/// Whether config `a` (`aUs` us) ranks before `b` (`bUs`): less time; a tie goes to the heuristic (a
/// config must beat the compiler's choice to replace it, and cost models tie often), then to the smaller
/// text. Tuning files, merges and `moec tune`'s tables rank by it.
bool ranksBefore(const std::string &a, double aUs, const std::string &b, double bUs);

struct TuningFile {
  TuningKey key;
  std::map<int64_t, BucketResult> buckets; // bucket (power of two) -> result

  /// Records a timing; updates best/us/version (moecVersion()) of the bucket. Keeps the smaller time
  /// when the config was already timed. Throws std::invalid_argument for a bucket that is not a power
  /// of two, an empty config, or a time that is not finite and > 0.
  void record(int64_t bucket, const std::string &config, double us);
  /// The bucket's result for `tokens` (tokenBucket(tokens)), or nullptr.
  const BucketResult *forTokens(int64_t tokens) const;
  bool operator==(const TuningFile &) const = default;
};

/// Pretty JSON (2-space indent, sorted keys, trailing newline), the format above. Throws
/// std::invalid_argument for a file that fromJson would reject (a bucket that is no power of two, a time
/// that is not finite and > 0, a best that is not the fastest, a string that is not UTF-8, ...).
std::string toJson(const TuningFile &file);

/// Parses and validates: format marker "moec-tuning", format version 1, moec version equal to
/// moecVersion(), a checksum that matches, the fields and their types, buckets that are powers of two,
/// times finite and > 0, best the fastest of the timings. Throws std::runtime_error naming the problem
/// ("checksum mismatch ...", "written by moec 0.0.9, this is 0.1.0", ...). Inputs over 16 MiB or nested
/// deeper than 16 levels are refused before they are looked at.
TuningFile fromJson(const std::string &text);

/// Deterministic merge: the union of all timings per bucket (a config timed in several inputs keeps its
/// least time), best recomputed (version: moecVersion()). The order of `files` does not matter. Throws
/// std::runtime_error if the keys differ, std::invalid_argument if `files` is empty.
TuningFile merge(const std::vector<TuningFile> &files);

/// The tuning files of one directory. Files are replaced with one rename(2), so a reader (this or another
/// process) sees a whole old file or a whole new one, and concurrent stores of one key leave one whole.
class TuningDb {
public:
  using Warn = std::function<void(const std::string &)>;

  /// `dir` is <cache dir>/tuning; created on the first store, never required to exist for load/list.
  /// `warn` receives one line per ignored file (default, when empty: printed to stderr).
  TuningDb(std::filesystem::path dir, Warn warn);
  const std::filesystem::path &dir() const { return dir_; }

  /// The file for `key`, or nullopt when there is none. A file that fails fromJson, or whose key differs
  /// from `key`, is ignored with one warning naming the file and the reason (the runtime then uses its
  /// heuristic); it is NOT deleted.
  std::optional<TuningFile> load(const TuningKey &key) const;

  /// Writes dir()/key.fileName() atomically, creating dir() if needed. Refuses (std::runtime_error) to
  /// replace an existing file there that is not a moec tuning file (one that does not parse as JSON
  /// with "format": "moec-tuning"): moec never replaces a file it did not create. A corrupt or
  /// foreign-version moec file may be replaced.
  void store(const TuningFile &file);

  /// Every valid tuning file in dir, sorted by file name. Invalid ones, and valid ones stored under
  /// another key's name (load() would never find them), are skipped with a warning; names that do not
  /// end in ".json" are ignored silently.
  std::vector<TuningFile> list() const;

  struct ClearResult {
    size_t removed = 0;   // tuning files
    size_t leftAlone = 0; // files and directories that are not tuning files moec wrote as they are now
    size_t kept = 0;      // of the names the caller keeps (`keep`) that are there
  };
  /// Removes the tuning files of dir() that moec wrote: regular files whose JSON says "format":
  /// "moec-tuning" and whose checksum matches their contents, of any moec version. Anything else (a file
  /// moec did not write, one edited since, a link, a directory) is left alone and counted, except the
  /// names in `keep` (the reports folder), which the caller sees to. A missing dir() clears nothing.
  ClearResult clear(const std::set<std::string> &keep = {}) const;

  /// Reads a tuning file from any path (`moec tune --merge A.json B.json`, shard outputs): throws
  /// std::runtime_error naming the path on any problem.
  static TuningFile read(const std::filesystem::path &path);
  /// Writes `file` to `path` atomically; same refusal rule as store().
  static void write(const std::filesystem::path &path, const TuningFile &file);

private:
  std::filesystem::path dir_;
  Warn warn_;
};

} // namespace moec::tune
