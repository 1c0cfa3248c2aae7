//===- TuningDbClearTest.cpp - Clearing tuning files: only moec's, as moec wrote them -===//
#include "FileTestSupport.h"
#include "moec/tune/TuningDb.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>


namespace moec::tune {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::names;
using testing::readText;
using testing::resign;
using testing::writeText;

TuningKey sampleKey(const std::string &op = "moe_init_routing_v2_grad") {
  return {op, "cpu-test-2threads", "bf16", {{"H", 7168}, {"top_k", 8}}, {}};
}

TuningFile sampleFile(const TuningKey &key = sampleKey()) {
  TuningFile file{key, {}};
  file.record(1024, "vector=8,threads=1,rows=16,unroll=4", 12.25);
  file.record(1024, "heuristic", 15.1);
  return file;
}

class TuningDbClear : public testing::ScratchStoreTest {
protected:
  TuningDb db() {
    return TuningDb(root / "tuning", collectWarnings());
  }
};

// `moec cache clear --tuning`: only tuning files moec wrote, as it wrote them, of any moec version; anything
// else stays, counted, and the names the caller keeps (the reports folder) are neither removed nor counted.
TEST_F(TuningDbClear, ClearRemovesOnlyTheTuningFilesMoecWrote) {
  TuningDb tuning = db();
  EXPECT_EQ(tuning.clear().removed, 0u) << "no directory yet: nothing to clear";
  tuning.store(sampleFile());
  tuning.store(sampleFile(sampleKey("moe_unpermute")));
  fs::path dir = tuning.dir();
  json doc = json::parse(toJson(sampleFile(sampleKey("other_op"))));
  doc["moec_version"] = "0.0.1"; // an older moec's file, intact: still moec's
  writeText(dir / "older.json", resign(doc));
  json edited = json::parse(toJson(sampleFile()));
  edited["buckets"]["1024"]["us"] = 1.0; // edited by hand: the checksum no longer matches
  writeText(dir / "edited.json", edited.dump(2));
  writeText(dir / "notes.json", R"({"format": "moec-tuning"})"); // claims the format, has no checksum
  writeText(dir / "README.txt", "not json");
  writeText(dir / "broken.json", "{");
  fs::create_symlink(dir / sampleKey().fileName(), dir / "link.json");
  fs::create_directories(dir / "reports");
  fs::create_directories(dir / "mine");

  TuningDb::ClearResult cleared = tuning.clear({"reports"});
  EXPECT_EQ(cleared.removed, 3u);
  EXPECT_EQ(cleared.leftAlone, 6u) << "edited, notes, README, broken, the link and a folder";
  EXPECT_EQ(cleared.kept, 1u);
  EXPECT_EQ(names(dir), (std::vector<std::string>{"README.txt", "broken.json", "edited.json", "link.json", "mine",
                                                  "notes.json", "reports"}));
  EXPECT_EQ(readText(dir / "notes.json"), R"({"format": "moec-tuning"})");
  EXPECT_TRUE(tuning.list().empty());
}

TEST_F(TuningDbClear, KernelCacheClearKeepsTheNamesItIsGiven) {
  DiskCache cache(root);
  ASSERT_TRUE(cache.enabled()) << cache.disabledReason();
  TuningDb tuning = db();
  tuning.store(sampleFile());
  writeText(root / "notes.txt", "keep");
  std::string keyText = "moec test kernel";
  cache.store(cacheKeyHash(keyText), {keyText, {{"kernel.o", "object"}}, {}});
  DiskCache::ClearResult cleared = cache.clear({"tuning"});
  EXPECT_EQ(cleared.removed, 1u);
  EXPECT_EQ(cleared.kept, 1u) << "the tuning folder: moec's, not an entry";
  EXPECT_EQ(cleared.leftAlone, 1u) << "notes.txt";
  EXPECT_EQ(tuning.load(sampleKey()), sampleFile());
}

} // namespace
} // namespace moec::tune
