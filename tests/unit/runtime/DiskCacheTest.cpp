//===- DiskCacheTest.cpp - The on-disk kernel cache -----------------------===//
#include "FileTestSupport.h"
#include "moec/runtime/DiskCache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <thread>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace moec {
namespace {

namespace fs = std::filesystem;
using testing::names;
using testing::readText;
using testing::writeText;

const std::string kKey = "moec 0.1|src=5f1c|op=moe_init_routing_v2_grad|dtype=bf16|H=7168|K=8|ptx sm_90";

DiskCache::Entry sampleEntry(const std::string &keyText = kKey, char fill = 'k') {
  std::string object("\x7f" "ELF\0\1\2\0", 8);
  object += std::string(200000, fill); // big enough that a torn write would show
  return {keyText,
          {{"op.moe", "op moe_init_routing_v2_grad<T: bf16>\n"},
           {"kernel.ll", "define void @kernel() {\n  ret void\n}\n"},
           {"kernel.o", object}},
          {{"arch", "sm_90"}, {"registers", 32}}};
}

void expectSameEntry(const DiskCache::Entry &actual, const DiskCache::Entry &expected) {
  EXPECT_EQ(actual.keyText, expected.keyText);
  EXPECT_EQ(actual.files, expected.files);
  EXPECT_EQ(actual.meta, expected.meta);
}

class DiskCacheTest : public testing::ScratchStoreTest {
protected:
  void TearDown() override {
    std::error_code ec;
    fs::permissions(root / "ro", fs::perms::owner_all, ec); // left read-only if a test failed early
    ScratchStoreTest::TearDown();
  }

