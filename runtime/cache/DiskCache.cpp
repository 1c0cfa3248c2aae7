//===- DiskCache.cpp - On-disk cache of compiled kernels ------------------===//
//
// Layout and concurrency model: see DiskCache.h. Names starting with '.' are never entries: they are
// temp directories (".tmp-<keyHash>-<pid>-<tid>-<random>"), either being filled by store() or holding
// an entry renamed aside for deletion.
//
// The cache directory may be shared with files that are not moec's (a mis-set MOEC_CACHE_DIR), so
// clear() and list() touch only what moec wrote: a directory named by a key hash whose meta.json holds
// that key, and temp directories named as above.
//===----------------------------------------------------------------------===//
#include "moec/contracts/Files.h"
#include "moec/runtime/DiskCache.h"

#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace moec {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// meta.json layout version. 2: a checksum over the rest of meta.json (the kernel list decides what
// code runs, so an edit of it must read as corruption).
constexpr int kFormat = 2;
constexpr const char *kMetaFile = "meta.json";
constexpr const char *kTempPrefix = ".tmp-";
// A temp directory this old is left over from a crashed process: a store takes well under a second.
constexpr auto kStaleTempAge = std::chrono::hours(1);

/// Thrown while reading an entry; load() turns it into a warning and a miss.
struct CorruptEntry : std::runtime_error {
  using std::runtime_error::runtime_error;
};


std::string errnoText(int err) { return std::generic_category().message(err); }

[[noreturn]] void throwIoError(const std::string &what, const fs::path &path, int err) {
  throw std::runtime_error("moec: cannot " + what + " '" + path.string() + "': " + errnoText(err));
}

std::string hash128(const void *data, size_t size) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits(data, size));
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char byte : canonical.digest) {
    hex += digits[byte >> 4];
    hex += digits[byte & 15];
  }
  return hex;
}

