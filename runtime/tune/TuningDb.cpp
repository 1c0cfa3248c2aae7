//===- TuningDb.cpp - Stored autotuning results, per op and machine -------===//
//
// Format and rules: see TuningDb.h. Reading is strict: a file is parsed with a size and depth limit,
// then checked field by field (no unknown fields, exact types), and finally as a whole (problemOf, the
// same check toJson applies before writing), so what fromJson accepts toJson writes back byte for byte.
// Error texts are ASCII: a file's strings are quoted and cut short before they reach a message.
//===----------------------------------------------------------------------===//
#include "moec/contracts/Files.h"
#include "moec/runtime/DiskCache.h"
#include "moec/tune/TuningDb.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MOEC_VERSION
#error "MOEC_VERSION must be defined (runtime/tune/CMakeLists.txt)"
#endif

namespace moec::tune {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char *kFormat = "moec-tuning";
constexpr int kFormatVersion = 1;
// A tuning file holds a few hundred timings; these only keep a hostile file from costing much.
constexpr size_t kMaxBytes = size_t(16) << 20;
constexpr int kMaxDepth = 16;
constexpr int64_t kMaxBucket = int64_t(1) << 62;
// Each name part of a file name; the hash in the name keeps cut names apart.
constexpr size_t kMaxNamePart = 64;

struct TooDeep {};

std::string errnoText(int err) { return std::generic_category().message(err); }

/// `bytes` with everything outside printable ASCII as '?', cut to `limit` chars: safe in a message.
std::string printable(const std::string &bytes, size_t limit = 200) {
  std::string out;
  for (char c : bytes.substr(0, limit))
    out += c >= 0x20 && c <= 0x7e ? c : '?';
  return bytes.size() > limit ? out + "..." : out;
}

/// A JSON value as it would be written, shortened for a message.
std::string brief(const json &value) { return printable(value.dump(), 40); }

/// A time for a message ("NaN" and "inf" too, which JSON has no words for).
std::string showTime(double us) {
  if (std::isnan(us))
    return "NaN";
  if (std::isinf(us))
    return us > 0 ? "inf" : "-inf";
  return json(us).dump();
}

/// A string quoted for a message.
std::string inQuotes(const std::string &s) { return "\"" + printable(s, 60) + "\""; }

/// A string quoted so that different strings give different texts.
std::string quoteExact(const std::string &s) {
  static const char digits[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\')
      out += {'\\', c};
    else if (byte >= 0x20 && byte <= 0x7e)
      out += c;
    else
      out += {'\\', 'x', digits[byte >> 4], digits[byte & 15]};
  }
  return out + "\"";
}

std::string fileNamePart(const std::string &s) {
  std::string out;
  for (char c : s.substr(0, kMaxNamePart)) {
    bool plain =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    out += plain ? c : '_';
  }
  return out.empty() ? "_" : out;
}

bool isBucket(int64_t bucket) { return bucket >= 1 && std::has_single_bit(uint64_t(bucket)); }

bool isTime(double us) { return std::isfinite(us) && us > 0; }

/// The fastest config of `timings` (ranksBefore), or "" when there are none.
std::string fastest(const std::map<std::string, double> &timings) {
  const std::pair<const std::string, double> *best = nullptr;
  for (const auto &timing : timings)
    if (!best || ranksBefore(timing.first, timing.second, best->first, best->second))
      best = &timing;
  return best ? best->first : "";
}

/// What makes `file` unfit to be written or used, or "" when nothing does. toJson and fromJson share it.
std::string problemOf(const TuningFile &file) {
  for (const auto &[bucket, result] : file.buckets) {
    std::string where = "bucket " + std::to_string(bucket);
    if (!isBucket(bucket))
      return where + " is not a power of two >= 1";
    if (result.timings.empty())
      return where + " has no timings";
    for (const auto &[config, us] : result.timings) {
      if (config.empty())
        return where + " has a timing of an empty config";
      if (!isTime(us))
        return where + ": the time of " + inQuotes(config) + " is " + showTime(us) + ", not a time > 0";
    }
    auto best = result.timings.find(result.best);
    if (best == result.timings.end())
      return where + ": best " + inQuotes(result.best) + " is not among its timings";
    if (std::string winner = fastest(result.timings); winner != result.best)
      return where + ": best " + inQuotes(result.best) + " (" + showTime(best->second) +
             " us) is not the fastest: " + inQuotes(winner) + " took " + showTime(result.timings.at(winner)) + " us";
    if (result.us != best->second)
      return where + ": us is " + showTime(result.us) + " but the best config took " + showTime(best->second);
    if (result.version.empty())
      return where + " has no version";
  }
  return "";
}

json keyJson(const TuningKey &key) {
  return {
      {"op", key.op}, {"target", key.target}, {"dtype", key.dtype}, {"statics", key.statics}, {"present", key.present}};
}

/// The checksum of a document: over the canonical (sorted, compact) dump of all but the checksum.
std::string checksumOf(json doc) {
  doc.erase("checksum");
  return contentHash(doc.dump());
}

json documentOf(const TuningFile &file) {
  json buckets = json::object();
  for (const auto &[bucket, result] : file.buckets)
    buckets[std::to_string(bucket)] = {
        {"best", result.best}, {"us", result.us}, {"version", result.version}, {"timings", result.timings}};
  json doc = {{"format", kFormat},
              {"format_version", kFormatVersion},
              {"moec_version", moecVersion()},
              {"key", keyJson(file.key)},
              {"buckets", buckets}};
  doc["checksum"] = checksumOf(doc);
  return doc;
}

/// Parses `text`, refusing nesting deeper than kMaxDepth before it is built (the checks below recurse).
json parseLimited(const std::string &text) {
  json::parser_callback_t limitDepth = [](int depth, json::parse_event_t, json &) {
    if (depth > kMaxDepth)
      throw TooDeep{};
    return true;
  };
  try {
    return json::parse(text, limitDepth);
  } catch (const TooDeep &) {
    throw std::runtime_error("not a tuning file: nested deeper than " + std::to_string(kMaxDepth) + " levels");
  } catch (const json::exception &e) {
    std::string what = e.what(); // "[json.exception.parse_error.101] parse error at ..."
    size_t tag = what.find("] ");
    throw std::runtime_error("not JSON: " + printable(tag == std::string::npos ? what : what.substr(tag + 2)));
  }
}

[[noreturn]] void bad(const std::string &message) { throw std::runtime_error(message); }

/// The path of field `name` of the object at `where` ("" for the top level), for messages: "key.statics".
std::string pathOf(const std::string &where, const std::string &name) {
  return where.empty() ? name : where + "." + name;
}

/// Refuses any field of `object` (at `where`) outside `allowed`.
void onlyFields(const json &object, std::initializer_list<const char *> allowed, const std::string &where) {
  for (const auto &item : object.items())
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char *name) { return item.key() == name; }))
      bad((where.empty() ? "the file" : where) + " has an unexpected field " + inQuotes(item.key()));
}