  /// A cache in `root/name` whose warnings go to `warnings`.
  std::unique_ptr<DiskCache> open(const std::string &name) {
    auto cache = std::make_unique<DiskCache>(root / name);
    cache->setWarningHandler(collectWarnings());
    return cache;
  }
};

TEST(DiskCacheHash, Is32HexDigitsOfXxh3_128) {
  // XXH3-128 of "" in canonical (big-endian) form: pins the format of every key on disk.
  EXPECT_EQ(contentHash(""), "99aa06d3014798d86001c324468d497f");
  std::string h = cacheKeyHash(kKey);
  EXPECT_EQ(h.size(), 32u);
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(h, cacheKeyHash(kKey));
  EXPECT_NE(h, cacheKeyHash(kKey + " "));
  EXPECT_EQ(contentHash(kKey), h);
}

TEST_F(DiskCacheTest, StoreThenLoadRoundTrips) {
  auto cache = open("c");
  ASSERT_TRUE(cache->enabled()) << cache->disabledReason();
  std::string hash = cacheKeyHash(kKey);
  EXPECT_FALSE(cache->load(hash, kKey));
  DiskCache::Entry entry = sampleEntry();
  cache->store(hash, entry);

  auto hit = cache->load(hash, kKey);
  ASSERT_TRUE(hit);
  expectSameEntry(*hit, entry);
  // A second object (another process, later) sees it too.
  auto again = DiskCache(root / "c").load(hash, kKey);
  ASSERT_TRUE(again);
  expectSameEntry(*again, entry);

  nlohmann::json meta = nlohmann::json::parse(readText(root / "c" / hash / "meta.json"));
  EXPECT_EQ(meta["key"], kKey);
  EXPECT_GT(meta["created"].get<int64_t>(), 0);
  EXPECT_EQ(meta["files"]["kernel.o"]["size"], entry.files["kernel.o"].size());
  EXPECT_EQ(meta["files"]["kernel.o"]["hash"], contentHash(entry.files["kernel.o"]));
  EXPECT_EQ(meta["user"], entry.meta);
  EXPECT_EQ(meta["format"], 2);
  // The checksum covers everything else in meta.json, so an edit of the kernel list is caught.
  nlohmann::json covered = meta;
  covered.erase("checksum");
  EXPECT_EQ(meta["checksum"], contentHash(covered.dump()));
  EXPECT_TRUE(warnings.empty());
}

TEST_F(DiskCacheTest, DifferentKeyTextWithTheSameHashIsAMiss) {
  auto cache = open("c");
  std::string hash = cacheKeyHash(kKey);
  cache->store(hash, sampleEntry());
  EXPECT_FALSE(cache->load(hash, kKey + "|other"));
  EXPECT_TRUE(warnings.empty());
  EXPECT_TRUE(cache->load(hash, kKey)) << "a collision must not remove the entry";
}

TEST_F(DiskCacheTest, StoreKeepsAnExistingEntry) {
  auto cache = open("c");
  std::string hash = cacheKeyHash(kKey);
  cache->store(hash, sampleEntry(kKey, 'a'));
  cache->store(hash, sampleEntry(kKey, 'b'));
  auto hit = cache->load(hash, kKey);
  ASSERT_TRUE(hit);
  expectSameEntry(*hit, sampleEntry(kKey, 'a'));
  EXPECT_EQ(names(root / "c"), std::vector<std::string>{hash});
}

TEST_F(DiskCacheTest, RejectsNamesThatLeaveTheEntry) {
  auto cache = open("c");
  DiskCache::Entry entry = sampleEntry();
  EXPECT_THROW(cache->store("../x", entry), std::invalid_argument);
  EXPECT_THROW(cache->store(".tmp-x", entry), std::invalid_argument);
  EXPECT_THROW(cache->load("", kKey), std::invalid_argument);
  for (const char *bad : {"a/b", "meta.json", ".hidden"}) {
    DiskCache::Entry withBad = entry;
    withBad.files[bad] = "x";
    EXPECT_THROW(cache->store(cacheKeyHash(kKey), withBad), std::invalid_argument) << bad;
  }
  EXPECT_TRUE(names(root / "c").empty());
}

/// Sets environment variables for one scope, restoring the old values after.
class EnvOverride {
public:
  void set(const char *name, const char *value) {
    if (!saved.count(name)) {
      const char *old = std::getenv(name);
      saved[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~EnvOverride() {
    for (const auto &[name, value] : saved)
      value ? ::setenv(name.c_str(), value->c_str(), 1) : ::unsetenv(name.c_str());
  }

private:
  std::map<std::string, std::optional<std::string>> saved;
};

TEST(DiskCacheDefaultDir, HonoursMoecCacheDirThenXdgThenHome) {
  EnvOverride env;
  env.set("MOEC_CACHE_DIR", "/m/cache");
  env.set("XDG_CACHE_HOME", "/x");
  env.set("HOME", "/h");
  EXPECT_EQ(defaultCacheDir(), fs::path("/m/cache"));
  env.set("MOEC_CACHE_DIR", "");
  EXPECT_EQ(defaultCacheDir(), fs::path("/x/moec"));
  env.set("MOEC_CACHE_DIR", nullptr);
  EXPECT_EQ(defaultCacheDir(), fs::path("/x/moec"));
  env.set("XDG_CACHE_HOME", nullptr);
  EXPECT_EQ(defaultCacheDir(), fs::path("/h/.cache/moec"));
}

using nlohmann::json;

/// Rewrites meta.json with `edit` applied, as a user with an editor would (checksum left as it was).
void editMeta(const fs::path &entryDir, const std::function<void(json &)> &edit) {
  json meta = json::parse(readText(entryDir / "meta.json"));
  edit(meta);
  writeText(entryDir / "meta.json", meta.dump(2));
}

struct Corruption {
  const char *name;
  std::function<void(const fs::path &entryDir)> apply;
};

const Corruption kCorruptions[] = {
    {"truncated file", [](const fs::path &e) { fs::resize_file(e / "kernel.o", 1000); }},
    {"flipped byte",
     [](const fs::path &e) {
       std::string text = readText(e / "kernel.o");
       text[text.size() / 2] ^= 0x20;
       writeText(e / "kernel.o", text);
     }},
    {"deleted file", [](const fs::path &e) { fs::remove(e / "op.moe"); }},
    {"garbled meta.json", [](const fs::path &e) { writeText(e / "meta.json", "{\"format\": 1, \"key"); }},
    {"meta.json of the wrong shape", [](const fs::path &e) { writeText(e / "meta.json", "[1, 2]"); }},
    {"deleted meta.json", [](const fs::path &e) { fs::remove(e / "meta.json"); }},
    {"a file instead of the entry",
     [](const fs::path &e) {
       fs::remove_all(e);
       writeText(e, "x");
     }},
    // The user metadata decides what code runs: any edit of meta.json must count as corruption.
    {"edited user metadata", [](const fs::path &e) { editMeta(e, [](json &m) { m["user"]["registers"] = 64; }); }},
    {"user metadata reordered",
     [](const fs::path &e) { editMeta(e, [](json &m) { m["user"] = json::array({m["user"], 1}); }); }},
    {"files record dropped", [](const fs::path &e) { editMeta(e, [](json &m) { m["files"].erase("op.moe"); }); }},
    {"no files", [](const fs::path &e) { editMeta(e, [](json &m) { m["files"] = json::object(); }); }},
    {"a JSON type error in meta.json",
     [](const fs::path &e) { editMeta(e, [](json &m) { m["files"]["kernel.o"]["size"] = "big"; }); }},
    {"a FIFO as kernel.o",
     [](const fs::path &e) {
       fs::remove(e / "kernel.o");
       ASSERT_EQ(::mkfifo((e / "kernel.o").c_str(), 0644), 0);
     }},
    {"a FIFO as meta.json",
     [](const fs::path &e) {
       fs::remove(e / "meta.json");
       ASSERT_EQ(::mkfifo((e / "meta.json").c_str(), 0644), 0);
     }},
    {"a directory as kernel.o",
     [](const fs::path &e) {
       fs::remove(e / "kernel.o");
       fs::create_directory(e / "kernel.o");
     }},
};

TEST_F(DiskCacheTest, CorruptEntriesAreReportedOnceRemovedAndRebuilt) {
  std::string hash = cacheKeyHash(kKey);
  DiskCache::Entry entry = sampleEntry();
  for (const Corruption &corruption : kCorruptions) {
    SCOPED_TRACE(corruption.name);
    warnings.clear();
    auto cache = open(corruption.name);
    fs::path entryDir = root / corruption.name / hash;
    cache->store(hash, entry);
    corruption.apply(entryDir);

    EXPECT_FALSE(cache->load(hash, kKey));
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0].rfind("moec: warning: cache entry " + entryDir.string() + " is corrupt (", 0), 0u)
        << warnings[0];
    EXPECT_NE(warnings[0].find("); rebuilding"), std::string::npos) << warnings[0];
    EXPECT_EQ(names(root / corruption.name), std::vector<std::string>{}) << "entry and temp dirs gone";
    EXPECT_FALSE(cache->load(hash, kKey));

    cache->store(hash, entry);
    auto hit = cache->load(hash, kKey);
    ASSERT_TRUE(hit);
    expectSameEntry(*hit, entry);

    // The same key corrupt again in this process: still a miss, but no second warning.
    corruption.apply(entryDir);
    EXPECT_FALSE(cache->load(hash, kKey));
    EXPECT_EQ(warnings.size(), 1u);
    EXPECT_FALSE(fs::exists(entryDir));
  }
}

bool canCreateFileIn(const fs::path &dir) {
  std::ofstream probe(dir / "probe");
  bool ok = probe.is_open();
  probe.close();
  std::error_code ec;
  fs::remove(dir / "probe", ec);
  return ok;
}

TEST_F(DiskCacheTest, UnwritableDirectoryDisablesTheCache) {
  fs::path parent = root / "ro";
  fs::create_directory(parent);
  fs::permissions(parent, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  fs::path dir = parent / "cache";
  if (canCreateFileIn(parent)) {
    // Root ignores permission bits: put the cache under a regular file, so mkdir fails (ENOTDIR).
    fs::permissions(parent, fs::perms::owner_all);
    writeText(parent / "file", "x");
    dir = parent / "file" / "cache";
  }
  DiskCache cache(dir);
  cache.setWarningHandler([this](const std::string &line) { warnings.push_back(line); });
  EXPECT_FALSE(cache.enabled());
  std::string prefix = "cache directory '" + dir.string() + "' is not writable: ";
  EXPECT_EQ(cache.disabledReason().rfind(prefix, 0), 0u) << cache.disabledReason();
  EXPECT_GT(cache.disabledReason().size(), prefix.size());

  std::string hash = cacheKeyHash(kKey);
  EXPECT_NO_THROW(cache.store(hash, sampleEntry()));
  EXPECT_FALSE(cache.load(hash, kKey));
  EXPECT_TRUE(cache.list().empty());
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_TRUE(warnings.empty());
}

/// One forked process: `threads` threads, each storing and loading `key` `rounds` times, all through
/// one DiskCache. Returns the exit status: 0 if every load after a store hit with the full content.
int hammer(const fs::path &dir, int startFd, int threads, int rounds) {
  char go;
  (void)!::read(startFd, &go, 1); // returns 0 once the parent closes the write end
  DiskCache cache(dir);
  std::atomic<bool> ok{cache.enabled()};
  cache.setWarningHandler([&](const std::string &) { ok = false; });
  DiskCache::Entry expected = sampleEntry();
  std::string hash = cacheKeyHash(kKey);
  auto complete = [&](const std::optional<DiskCache::Entry> &hit) {
    return hit->keyText == expected.keyText && hit->files == expected.files && hit->meta == expected.meta;
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      try {
        for (int round = 0; round < rounds; ++round) {
          if (auto early = cache.load(hash, kKey); early && !complete(early))
            ok = false;
          cache.store(hash, expected);
          auto hit = cache.load(hash, kKey);
          if (!hit || !complete(hit))
            ok = false;
        }
      } catch (...) {
        ok = false;
      }
    });
  for (std::thread &w : workers)
    w.join();
  return ok ? 0 : 1;
}

TEST_F(DiskCacheTest, ConcurrentProcessesAndThreadsPublishOneEntry) {
  constexpr int kProcesses = 8, kThreads = 4, kRounds = 10;
  fs::path dir = root / "shared";
  int start[2];
  ASSERT_EQ(::pipe(start), 0);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(start[1]);
      ::_exit(hammer(dir, start[0], kThreads, kRounds));
    }
    children.push_back(pid);
  }
  ::close(start[0]);
  ::close(start[1]); // all children start at once
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid << " status " << status;
  }
  std::string hash = cacheKeyHash(kKey);
  EXPECT_EQ(names(dir), std::vector<std::string>{hash}) << "one entry, no temp dirs left";
  auto hit = DiskCache(dir).load(hash, kKey);
  ASSERT_TRUE(hit);
  expectSameEntry(*hit, sampleEntry());
}