bool isHex(const std::string &s, size_t begin, size_t count) {
  if (s.size() < begin + count)
    return false;
  return std::all_of(s.begin() + begin, s.begin() + begin + count,
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

/// 32 lowercase hex digits: the name of an entry directory.
bool isKeyHash(const std::string &name) { return name.size() == 32 && isHex(name, 0, 32); }

/// ".tmp-<keyHash>-<pid>-<tid>-<random>", as tempName() makes them.
bool isTempName(const std::string &name) {
  std::string prefix = kTempPrefix;
  if (name.rfind(prefix, 0) != 0 || !isHex(name, prefix.size(), 32))
    return false;
  std::string rest = name.substr(prefix.size() + 32);
  int dashes = 0;
  for (char c : rest) {
    if (c == '-')
      ++dashes;
    else if (!std::isxdigit(static_cast<unsigned char>(c)))
      return false;
  }
  return dashes == 3 && rest[0] == '-';
}

/// The checksum stored in meta.json: over the canonical dump (sorted keys) of everything else in it.
std::string metaChecksum(json meta) {
  meta.erase("checksum");
  return contentHash(meta.dump());
}

/// A name that stays inside its directory and is not reserved (temp dirs start with '.').
bool isPlainName(const std::string &name) {
  return !name.empty() && name[0] != '.' && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

void checkName(const std::string &name, const char *what) {
  if (!isPlainName(name) || name == kMetaFile)
    throw std::invalid_argument("moec: invalid cache " + std::string(what) + " '" + name + "'");
}

/// Unique across processes (pid), threads (tid) and reuse of a dead pid (random).
std::string tempName(const std::string &keyHash) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::ostringstream name;
  name << kTempPrefix << keyHash << '-' << ::getpid() << '-' << ::gettid() << '-' << std::hex << rng();
  return name.str();
}

/// Writes a new file `name` in `dirFd` and fsyncs it; returns 0 or an errno.
int writeFileAt(int dirFd, const std::string &name, const std::string &bytes) {
  Fd fd(::openat(dirFd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd)
    return errno;
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno != EINTR)
      return errno;
    done += n > 0 ? size_t(n) : 0;
  }
  return ::fsync(fd.get()) == 0 ? 0 : errno;
}

std::string readFileAt(int dirFd, const std::string &name) {
  // O_NONBLOCK: opening a FIFO planted in an entry must not hang; O_NOFOLLOW: no links out of it.
  Fd fd(::openat(dirFd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0)
    throw CorruptEntry(name + ": " + errnoText(errno));
  if (!S_ISREG(st.st_mode))
    throw CorruptEntry("'" + name + "' is not a regular file");
  std::string bytes(size_t(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno != EINTR)
      throw CorruptEntry(name + ": " + errnoText(errno));
    if (n == 0)
      break;
    done += n > 0 ? size_t(n) : 0;
  }
  bytes.resize(done);
  return bytes;
}

int fsyncDir(const fs::path &dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return fd && ::fsync(fd.get()) == 0 ? 0 : errno;
}

/// Checks one artifact against its meta.json record and returns its contents.
std::string readArtifact(int dirFd, const std::string &name, const json &record) {
  if (!isPlainName(name) || name == kMetaFile)
    throw CorruptEntry("meta.json: bad file name '" + name + "'");
  std::string bytes = readFileAt(dirFd, name);
  const json &sizeJson = record.at("size");
  if (!sizeJson.is_number_unsigned()) // a float would convert with undefined behaviour
    throw CorruptEntry("meta.json: size of '" + name + "' is " + sizeJson.dump() + ", not a byte count");
  uint64_t size = sizeJson.get<uint64_t>();
  if (bytes.size() != size)
    throw CorruptEntry(name + ": " + std::to_string(bytes.size()) + " bytes, expected " +
                       std::to_string(size));
  if (contentHash(bytes) != record.at("hash").get<std::string>())
    throw CorruptEntry(name + ": content hash mismatch");
  return bytes;
}

/// Parses meta.json of the entry open at `dirFd` and checks its format and checksum.
json readMeta(int dirFd) {
  try {
    json meta = json::parse(readFileAt(dirFd, kMetaFile));
    if (meta.at("format") != kFormat)
      throw CorruptEntry("meta.json: unknown format " + meta.at("format").dump());
    if (meta.at("checksum").get<std::string>() != metaChecksum(meta))
      throw CorruptEntry("meta.json: checksum mismatch (the file was edited or damaged)");
    meta.at("key").get<std::string>();
    if (!meta.at("files").is_object() || meta.at("files").empty())
      throw CorruptEntry("meta.json: no files");
    return meta;
  } catch (const json::exception &e) {
    throw CorruptEntry(std::string("meta.json: ") + e.what());
  }
}

/// Reads and verifies the entry open at `dirFd`; nullopt if it belongs to another key text.
std::optional<DiskCache::Entry> readEntry(int dirFd, const std::string &keyText) {
  json meta = readMeta(dirFd);
  if (meta.at("key").get<std::string>() != keyText)
    return std::nullopt; // an XXH3-128 collision: not ours, but not corrupt either
  try {
    DiskCache::Entry entry{keyText, {}, meta.value("user", json())};
    for (const auto &[name, record] : meta.at("files").items())
      entry.files.emplace(name, readArtifact(dirFd, name, record));
    return entry;
  } catch (const json::exception &e) {
    throw CorruptEntry(std::string("meta.json: ") + e.what());
  }
}

/// Whether `dirent` is an entry moec wrote: a real directory named by a key hash, holding a meta.json
/// whose key has that hash. A damaged entry still qualifies (clear() removes it); a foreign directory,
/// even one named like a hash, does not.
bool isMoecEntry(const fs::directory_entry &dirent) {
  std::string name = dirent.path().filename().string();
  std::error_code ec;
  if (!isKeyHash(name) || !dirent.is_directory(ec) || dirent.is_symlink(ec))
    return false;
  Fd dirFd(::open(dirent.path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dirFd)
    return false;
  try {
    json meta = json::parse(readFileAt(dirFd.get(), kMetaFile));
    return meta.at("format").is_number_integer() && cacheKeyHash(meta.at("key").get<std::string>()) == name;
  } catch (const std::exception &) {
    return false;
  }
}

/// Whether `path` still names the directory open at `dirFd`: false if it was removed or replaced
/// while we read it, which is a plain miss rather than corruption.
bool stillAt(int dirFd, const fs::path &path) {
  struct stat opened, current;
  return ::fstat(dirFd, &opened) == 0 && ::stat(path.c_str(), &current) == 0 &&
         opened.st_dev == current.st_dev && opened.st_ino == current.st_ino;
}

/// Renames `path` aside, then deletes it, so that no reader opens a half-deleted entry. Returns false
/// if it was already gone (another process removed it).
bool removeEntry(const fs::path &dir, const fs::path &path) {
  fs::path aside = dir / tempName(path.filename().string());
  if (::rename(path.c_str(), aside.c_str()) != 0)
    return false;
  std::error_code ignored; // a failed delete leaves a temp dir that clear() collects
  fs::remove_all(aside, ignored);
  return true;
}

json metaFor(const DiskCache::Entry &entry) {
  json files = json::object();
  for (const auto &[name, bytes] : entry.files)
    files[name] = {{"size", bytes.size()}, {"hash", contentHash(bytes)}};
  auto now = std::chrono::system_clock::now().time_since_epoch();
  json meta = {{"format", kFormat},
               {"key", entry.keyText},
               {"created", std::chrono::duration_cast<std::chrono::seconds>(now).count()},
               {"files", files},
               {"user", entry.meta}};
  meta["checksum"] = metaChecksum(meta);
  return meta;
}

/// Fills the fresh directory `tmp` with the entry's files and meta.json (written last), all fsynced.
void writeEntry(const fs::path &tmp, const DiskCache::Entry &entry) {
  Fd dirFd(::open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dirFd)
    throwIoError("open cache directory", tmp, errno);
  for (const auto &[name, bytes] : entry.files)
    if (int err = writeFileAt(dirFd.get(), name, bytes))
      throwIoError("write cache file", tmp / name, err);
  if (int err = writeFileAt(dirFd.get(), kMetaFile, metaFor(entry).dump(2) + "\n"))
    throwIoError("write cache file", tmp / kMetaFile, err);
  if (::fsync(dirFd.get()) != 0)
    throwIoError("sync cache directory", tmp, errno);
}

/// Tries to create and remove a directory in `dir`; returns 0 or an errno.
int probeWritable(const fs::path &dir) {
  std::string probe = (dir / (std::string(kTempPrefix) + "probe-XXXXXX")).string();
  if (!::mkdtemp(probe.data()))
    return errno;
  ::rmdir(probe.c_str());
  return 0;
}

bool isStaleTemp(const fs::directory_entry &dirent) {
  std::error_code ec;
  auto modified = dirent.last_write_time(ec);
  return !ec && fs::file_time_type::clock::now() - modified > kStaleTempAge;
}

std::optional<DiskCache::EntryInfo> entryInfo(const fs::directory_entry &dirent) {
  std::string keyHash = dirent.path().filename().string();
  if (!isMoecEntry(dirent))
    return std::nullopt;
  Fd dirFd(::open(dirent.path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dirFd)
    return std::nullopt;
  try {
    json meta = readMeta(dirFd.get());
    // Seconds since the epoch that system_clock can hold (its nanoseconds overflow past year 2262).
    constexpr int64_t kMaxSeconds =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::duration::max()).count();
    const json &created = meta.at("created");
    if (!created.is_number_integer() || (created.is_number_unsigned() && created.get<uint64_t>() > uint64_t(kMaxSeconds)) ||
        created.get<int64_t>() < -kMaxSeconds || created.get<int64_t>() > kMaxSeconds)
      return std::nullopt; // not a time: unreadable
    DiskCache::EntryInfo info{keyHash, meta.at("key").get<std::string>(), 0,
                              std::chrono::system_clock::time_point(std::chrono::seconds(created.get<int64_t>())),
                              {}};
    for (const auto &file : meta.at("files").items())
      info.files.push_back(file.key());
    std::error_code ec;
    for (const auto &f : fs::directory_iterator(dirent.path(), ec))
      info.bytes += f.is_regular_file(ec) ? f.file_size(ec) : 0;
    return info;
  } catch (const std::exception &) {
    return std::nullopt; // unreadable or removed meanwhile; load() repairs corrupt entries
  }
}

} // namespace

std::string cacheKeyHash(const std::string &keyText) { return hash128(keyText.data(), keyText.size()); }

std::string contentHash(const std::string &bytes) { return hash128(bytes.data(), bytes.size()); }

fs::path defaultCacheDir() {
  auto env = [](const char *name) -> std::string {
    const char *value = std::getenv(name);
    return value ? value : "";
  };
  if (std::string dir = env("MOEC_CACHE_DIR"); !dir.empty())
    return dir;
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty())
    return fs::path(xdg) / "moec";
  std::string home = env("HOME");
  if (home.empty())
    if (const passwd *pw = ::getpwuid(::getuid()))
      home = pw->pw_dir;
  return fs::path(home) / ".cache" / "moec";
}

DiskCache::DiskCache(fs::path dir)
    : dir_(std::move(dir)), warningHandler_([](const std::string &line) { std::cerr << line << '\n'; }) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  int err = ec ? ec.value() : probeWritable(dir_);
  if (err)
    disabledReason_ = "cache directory '" + dir_.string() + "' is not writable: " + errnoText(err);
}