const json &field(const json &object, const char *name, const std::string &where) {
  auto it = object.find(name);
  if (it == object.end())
    bad((where.empty() ? "the file" : where) + " has no \"" + name + "\"");
  return *it;
}

const json &objectField(const json &object, const char *name, const std::string &where) {
  const json &value = field(object, name, where);
  if (!value.is_object())
    bad(pathOf(where, name) + " is " + brief(value) + ", not an object");
  return value;
}

std::string stringField(const json &object, const char *name, const std::string &where) {
  const json &value = field(object, name, where);
  if (!value.is_string())
    bad(pathOf(where, name) + " is " + brief(value) + ", not a string");
  return value.get<std::string>();
}

/// A time in microseconds: a JSON number, finite and > 0 (NaN or "inf" as a string is no number).
double timeValue(const json &value, const std::string &what) {
  if (!value.is_number())
    bad(what + " is " + brief(value) + ", not a number of microseconds");
  double us = value.get<double>();
  if (!isTime(us))
    bad(what + " is " + brief(value) + ", not a time > 0");
  return us;
}

/// A bucket name: a power of two in plain decimal (digits only, no leading zero, no sign, no overflow).
int64_t bucketOf(const std::string &name) {
  bool decimal = !name.empty() && name.size() <= 19 && (name.size() == 1 || name[0] != '0') &&
                 std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
  int64_t bucket = 0;
  if (decimal) {
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), bucket);
    decimal = ec == std::errc() && end == name.data() + name.size();
  }
  if (!decimal)
    bad("bucket " + inQuotes(name) + " is not a decimal number");
  if (!isBucket(bucket))
    bad("bucket " + name + " is not a power of two >= 1");
  return bucket;
}