TEST_F(DiskCacheTest, ListClearAndStats) {
  auto cache = open("c");
  EXPECT_TRUE(cache->list().empty());
  EXPECT_EQ(cache->stats().entries, 0u);
  std::vector<std::string> keys = {kKey + "|a", kKey + "|b", kKey + "|c"};
  uint64_t artifactBytes = 0;
  for (const std::string &key : keys) {
    DiskCache::Entry entry = sampleEntry(key);
    for (const auto &file : entry.files)
      artifactBytes += file.second.size();
    cache->store(cacheKeyHash(key), entry);
  }

  std::vector<DiskCache::EntryInfo> entries = cache->list();
  ASSERT_EQ(entries.size(), 3u);
  uint64_t listed = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const DiskCache::EntryInfo &info = entries[i];
    if (i > 0)
      EXPECT_LT(entries[i - 1].keyHash, info.keyHash) << "sorted by key hash";
    EXPECT_EQ(info.keyHash, cacheKeyHash(info.keyText));
    EXPECT_NE(std::find(keys.begin(), keys.end(), info.keyText), keys.end());
    EXPECT_EQ(info.files, (std::vector<std::string>{"kernel.ll", "kernel.o", "op.moe"}));
    EXPECT_LE(std::chrono::system_clock::now() - info.created, std::chrono::minutes(1));
    listed += info.bytes;
  }
  DiskCache::Stats stats = cache->stats();
  EXPECT_EQ(stats.entries, 3u);
  EXPECT_EQ(stats.bytes, listed);
  EXPECT_GT(stats.bytes, artifactBytes) << "meta.json counts too";

  // Temp dirs: one left by a crashed store long ago, one of a store in progress.
  std::string staleName = ".tmp-" + cacheKeyHash("dead") + "-1-1-0";
  std::string freshName = ".tmp-" + cacheKeyHash("live") + "-2-2-0";
  fs::path stale = root / "c" / staleName, fresh = root / "c" / freshName;
  fs::create_directory(stale);
  fs::create_directory(fresh);
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(2));
  EXPECT_EQ(cache->clear().removed, 3u);
  EXPECT_EQ(names(root / "c"), std::vector<std::string>{freshName});
  EXPECT_TRUE(cache->list().empty());
  EXPECT_EQ(cache->stats().bytes, 0u);
  EXPECT_FALSE(cache->load(cacheKeyHash(keys[0]), keys[0]));
  EXPECT_TRUE(warnings.empty());
}