void DiskCache::setWarningHandler(WarningHandler handler) {
  std::lock_guard<std::mutex> lock(handlerMutex_);
  warningHandler_ = std::move(handler);
}

void DiskCache::reportCorrupt(const fs::path &entryPath, const std::string &reason) {
  // Once per process and entry, however many DiskCache objects or threads hit it.
  static std::mutex reportedMutex;
  static std::set<std::string> reported;
  {
    std::lock_guard<std::mutex> lock(reportedMutex);
    if (!reported.insert(entryPath.string()).second)
      return;
  }
  WarningHandler handler;
  {
    std::lock_guard<std::mutex> lock(handlerMutex_);
    handler = warningHandler_;
  }
  if (handler)
    handler("moec: warning: cache entry " + entryPath.string() + " is corrupt (" + reason +
            "); rebuilding");
}

std::optional<DiskCache::Entry> DiskCache::load(const std::string &keyHash, const std::string &keyText) {
  if (!enabled())
    return std::nullopt;
  checkName(keyHash, "key hash");
  fs::path path = dir_ / keyHash;
  Fd dirFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  try {
    if (!dirFd) {
      if (errno == ENOENT)
        return std::nullopt;
      throw CorruptEntry(errnoText(errno));
    }
    return readEntry(dirFd.get(), keyText);
  } catch (const CorruptEntry &e) {
    if (dirFd && !stillAt(dirFd.get(), path))
      return std::nullopt;
    reportCorrupt(path, e.what());
    // Already gone is fine (another process repaired it). If another process republished the key
    // between stillAt() and here, its good entry goes too: that costs one recompile, never a bad read.
    removeEntry(dir_, path);
    return std::nullopt;
  }
}