TuningKey keyOf(const json &doc) {
  const std::string where = "key";
  const json &k = objectField(doc, "key", "");
  onlyFields(k, {"op", "target", "dtype", "statics", "present"}, where);
  TuningKey key{stringField(k, "op", where), stringField(k, "target", where), stringField(k, "dtype", where), {}, {}};
  for (const auto &[name, value] : objectField(k, "statics", where).items()) {
    if (!value.is_number_integer())
      bad("key.statics." + printable(name, 60) + " is " + brief(value) + ", not an integer");
    if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      bad("key.statics." + printable(name, 60) + " is " + brief(value) + ", out of range");
    key.statics.emplace(name, value.get<int64_t>());
  }
  const json &present = field(k, "present", where);
  if (!present.is_array())
    bad("key.present is " + brief(present) + ", not an array");
  for (const json &name : present) {
    if (!name.is_string())
      bad("key.present holds " + brief(name) + ", not a tensor name");
    if (!key.present.insert(name.get<std::string>()).second)
      bad("key.present lists " + brief(name) + " twice");
  }
  return key;
}

BucketResult bucketResultOf(const json &value, const std::string &where) {
  if (!value.is_object())
    bad(where + " is " + brief(value) + ", not an object");
  onlyFields(value, {"best", "us", "version", "timings"}, where);
  BucketResult result;
  result.best = stringField(value, "best", where);
  result.us = timeValue(field(value, "us", where), pathOf(where, "us"));
  result.version = stringField(value, "version", where);
  for (const auto &[config, us] : objectField(value, "timings", where).items())
    result.timings.emplace(config, timeValue(us, pathOf(where, "timings.") + inQuotes(config)));
  return result;
}

TuningFile parseDocument(const std::string &text) {
  if (text.size() > kMaxBytes)
    bad("too large (" + std::to_string(text.size()) + " bytes; a tuning file has at most 16 MiB)");
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    bad(text.empty() ? "empty file" : "blank file");
  json doc = parseLimited(text);
  // What the file claims to be first: a file of another format or version is not "corrupt".
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != kFormat)
    bad("not a moec tuning file (no \"format\": \"moec-tuning\")");
  const json &formatVersion = field(doc, "format_version", "");
  if (!formatVersion.is_number_integer() || formatVersion != kFormatVersion)
    bad("format version " + brief(formatVersion) + ", this moec reads version " + std::to_string(kFormatVersion));
  const json &version = field(doc, "moec_version", "");
  if (!version.is_string())
    bad("moec_version is " + brief(version) + ", not a version");
  if (version != moecVersion())
    bad("written by moec " + printable(version.get<std::string>(), 40) + ", this is " + moecVersion() +
        " (tune again)");
  std::string checksum = stringField(doc, "checksum", "");
  if (checksum != checksumOf(doc))
    bad("checksum mismatch (the file was edited or damaged)");
  onlyFields(doc, {"format", "format_version", "moec_version", "key", "buckets", "checksum"}, "");

  TuningFile file{keyOf(doc), {}};
  for (const auto &[name, value] : objectField(doc, "buckets", "").items()) {
    int64_t bucket = bucketOf(name); // first: the name goes into bucketResultOf's messages
    file.buckets.emplace(bucket, bucketResultOf(value, "buckets." + name));
  }
  if (std::string problem = problemOf(file); !problem.empty())
    bad(problem);
  return file;
}

/// The contents of `path`, a regular file of at most kMaxBytes; nullopt when there is nothing at `path`.
/// Throws std::runtime_error with the reason alone. (Not readRegularFile: that reads any size.)
std::optional<std::string> readBounded(const fs::path &path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    if (errno == ENOENT)
      return std::nullopt;
    bad("cannot open: " + errnoText(errno));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    bad("cannot read: " + errnoText(errno));
  if (!S_ISREG(st.st_mode))
    bad("not a regular file");
  if (uint64_t(st.st_size) > kMaxBytes)
    bad("too large (" + std::to_string(st.st_size) + " bytes; a tuning file has at most 16 MiB)");
  std::string bytes(size_t(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      bad("cannot read: " + errnoText(errno));
    if (n == 0)
      break; // shrank while we read: the checks below see what is there
    done += size_t(n);
  }
  bytes.resize(done);
  return bytes;
}

/// Why the thing at `path` is not a file moec may replace, or "" when it may (none there, or a file
/// that parses as JSON with "format": "moec-tuning", however damaged otherwise).
std::string notReplaceable(const fs::path &path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0)
    return errno == ENOENT ? "" : "cannot look at it: " + errnoText(errno);
  if (S_ISLNK(st.st_mode))
    return "it is a symbolic link, which moec never makes";
  try {
    std::optional<std::string> text = readBounded(path);
    if (!text)
      return ""; // removed meanwhile
    json doc = parseLimited(*text);
    if (doc.is_object() && doc.contains("format") && doc["format"] == kFormat)
      return "";
    return "it is not a moec tuning file (no \"format\": \"moec-tuning\")";
  } catch (const std::runtime_error &e) {
    return std::string("it is not a moec tuning file (") + e.what() + ")";
  }
}