TEST_F(DiskCacheTest, ClearRemovesOnlyWhatMoecCreated) {
  // MOEC_CACHE_DIR set to a home directory by mistake: clear must leave everything but entries alone.
  auto cache = open("home");
  fs::path home = root / "home";
  std::string key = kKey + "|mine";
  cache->store(cacheKeyHash(key), sampleEntry(key));
  std::string foreignHash = cacheKeyHash("not a moec key");
  writeText(home / ".bashrc", "export PS1='$ '\n");
  writeText(home / "notes.txt", "keep me");
  fs::create_directories(home / "projects" / "src");
  writeText(home / "projects" / "src" / "main.c", "int main() {}");
  fs::create_directory(home / foreignHash); // a key-hash name, but no meta.json
  writeText(home / foreignHash / "data", "keep me");
  std::string otherHash = cacheKeyHash("other");
  fs::create_directory(home / otherHash); // a meta.json moec did not write
  writeText(home / otherHash / "meta.json", R"({"format": 2, "key": "something else", "files": {}})");
  fs::create_directory(home / "0123456789abcdef0123456789abcdef.bak");
  fs::path oldTemp = home / ".tmp-mine"; // a user's dir that looks like a temp dir, but is not moec's
  fs::create_directory(oldTemp);
  fs::last_write_time(oldTemp, fs::file_time_type::clock::now() - std::chrono::hours(2));
  std::vector<std::string> before = names(home);
  before.erase(std::find(before.begin(), before.end(), cacheKeyHash(key)));

  EXPECT_EQ(cache->list().size(), 1u) << "foreign directories are not entries";
  EXPECT_EQ(cache->stats().entries, 1u);
  DiskCache::ClearResult result = cache->clear();
  EXPECT_EQ(result.removed, 1u);
  EXPECT_EQ(result.leftAlone, before.size());
  EXPECT_EQ(names(home), before);
  EXPECT_EQ(readText(home / "projects" / "src" / "main.c"), "int main() {}");
  EXPECT_EQ(readText(home / foreignHash / "data"), "keep me");
  EXPECT_TRUE(fs::exists(home / otherHash / "meta.json"));
  EXPECT_TRUE(warnings.empty());
}