void DiskCache::discard(const std::string &keyHash, const std::string &reason) {
  if (!enabled())
    return;
  checkName(keyHash, "key hash");
  fs::path path = dir_ / keyHash;
  reportCorrupt(path, reason);
  removeEntry(dir_, path);
}

void DiskCache::store(const std::string &keyHash, const Entry &entry) {
  if (!enabled())
    return;
  checkName(keyHash, "key hash");
  if (entry.files.empty()) // load() reads an entry without files as corrupt
    throw std::invalid_argument("moec: a cache entry needs at least one file");
  for (const auto &file : entry.files)
    checkName(file.first, "file name");
  fs::path tmp = dir_ / tempName(keyHash);
  if (::mkdir(tmp.c_str(), 0755) != 0)
    throwIoError("create cache directory", tmp, errno);
  std::error_code ignored;
  try {
    writeEntry(tmp, entry);
  } catch (...) {
    fs::remove_all(tmp, ignored);
    throw;
  }
  fs::path target = dir_ / keyHash;
  if (::rename(tmp.c_str(), target.c_str()) == 0) {
    if (int err = fsyncDir(dir_))
      throwIoError("sync cache directory", dir_, err);
    return;
  }
  int err = errno;
  fs::remove_all(tmp, ignored);
  // EEXIST / ENOTEMPTY: another thread or process published this key first; keep its entry.
  if (err != EEXIST && err != ENOTEMPTY)
    throwIoError("publish cache entry", target, err);
}

std::vector<DiskCache::EntryInfo> DiskCache::list() const {
  std::vector<EntryInfo> entries;
  std::error_code ec;
  for (const auto &dirent : fs::directory_iterator(dir_, ec))
    if (auto info = entryInfo(dirent))
      entries.push_back(std::move(*info));
  std::sort(entries.begin(), entries.end(),
            [](const EntryInfo &a, const EntryInfo &b) { return a.keyHash < b.keyHash; });
  return entries;
}

DiskCache::ClearResult DiskCache::clear(const std::set<std::string> &keep) {
  ClearResult result;
  std::error_code ec, ignored;
  for (const auto &dirent : fs::directory_iterator(dir_, ec)) {
    std::string name = dirent.path().filename().string();
    if (keep.count(name))
      ++result.kept;
    else if (isMoecEntry(dirent))
      result.removed += removeEntry(dir_, dirent.path());
    else if (isTempName(name) && dirent.is_directory(ignored) && !dirent.is_symlink(ignored)) {
      if (isStaleTemp(dirent)) // a fresh one belongs to a store in progress
        fs::remove_all(dirent.path(), ignored);
    } else {
      ++result.leftAlone;
    }
  }
  return result;
}

DiskCache::Stats DiskCache::stats() const {
  Stats stats;
  for (const EntryInfo &info : list()) {
    ++stats.entries;
    stats.bytes += info.bytes;
  }
  return stats;
}

} // namespace moec