void writeChecked(const fs::path &path, const std::string &text) {
  if (std::string why = notReplaceable(path); !why.empty())
    throw std::runtime_error("moec: refusing to replace '" + path.string() + "': " + why);
  writeFileReplacing(path.string(), {text});
}

} // namespace

const char *moecVersion() { return MOEC_VERSION; }

std::string TuningKey::text() const {
  std::string out = "op=" + quoteExact(op) + " target=" + quoteExact(target) + " dtype=" + quoteExact(dtype);
  out += " statics={";
  for (const auto &[name, value] : statics) {
    if (out.back() != '{')
      out += ',';
    out += quoteExact(name) + "=" + std::to_string(value);
  }
  out += "} present={";
  for (const std::string &name : present) {
    if (out.back() != '{')
      out += ',';
    out += quoteExact(name);
  }
  return out + "}";
}

std::string TuningKey::fileName() const {
  return fileNamePart(op) + "." + fileNamePart(target) + "." + fileNamePart(dtype) + "." +
         contentHash(text()).substr(0, 16) + ".json";
}

int64_t tokenBucket(int64_t tokens) {
  if (tokens < 1)
    return 1;
  if (tokens > kMaxBucket)
    throw std::out_of_range("moec: " + std::to_string(tokens) + " tokens: no token bucket holds more than 2^62");
  return int64_t(std::bit_ceil(uint64_t(tokens)));
}

bool ranksBefore(const std::string &a, double aUs, const std::string &b, double bUs) {
  if (aUs != bUs)
    return aUs < bUs;
  if ((a == "heuristic") != (b == "heuristic"))
    return a == "heuristic";
  return a < b;
}

void TuningFile::record(int64_t bucket, const std::string &config, double us) {
  if (!isBucket(bucket))
    throw std::invalid_argument("moec: tuning bucket " + std::to_string(bucket) + " is not a power of two >= 1");
  if (config.empty())
    throw std::invalid_argument("moec: a tuning config text is empty");
  if (!isTime(us))
    throw std::invalid_argument("moec: the time of " + inQuotes(config) + " is " + showTime(us) + ", not a time > 0");
  BucketResult &result = buckets[bucket];
  auto [timing, added] = result.timings.emplace(config, us);
  if (!added)
    timing->second = std::min(timing->second, us);
  result.best = fastest(result.timings);
  result.us = result.timings.at(result.best);
  result.version = moecVersion();
}

const BucketResult *TuningFile::forTokens(int64_t tokens) const {
  if (tokens > kMaxBucket)
    return nullptr; // no bucket can hold it
  auto it = buckets.find(tokenBucket(tokens));
  return it == buckets.end() ? nullptr : &it->second;
}

std::string toJson(const TuningFile &file) {
  if (std::string problem = problemOf(file); !problem.empty())
    throw std::invalid_argument("moec: invalid tuning results: " + problem);
  try {
    return documentOf(file).dump(2) + "\n";
  } catch (const json::exception &e) { // type_error 316: a string that is not UTF-8
    throw std::invalid_argument(std::string("moec: invalid tuning results: ") + e.what());
  }
}

TuningFile fromJson(const std::string &text) {
  try {
    return parseDocument(text);
  } catch (const std::runtime_error &) {
    throw;
  } catch (const json::exception &e) { // the checks above leave none, but a file must never crash us
    throw std::runtime_error(printable(e.what()));
  } catch (const std::logic_error &e) {
    throw std::runtime_error(printable(e.what()));
  }
}

TuningFile merge(const std::vector<TuningFile> &files) {
  if (files.empty())
    throw std::invalid_argument("moec: no tuning files to merge");
  TuningFile merged{files.front().key, {}};
  for (const TuningFile &file : files) {
    if (!(file.key == merged.key))
      throw std::runtime_error("moec: cannot merge tuning results of different keys: " + printable(merged.key.text()) +
                               " and " + printable(file.key.text()));
    // record() keeps the least time per config and recomputes best, neither of which depends on order.
    for (const auto &[bucket, result] : file.buckets)
      for (const auto &[config, us] : result.timings)
        merged.record(bucket, config, us);
  }
  return merged;
}