TEST_F(DiskCacheTest, StoreRejectsAnEntryWithoutFiles) {
  auto cache = open("c");
  DiskCache::Entry entry = sampleEntry();
  entry.files.clear();
  EXPECT_THROW(cache->store(cacheKeyHash(kKey), entry), std::invalid_argument);
  EXPECT_TRUE(names(root / "c").empty());
}

TEST_F(DiskCacheTest, DiscardReportsAndRemovesAnEntry) {
  // The runtime found the entry unusable (its object would not load): it is reported once and removed.
  auto cache = open("c");
  std::string hash = cacheKeyHash(kKey);
  cache->store(hash, sampleEntry());
  cache->discard(hash, "cannot load the kernel object");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "moec: warning: cache entry " + (root / "c" / hash).string() +
                             " is corrupt (cannot load the kernel object); rebuilding");
  EXPECT_TRUE(names(root / "c").empty());
  EXPECT_FALSE(cache->load(hash, kKey));
}

// Found by fuzz-cache-meta: a "created" time past system_clock's range overflowed (undefined behaviour) in
// list(); a size that is a float converted with undefined behaviour when out of range in load(). Since
// meta.json is checksummed, such an edit is also corruption: never listed, never loaded.
TEST_F(DiskCacheTest, OutOfRangeNumbersInMetaJsonAreUnreadableNotUndefined) {
  auto cache = open("c");
  std::string hash = cacheKeyHash(kKey);
  fs::path meta = root / "c" / hash / "meta.json";
  for (const char *created : {"17960382991", "-17960382991", "18446744073709551615", "1e300", "\"soon\""}) {
    SCOPED_TRACE(created);
    cache->store(hash, sampleEntry());
    std::string text = readText(meta);
    size_t at = text.find("\"created\":");
    ASSERT_NE(at, std::string::npos);
    size_t end = text.find_first_of(",}", at);
    writeText(meta, text.substr(0, at) + "\"created\": " + created + text.substr(end));
    EXPECT_TRUE(cache->list().empty());
    EXPECT_FALSE(cache->load(hash, kKey)) << "meta.json no longer matches its checksum";
    cache->clear();
  }
  for (const char *size : {"1e300", "-1.5", "200008.0", "-1"}) {
    SCOPED_TRACE(size);
    cache->store(hash, sampleEntry());
    std::string text = readText(meta);
    size_t at = text.find("\"size\":");
    ASSERT_NE(at, std::string::npos);
    size_t end = text.find_first_of(",}", at);
    writeText(meta, text.substr(0, at) + "\"size\": " + size + text.substr(end));
    EXPECT_FALSE(cache->load(hash, kKey));
    cache->clear();
  }
}

} // namespace
} // namespace moec