TuningDb::TuningDb(fs::path dir, Warn warn) : dir_(std::move(dir)), warn_(std::move(warn)) {
  if (!warn_)
    warn_ = [](const std::string &line) { std::cerr << line << '\n'; };
}

std::optional<TuningFile> TuningDb::load(const TuningKey &key) const {
  fs::path path = dir_ / key.fileName();
  try {
    std::optional<std::string> text = readBounded(path);
    if (!text)
      return std::nullopt;
    TuningFile file = fromJson(*text);
    if (!(file.key == key))
      bad("it holds the results of another key (" + printable(file.key.text()) + ")");
    return file;
  } catch (const std::exception &e) {
    warn_("moec: warning: ignoring tuning file '" + path.string() + "': " + printable(e.what(), 400));
    return std::nullopt;
  }
}

void TuningDb::store(const TuningFile &file) {
  std::string text = toJson(file); // refuses bad results before anything on disk changes
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    throw std::runtime_error("moec: cannot create tuning directory '" + dir_.string() + "': " + ec.message());
  writeChecked(dir_ / file.key.fileName(), text);
}

std::vector<TuningFile> TuningDb::list() const {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir_, ec);
  if (ec) {
    if (ec != std::errc::no_such_file_or_directory)
      warn_("moec: warning: cannot read tuning directory '" + dir_.string() + "': " + ec.message());
    return {};
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.size() > 5 && name.ends_with(".json"))
      names.push_back(name);
  }
  if (ec)
    warn_("moec: warning: cannot read tuning directory '" + dir_.string() + "': " + ec.message());
  std::sort(names.begin(), names.end());

  std::vector<TuningFile> files;
  for (const std::string &name : names) {
    fs::path path = dir_ / name;
    try {
      std::optional<std::string> text = readBounded(path);
      if (!text)
        continue; // removed meanwhile
      TuningFile file = fromJson(*text);
      if (std::string expected = file.key.fileName(); expected != name)
        bad("its name does not match its key (" + printable(file.key.text()) + " belongs in " + expected + ")");
      files.push_back(std::move(file));
    } catch (const std::exception &e) {
      warn_("moec: warning: ignoring tuning file '" + path.string() + "': " + printable(e.what(), 400));
    }
  }
  return files;
}

TuningDb::ClearResult TuningDb::clear(const std::set<std::string> &keep) const {
  ClearResult result;
  std::error_code ec;
  fs::directory_iterator it(dir_, ec);
  if (ec) {
    if (ec != std::errc::no_such_file_or_directory)
      throw std::runtime_error("moec: cannot read tuning directory '" + dir_.string() + "': " + ec.message());
    return result;
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (keep.count(name)) {
      ++result.kept;
      continue;
    }
    bool ours = false;
    struct stat st;
    if (name.ends_with(".json") && ::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      try {
        std::optional<std::string> text = readBounded(it->path());
        json doc = text ? parseLimited(*text) : json();
        ours = doc.is_object() && doc.contains("format") && doc["format"] == kFormat && doc.contains("checksum") &&
               doc["checksum"].is_string() && doc["checksum"] == checksumOf(doc);
      } catch (const std::exception &) {
        ours = false; // not JSON, too large, unreadable: not a file moec wrote
      }
    }
    if (!ours) {
      ++result.leftAlone;
      continue;
    }
    std::error_code removed;
    if (fs::remove(it->path(), removed))
      ++result.removed;
    else if (removed)
      throw std::runtime_error("moec: cannot remove '" + it->path().string() + "': " + removed.message());
  }
  if (ec)
    throw std::runtime_error("moec: cannot read tuning directory '" + dir_.string() + "': " + ec.message());
  return result;
}

TuningFile TuningDb::read(const fs::path &path) {
  try {
    std::optional<std::string> text = readBounded(path);
    if (!text)
      bad("cannot open: " + errnoText(ENOENT));
    return fromJson(*text);
  } catch (const std::runtime_error &e) {
    throw std::runtime_error("moec: tuning file '" + path.string() + "': " + e.what());
  }
}

void TuningDb::write(const fs::path &path, const TuningFile &file) { writeChecked(path, toJson(file)); }

} // namespace moec::tune
