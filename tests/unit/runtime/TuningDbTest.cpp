//===- TuningDbTest.cpp - The autotuning results database -----------------===//
#include "FileTestSupport.h"
#include "moec/tune/TuningDb.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <regex>
#include <set>

#include <sys/stat.h>
#include <unistd.h>

namespace moec::tune {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::names;
using testing::readText;
using testing::resign;
using testing::writeText;

const std::string kFast = "vector=8,threads=1,rows=16,unroll=4";
const std::string kSlow = "vector=4,threads=1,rows=16,unroll=4";

TuningKey sampleKey(const std::string &op = "moe_init_routing_v2_grad") {
  return {op, "ptx-sm_90", "bf16", {{"H", 7168}, {"top_k", 8}}, {"probs"}};
}

TuningFile sampleFile(const TuningKey &key = sampleKey()) {
  TuningFile file{key, {}};
  file.record(1, "vector=1,threads=1,rows=1,unroll=1", 3.5);
  file.record(1024, kFast, 12.25);
  file.record(1024, kSlow, 15.1);
  file.record(2048, kFast, 20.0);
  file.record(2048, "vector=8,threads=2,rows=16,unroll=4", 1e-3);
  return file;
}

bool isPrintableAscii(const std::string &s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

class TuningDbTest : public testing::ScratchStoreTest {
protected:
  /// A database in root/tuning (not created yet) whose warnings go to `warnings`.
  TuningDb db() {
    return TuningDb(root / "tuning", collectWarnings());
  }
};

TEST(TuningVersion, IsTheProjectVersion) {
  EXPECT_TRUE(std::regex_match(std::string(moecVersion()), std::regex(R"(\d+\.\d+\.\d+)"))) << moecVersion();
  EXPECT_EQ(json::parse(toJson(sampleFile()))["moec_version"], moecVersion());
}

TEST(TuningKey, TextHoldsEveryFieldAndTellsKeysApart) {
  TuningKey key = sampleKey();
  EXPECT_EQ(key.text(), R"(op="moe_init_routing_v2_grad" target="ptx-sm_90" dtype="bf16" statics={"H"=7168,)"
                        R"("top_k"=8} present={"probs"})");
  EXPECT_EQ(key.text().find('\n'), std::string::npos);
  std::vector<TuningKey> variants(7, key);
  variants[1].op = "moe_unpermute";
  variants[2].target = "ptx-sm_80";
  variants[3].dtype = "f32";
  variants[4].statics["H"] = 4096;
  variants[5].statics["E"] = 64;
  variants[6].present.clear();
  std::set<std::string> texts, fileNames;
  for (const TuningKey &k : variants) {
    texts.insert(k.text());
    fileNames.insert(k.fileName());
  }
  EXPECT_EQ(texts.size(), variants.size());
  EXPECT_EQ(fileNames.size(), variants.size());
  // Quoting: fields whose concatenations agree, or strings holding the separators, stay apart.
  TuningKey ab = key, a = key, quote = key;
  ab.op = "ab", ab.target = "c";
  a.op = "a", a.target = "bc";
  quote.op = R"(ab" target="c)", quote.target = "";
  EXPECT_NE(ab.text(), a.text());
  EXPECT_NE(ab.text(), quote.text());
  EXPECT_NE(ab.fileName(), a.fileName());
  EXPECT_TRUE(key == sampleKey());
  EXPECT_FALSE(key == variants[4]);
}

TEST(TuningKey, FileNameIsSafeAndNamedByTheHash) {
  TuningKey key = sampleKey();
  EXPECT_EQ(key.fileName(),
            "moe_init_routing_v2_grad.ptx-sm_90.bf16." + contentHash(key.text()).substr(0, 16) + ".json");

  key.op = "../a b/c";
  key.target = "cpu-Intel(R) Xeon(R) Platinum 8480+";
  key.dtype = "bf\n16";
  std::string name = key.fileName();
  EXPECT_EQ(name,
            ".._a_b_c.cpu-Intel_R__Xeon_R__Platinum_8480_.bf_16." + contentHash(key.text()).substr(0, 16) + ".json");
  EXPECT_EQ(name.find('/'), std::string::npos);

  // A long name still makes one path component; the hash keeps two long ops apart.
  TuningKey longA = sampleKey(std::string(300, 'a')), longB = sampleKey(std::string(300, 'a') + "b");
  EXPECT_LT(longA.fileName().size(), 255u);
  EXPECT_NE(longA.fileName(), longB.fileName());
  EXPECT_TRUE(std::regex_match(longA.fileName(), std::regex(R"(a{64}\.ptx-sm_90\.bf16\.[0-9a-f]{16}\.json)")));
}

TEST(TuningBucket, IsTheNextPowerOfTwo) {
  EXPECT_EQ(tokenBucket(std::numeric_limits<int64_t>::min()), 1);
  EXPECT_EQ(tokenBucket(-1), 1);
  EXPECT_EQ(tokenBucket(0), 1);
  EXPECT_EQ(tokenBucket(1), 1);
  EXPECT_EQ(tokenBucket(2), 2);
  EXPECT_EQ(tokenBucket(3), 4);
  EXPECT_EQ(tokenBucket(4), 4);
  EXPECT_EQ(tokenBucket(5), 8);
  EXPECT_EQ(tokenBucket(1023), 1024);
  EXPECT_EQ(tokenBucket(1024), 1024);
  EXPECT_EQ(tokenBucket(1025), 2048);
  EXPECT_EQ(tokenBucket((int64_t(1) << 40) + 1), int64_t(1) << 41);
  EXPECT_EQ(tokenBucket(int64_t(1) << 62), int64_t(1) << 62);
  EXPECT_THROW(tokenBucket((int64_t(1) << 62) + 1), std::out_of_range);
  EXPECT_THROW(tokenBucket(std::numeric_limits<int64_t>::max()), std::out_of_range);
}

TEST(TuningRecord, KeepsTheLeastTimeAndTheFastestConfig) {
  TuningFile file{sampleKey(), {}};
  file.record(1024, "b", 5);
  EXPECT_EQ(file.buckets.at(1024).best, "b");
  file.record(1024, "a", 5); // a tie goes to the smaller config text
  EXPECT_EQ(file.buckets.at(1024).best, "a");
  EXPECT_EQ(file.buckets.at(1024).us, 5);
  file.record(1024, "b", 3);
  EXPECT_EQ(file.buckets.at(1024).best, "b");
  EXPECT_EQ(file.buckets.at(1024).us, 3);
  file.record(1024, "b", 4); // slower again: the least time stays
  EXPECT_EQ(file.buckets.at(1024).timings.at("b"), 3);
  EXPECT_EQ(file.buckets.at(1024).us, 3);
  file.record(1024, "c", 3); // a tie with the best: "b" < "c" stays
  EXPECT_EQ(file.buckets.at(1024).best, "b");
  file.record(1024, "a", 2.5);
  const BucketResult &result = file.buckets.at(1024);
  EXPECT_EQ(result.best, "a");
  EXPECT_EQ(result.us, 2.5);
  EXPECT_EQ(result.version, moecVersion());
  EXPECT_EQ(result.timings, (std::map<std::string, double>{{"a", 2.5}, {"b", 3}, {"c", 3}}));
  EXPECT_EQ(file.buckets.size(), 1u);

  for (int64_t bucket : {int64_t(0), int64_t(-4), int64_t(3), int64_t(1000)})
    EXPECT_THROW(file.record(bucket, "a", 1), std::invalid_argument) << bucket;
  for (double us : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()})
    EXPECT_THROW(file.record(1024, "a", us), std::invalid_argument) << us;
  EXPECT_THROW(file.record(1024, "", 1), std::invalid_argument);
  EXPECT_EQ(file.buckets.size(), 1u);
  EXPECT_EQ(file.buckets.at(1024).timings.at("a"), 2.5);
}

TEST(TuningRecord, ForTokensPicksTheBucket) {
  TuningFile file{sampleKey(), {}};
  file.record(1, "one", 1);
  file.record(1024, "k1", 2);
  file.record(2048, "k2", 3);
  auto bestFor = [&](int64_t tokens) -> std::string {
    const BucketResult *result = file.forTokens(tokens);
    return result ? result->best : "none";
  };
  EXPECT_EQ(bestFor(-3), "one");
  EXPECT_EQ(bestFor(0), "one");
  EXPECT_EQ(bestFor(1), "one");
  EXPECT_EQ(bestFor(2), "none");
  EXPECT_EQ(bestFor(513), "k1");
  EXPECT_EQ(bestFor(1023), "k1");
  EXPECT_EQ(bestFor(1024), "k1");
  EXPECT_EQ(bestFor(1025), "k2");
  EXPECT_EQ(bestFor(2048), "k2");
  EXPECT_EQ(bestFor(2049), "none");
  EXPECT_EQ(bestFor(std::numeric_limits<int64_t>::max()), "none");
}

TEST(TuningJson, RoundTrips) {
  TuningFile file = sampleFile();
  file.record(4096, "quote\" back\\slash \xc3\xa9 \t", 7); // strings JSON must escape survive
  std::string text = toJson(file);
  TuningFile back = fromJson(text);
  EXPECT_EQ(back, file);
  EXPECT_EQ(toJson(back), text) << "the dump must be canonical";

  // A key without statics or optional tensors too.
  TuningFile bare{{"op", "cpu-x", "f32", {}, {}}, {}};
  bare.record(8, "c", 1);
  EXPECT_EQ(fromJson(toJson(bare)), bare);
  TuningFile empty{sampleKey(), {}}; // no buckets at all
  EXPECT_EQ(fromJson(toJson(empty)), empty);
}

TEST(TuningJson, HasTheDocumentedShape) {
  std::string text = toJson(sampleFile());
  EXPECT_NE(text.find("\n  \"buckets\": {\n    \"1\": {\n      \"best\": "), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
  json doc = json::parse(text);
  EXPECT_EQ(doc["format"], "moec-tuning");
  EXPECT_EQ(doc["format_version"], 1);
  EXPECT_EQ(doc["moec_version"], moecVersion());
  EXPECT_EQ(doc["key"], json::parse(R"({"op": "moe_init_routing_v2_grad", "target": "ptx-sm_90", "dtype": "bf16",
                                        "statics": {"H": 7168, "top_k": 8}, "present": ["probs"]})"));
  const json &bucket = doc["buckets"]["1024"];
  EXPECT_EQ(bucket["best"], kFast);
  EXPECT_EQ(bucket["us"], 12.25);
  EXPECT_EQ(bucket["version"], moecVersion());
  EXPECT_EQ(bucket["timings"], json({{kFast, 12.25}, {kSlow, 15.1}}));
  EXPECT_EQ(doc["buckets"].size(), 3u);
  std::string checksum = doc["checksum"];
  EXPECT_TRUE(std::regex_match(checksum, std::regex("[0-9a-f]{32}")));
  json rest = doc;
  rest.erase("checksum");
  EXPECT_EQ(checksum, contentHash(rest.dump()));
}

TEST(TuningJson, ToJsonRefusesWhatFromJsonWouldRefuse) {
  auto refused = [](const std::function<void(TuningFile &)> &edit) {
    TuningFile file = sampleFile();
    edit(file);
    try {
      toJson(file);
    } catch (const std::invalid_argument &) {
      return true;
    }
    return false;
  };
  EXPECT_FALSE(refused([](TuningFile &) {}));
  EXPECT_TRUE(refused([](TuningFile &f) { f.buckets.at(1024).timings.at(kSlow) = std::nan(""); }));
  EXPECT_TRUE(refused([](TuningFile &f) { f.buckets.at(1024).timings.at(kSlow) = -1; }));
  EXPECT_TRUE(refused([](TuningFile &f) { f.buckets[3] = f.buckets.at(1024); }));
  EXPECT_TRUE(refused([](TuningFile &f) { f.buckets.at(1024).best = kSlow; }));
  EXPECT_TRUE(refused([](TuningFile &f) { f.buckets.at(1024).best = "nothing timed"; }));
  EXPECT_TRUE(refused([](TuningFile &f) { f.buckets.at(1024).us = 1; }));
  EXPECT_TRUE(refused([](TuningFile &f) { f.buckets.at(1024).version.clear(); }));
  EXPECT_TRUE(refused([](TuningFile &f) { f.buckets[8] = BucketResult{}; }));
  EXPECT_TRUE(refused([](TuningFile &f) { f.key.op = "\xff\xfe"; })); // not UTF-8
}

TEST(TuningMerge, IsDeterministicAndKeepsTheFastest) {
  TuningFile a{sampleKey(), {}}, b{sampleKey(), {}}, c{sampleKey(), {}};
  a.record(1024, kFast, 12);
  a.record(1024, kSlow, 15);
  a.record(64, "tie-b", 2);
  b.record(1024, kFast, 13);
  b.record(1024, kSlow, 11); // faster here than kFast anywhere
  b.record(64, "tie-a", 2);
  c.record(1024, kFast, 12.5);
  c.record(2048, "only-c", 30);
  c.record(64, "tie-c", 2);

  std::vector<TuningFile> inputs = {a, b, c};
  std::string reference = toJson(merge(inputs));
  std::vector<int> order = {0, 1, 2};
  int permutations = 0;
  do {
    std::vector<TuningFile> permuted;
    for (int i : order)
      permuted.push_back(inputs[i]);
    EXPECT_EQ(toJson(merge(permuted)), reference) << order[0] << order[1] << order[2];
    ++permutations;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(permutations, 6);

  TuningFile merged = merge(inputs);
  EXPECT_EQ(merged.key, sampleKey());
  EXPECT_EQ(merged.buckets.size(), 3u);
  const BucketResult &k1 = merged.buckets.at(1024);
  EXPECT_EQ(k1.timings, (std::map<std::string, double>{{kFast, 12}, {kSlow, 11}}));
  EXPECT_EQ(k1.best, kSlow);
  EXPECT_EQ(k1.us, 11);
  EXPECT_EQ(k1.version, moecVersion());
  EXPECT_EQ(merged.buckets.at(2048).best, "only-c");
  EXPECT_EQ(merged.buckets.at(64).best, "tie-a");
  EXPECT_EQ(merged.buckets.at(64).timings.size(), 3u);
  EXPECT_EQ(merge({a}), a);
}

TEST(TuningMerge, RefusesDifferentKeysAndNothing) {
  TuningFile a = sampleFile(), other = sampleFile(sampleKey("moe_unpermute"));
  try {
    merge({a, other});
    FAIL() << "merged files of different keys";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("different keys"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("moe_unpermute"), std::string::npos) << e.what();
  }
  TuningFile statics = sampleFile();
  statics.key.statics["H"] = 1;
  EXPECT_THROW(merge({a, statics}), std::runtime_error);
  EXPECT_THROW(merge({}), std::invalid_argument);
}

TEST_F(TuningDbTest, StoreThenLoadReturnsTheSameData) {
  TuningDb tuning = db();
  EXPECT_EQ(tuning.dir(), root / "tuning");
  EXPECT_FALSE(tuning.load(sampleKey()));
  EXPECT_TRUE(tuning.list().empty());
  EXPECT_FALSE(fs::exists(root / "tuning")) << "load and list must not create the directory";

  TuningFile file = sampleFile();
  tuning.store(file);
  EXPECT_EQ(names(root / "tuning"), std::vector<std::string>{sampleKey().fileName()});
  EXPECT_EQ(readText(root / "tuning" / sampleKey().fileName()), toJson(file));
  auto loaded = tuning.load(sampleKey());
  ASSERT_TRUE(loaded);
  EXPECT_EQ(*loaded, file);
  // Another object (another process, later) sees it; a second store replaces it whole.
  file.record(1024, "vector=16,threads=1,rows=16,unroll=4", 9);
  TuningDb(root / "tuning", nullptr).store(file);
  loaded = tuning.load(sampleKey());
  ASSERT_TRUE(loaded);
  EXPECT_EQ(*loaded, file);
  EXPECT_EQ(loaded->forTokens(1000)->best, "vector=16,threads=1,rows=16,unroll=4");
  EXPECT_EQ(names(root / "tuning"), std::vector<std::string>{sampleKey().fileName()}) << "no temp file left";
  EXPECT_FALSE(tuning.load(sampleKey("moe_unpermute")));
  EXPECT_TRUE(warnings.empty());
}

TEST_F(TuningDbTest, StoreRefusesToReplaceAFileMoecDidNotWrite) {
  TuningDb tuning = db();
  fs::create_directories(tuning.dir());
  fs::path path = tuning.dir() / sampleKey().fileName();
  for (const std::string foreign :
       {"my notes\n", "", "{\"format\": \"other\"}", "{\"format_version\": 1}", "[\"moec-tuning\"]", "\x01\x02"}) {
    writeText(path, foreign);
    try {
      tuning.store(sampleFile());
      ADD_FAILURE() << "replaced " << json(foreign).dump();
    } catch (const std::runtime_error &e) {
      EXPECT_NE(std::string(e.what()).find("refusing to replace '" + path.string() + "'"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("not a moec tuning file"), std::string::npos) << e.what();
    }
    EXPECT_EQ(readText(path), foreign);
    EXPECT_THROW(TuningDb::write(path, sampleFile()), std::runtime_error);
    EXPECT_EQ(readText(path), foreign);
  }
  // Nor a directory or a symbolic link (even to a moec file), which moec never makes.
  fs::remove(path);
  fs::create_directory(path);
  EXPECT_THROW(tuning.store(sampleFile()), std::runtime_error);
  EXPECT_TRUE(fs::is_directory(path));
  fs::remove(path);
  TuningDb::write(root / "elsewhere.json", sampleFile());
  fs::create_symlink(root / "elsewhere.json", path);
  EXPECT_THROW(tuning.store(sampleFile()), std::runtime_error);
  EXPECT_TRUE(fs::is_symlink(path));
}

TEST_F(TuningDbTest, StoreReplacesADamagedOrOlderMoecFile) {
  TuningDb tuning = db();
  fs::create_directories(tuning.dir());
  fs::path path = tuning.dir() / sampleKey().fileName();
  json doc = json::parse(toJson(sampleFile()));
  json older = doc;
  older["moec_version"] = "0.0.9";
  json damaged = doc;
  damaged["buckets"] = "lost";
  for (const std::string &text : {resign(older), damaged.dump(), std::string(R"({"format": "moec-tuning"})")}) {
    writeText(path, text);
    TuningFile file = sampleFile();
    file.record(8, "fresh", 1);
    tuning.store(file);
    auto loaded = tuning.load(sampleKey());
    ASSERT_TRUE(loaded) << text;
    EXPECT_EQ(*loaded, file);
  }
  EXPECT_EQ(warnings.size(), 0u);
}

/// A damaged, foreign or hostile file in the place of sampleKey()'s, and the reason load() must give.
struct BadFile {
  using Make = std::function<std::string(const std::string &valid)>;
  std::string name;
  Make make; // the file's bytes, from a valid file's
  std::string reason;
};

void PrintTo(const BadFile &bad, std::ostream *os) { *os << bad.name; }

/// The valid file with `fn` applied and its checksum made to match: only the checks after it can object.
BadFile::Make edit(const std::function<void(json &)> &fn) {
  return [fn](const std::string &valid) {
    json doc = json::parse(valid);
    fn(doc);
    return resign(doc);
  };
}

/// The valid file with the first `from` replaced by `to`, as an editor would (checksum left as it was).
BadFile::Make replace(const std::string &from, const std::string &to) {
  return [=](const std::string &valid) {
    std::string text = valid;
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? text : text.replace(at, from.size(), to);
  };
}

BadFile::Make bytes(const std::string &bytes) {
  return [=](const std::string &) { return bytes; };
}

json &bucket1024(json &doc) { return doc["buckets"]["1024"]; }

/// Renames bucket "1024" of a valid file to `name`.
BadFile::Make renameBucket(const std::string &name) {
  return edit([=](json &d) {
    d["buckets"][name] = bucket1024(d);
    d["buckets"].erase("1024");
  });
}

std::vector<BadFile> allBadFiles() {
  std::string version = moecVersion();
  std::string checksum = json::parse(toJson(sampleFile()))["checksum"];
  std::string otherChecksum = checksum;
  otherChecksum[0] = checksum[0] == '0' ? '1' : '0';
  return {
      // Edits the checksum catches.
      {"ChecksumCorrupted", replace(checksum, otherChecksum), "checksum mismatch"},
      {"TimeEdited", replace("15.1", "11.1"), "checksum mismatch"},
      {"KeyEdited", replace("7168", "4096"), "checksum mismatch"},
      {"ChecksumMissing", replace("\"checksum\"", "\"checksun\""), "the file has no \"checksum\""},
      {"ChecksumNotAString", replace("\"" + checksum + "\"", "7"), "checksum is 7, not a string"},
      // Edits with a matching checksum that the checks of the contents catch.
      {"TimeEditedAndResigned", edit([](json &d) { bucket1024(d)["timings"][kSlow] = 1.5; }),
       "bucket 1024: best \"" + kFast + "\" (12.25 us) is not the fastest: \"" + kSlow + "\" took 1.5 us"},
      {"UsEditedAndResigned", edit([](json &d) { bucket1024(d)["us"] = 12.0; }),
       "bucket 1024: us is 12.0 but the best config took 12.25"},
      {"BestNotTimed", edit([](json &d) { bucket1024(d)["best"] = "vector=2"; }),
       "bucket 1024: best \"vector=2\" is not among its timings"},
      {"NoTimings", edit([](json &d) { bucket1024(d)["timings"] = json::object(); }), "bucket 1024 has no timings"},
      // Another writer.
      {"ForeignMoecVersion", edit([](json &d) { d["moec_version"] = "0.0.9"; }),
       "written by moec 0.0.9, this is " + version},
      {"ForeignMoecVersionNotResigned", replace("\"moec_version\": \"" + version + "\"", "\"moec_version\": \"9.9.9\""),
       "written by moec 9.9.9, this is " + version},
      {"ForeignFormatVersion", edit([](json &d) { d["format_version"] = 2; }),
       "format version 2, this moec reads version 1"},
      {"FormatVersionAsString", edit([](json &d) { d["format_version"] = "1"; }),
       "format version \"1\", this moec reads version 1"},
      {"FormatVersionAsFloat", edit([](json &d) { d["format_version"] = 1.5; }), "format version 1.5"},
      {"OtherFormat", edit([](json &d) { d["format"] = "moec-cache"; }), "not a moec tuning file"},
      {"TopLevelArray", bytes("[1, 2, 3]"), "not a moec tuning file"},
      {"TopLevelString", bytes("\"moec-tuning\""), "not a moec tuning file"},
      // Not JSON, or JSON too big or too deep to look at.
      {"GarbageBytes", bytes(std::string("\x00\xff\xfe\x7f garbage\x01\x80", 14)), "not JSON"},
      {"InvalidUtf8", replace("probs", "pr\xff\xfes"), "not JSON"},
      {"Empty", bytes(""), "empty file"},
      {"Blank", bytes(" \n\t\n"), "blank file"},
      {"Truncated", [](const std::string &v) { return v.substr(0, v.size() / 2); }, "not JSON"},
      {"HugeNumber", replace("15.1", "1e400"), "not JSON"},
      {"DeeplyNested", bytes(std::string(200000, '[')), "nested deeper than 16 levels"},
      {"DeeplyNestedInAField", replace("\"probs\"", std::string(40, '[') + std::string(40, ']')),
       "nested deeper than 16 levels"},
      {"TooLarge", [](const std::string &v) { return v + std::string((16 << 20) - v.size() + 1, ' '); },
       "too large (16777217 bytes"},
      // Wrong types and values.
      {"UsAsNaNString", edit([](json &d) { bucket1024(d)["us"] = "NaN"; }),
       "buckets.1024.us is \"NaN\", not a number of microseconds"},
      {"TimeAsInfString", edit([](json &d) { bucket1024(d)["timings"][kSlow] = "inf"; }),
       "buckets.1024.timings.\"" + kSlow + "\" is \"inf\", not a number of microseconds"},
      {"TimeAsNull", edit([](json &d) { bucket1024(d)["timings"][kSlow] = nullptr; }),
       "is null, not a number of microseconds"},
      {"NegativeTime", edit([](json &d) { bucket1024(d)["timings"][kSlow] = -3; }), "is -3, not a time > 0"},
      {"ZeroUs", edit([](json &d) { bucket1024(d)["us"] = 0; }), "buckets.1024.us is 0, not a time > 0"},
      {"HugeStatic", edit([](json &d) { d["key"]["statics"]["H"] = std::numeric_limits<uint64_t>::max(); }),
       "key.statics.H is 18446744073709551615, out of range"},
      {"StaticAsString", edit([](json &d) { d["key"]["statics"]["H"] = "7168"; }),
       "key.statics.H is \"7168\", not an integer"},
      {"StaticAsFloat", edit([](json &d) { d["key"]["statics"]["H"] = 1e30; }),
       "key.statics.H is 1e+30, not an integer"},
      {"StaticsAsArray", edit([](json &d) { d["key"]["statics"] = {1, 2}; }), "key.statics is [1,2], not an object"},
      {"OpAsNumber", edit([](json &d) { d["key"]["op"] = 5; }), "key.op is 5, not a string"},
      {"PresentAsString", edit([](json &d) { d["key"]["present"] = "probs"; }),
       "key.present is \"probs\", not an array"},
      {"PresentHoldsANumber", edit([](json &d) { d["key"]["present"] = {1}; }),
       "key.present holds 1, not a tensor name"},
      {"PresentTwice", edit([](json &d) { d["key"]["present"] = {"probs", "probs"}; }),
       "key.present lists \"probs\" twice"},
      {"KeyMissing", edit([](json &d) { d.erase("key"); }), "the file has no \"key\""},
      {"KeyAsString", edit([](json &d) { d["key"] = "op"; }), "key is \"op\", not an object"},
      {"UnexpectedField", edit([](json &d) { d["extra"] = 1; }), "the file has an unexpected field \"extra\""},
      {"UnexpectedBucketField", edit([](json &d) { bucket1024(d)["median"] = 1; }),
       "buckets.1024 has an unexpected field \"median\""},
      {"BucketsAsArray", edit([](json &d) { d["buckets"] = json::array(); }), "buckets is [], not an object"},
      {"BucketAsNumber", edit([](json &d) { bucket1024(d) = 12.25; }), "buckets.1024 is 12.25, not an object"},
      {"BucketVersionAsNumber", edit([](json &d) { bucket1024(d)["version"] = 1; }),
       "buckets.1024.version is 1, not a string"},
      // Bucket names: a power of two in plain decimal, nothing else.
      {"BucketNotAPowerOfTwo", renameBucket("1000"), "bucket 1000 is not a power of two >= 1"},
      {"BucketZero", renameBucket("0"), "bucket 0 is not a power of two >= 1"},
      {"BucketLeadingZero", renameBucket("01024"), "bucket \"01024\" is not a decimal number"},
      {"BucketNegative", renameBucket("-1024"), "bucket \"-1024\" is not a decimal number"},
      {"BucketPlus", renameBucket("+1024"), "bucket \"+1024\" is not a decimal number"},
      {"BucketSpace", renameBucket(" 1024"), "bucket \" 1024\" is not a decimal number"},
      {"BucketHex", renameBucket("0x400"), "bucket \"0x400\" is not a decimal number"},
      {"BucketFloat", renameBucket("1024.0"), "bucket \"1024.0\" is not a decimal number"},
      {"BucketEmpty", renameBucket(""), "bucket \"\" is not a decimal number"},
      {"Bucket2To63", renameBucket("9223372036854775808"), "bucket \"9223372036854775808\" is not a decimal number"},
      {"BucketOverflow", renameBucket("99999999999999999999999"),
       "bucket \"99999999999999999999999\" is not a decimal number"},
  };
}

class TuningDbBadFileTest : public TuningDbTest, public ::testing::WithParamInterface<BadFile> {};

TEST_P(TuningDbBadFileTest, IsIgnoredWithOneWarningAndLeftOnDisk) {
  const BadFile &bad = GetParam();
  TuningDb tuning = db();
  fs::create_directories(tuning.dir());
  fs::path path = tuning.dir() / sampleKey().fileName();
  std::string valid = toJson(sampleFile());
  std::string bytes = bad.make(valid);
  ASSERT_NE(bytes, valid);
  writeText(path, bytes);

  EXPECT_FALSE(tuning.load(sampleKey()));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("'" + path.string() + "'"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find(bad.reason), std::string::npos) << warnings[0];
  EXPECT_TRUE(isPrintableAscii(warnings[0])) << warnings[0];
  EXPECT_EQ(readText(path), bytes) << "the file must be left alone";

  // list() skips it the same way; read() and fromJson() throw the same reason.
  EXPECT_TRUE(tuning.list().empty());
  EXPECT_EQ(warnings.size(), 2u);
  try {
    TuningDb::read(path);
    ADD_FAILURE() << "read() accepted it";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(bad.reason), std::string::npos) << e.what();
  }
  EXPECT_THROW(fromJson(bytes), std::runtime_error);
  EXPECT_EQ(readText(path), bytes);

  // The runtime goes on: a fresh store replaces a damaged moec file, never anything else. (A file too big
  // or too deep to look at counts as anything else.)
  bool moecFile = false;
  json::parser_callback_t limitDepth = [](int depth, json::parse_event_t, json &) {
    if (depth > 16)
      throw std::runtime_error("too deep");
    return true;
  };
  try {
    moecFile = bytes.size() <= (16 << 20) && json::parse(bytes, limitDepth).value("format", "") == "moec-tuning";
  } catch (const std::exception &) {
  }
  if (moecFile) {
    tuning.store(sampleFile());
    EXPECT_EQ(tuning.load(sampleKey()), sampleFile());
  } else {
    EXPECT_THROW(tuning.store(sampleFile()), std::runtime_error);
    EXPECT_EQ(readText(path), bytes);
  }
}

INSTANTIATE_TEST_SUITE_P(Files, TuningDbBadFileTest, ::testing::ValuesIn(allBadFiles()),
                         [](const ::testing::TestParamInfo<BadFile> &info) { return info.param.name; });

TEST_F(TuningDbTest, ADirectoryOrFifoInPlaceOfTheFileIsIgnored) {
  TuningDb tuning = db();
  fs::path dir = tuning.dir() / sampleKey().fileName();
  fs::create_directories(dir);
  EXPECT_FALSE(tuning.load(sampleKey()));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("'" + dir.string() + "': not a regular file"), std::string::npos) << warnings[0];
  EXPECT_TRUE(fs::is_directory(dir));

  // A FIFO without a writer: reading it must neither block nor succeed, and store must not replace it.
  TuningKey other = sampleKey("moe_unpermute");
  fs::path fifo = tuning.dir() / other.fileName();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_FALSE(tuning.load(other));
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[1].find("'" + fifo.string() + "': not a regular file"), std::string::npos) << warnings[1];
  EXPECT_THROW(tuning.store(sampleFile(other)), std::runtime_error);
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST_F(TuningDbTest, AFileOfAnotherKeyIsIgnored) {
  TuningDb tuning = db();
  TuningKey other = sampleKey();
  other.statics["H"] = 4096;
  tuning.store(sampleFile());
  fs::path renamed = tuning.dir() / other.fileName();
  fs::rename(tuning.dir() / sampleKey().fileName(), renamed);

  EXPECT_FALSE(tuning.load(other));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("'" + renamed.string() + "'"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("another key"), std::string::npos) << warnings[0];
  EXPECT_TRUE(fs::exists(renamed));
  EXPECT_FALSE(tuning.load(sampleKey()));
  EXPECT_EQ(warnings.size(), 1u) << "a missing file is no warning";
}

TEST_F(TuningDbTest, ListSkipsInvalidFilesAndIgnoresOthers) {
  TuningDb tuning = db();
  std::vector<TuningFile> stored = {sampleFile(sampleKey("op_c")), sampleFile(sampleKey("op_a")),
                                    sampleFile(sampleKey("op_b"))};
  for (const TuningFile &file : stored)
    tuning.store(file);
  writeText(tuning.dir() / "broken.json", "{\"format\": \"moec-tuning\"");
  TuningKey renamedKey = sampleKey("op_renamed");
  writeText(tuning.dir() / renamedKey.fileName(), toJson(sampleFile(sampleKey("op_z"))));
  writeText(tuning.dir() / "README.txt", "not json");
  writeText(tuning.dir() / "notes.json.bak", "not json");
  writeText(tuning.dir() / ".json", "hidden");
  fs::create_directory(tuning.dir() / "subdir");

  std::vector<TuningFile> listed = tuning.list();
  std::sort(stored.begin(), stored.end(),
            [](const TuningFile &a, const TuningFile &b) { return a.key.fileName() < b.key.fileName(); });
  EXPECT_EQ(listed, stored);
  ASSERT_EQ(warnings.size(), 2u) << ::testing::PrintToString(warnings);
  // In file-name order: "broken.json" < "op_renamed...".
  EXPECT_NE(warnings[0].find("broken.json': not JSON"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find(renamedKey.fileName() + "': its name does not match its key"), std::string::npos)
      << warnings[1];
  EXPECT_EQ(names(tuning.dir()).size(), 9u) << "list must not remove anything";
}

TEST_F(TuningDbTest, ReadAndWriteAnyPath) {
  fs::path shard = root / "shard-0.json";
  TuningDb::write(shard, sampleFile());
  EXPECT_EQ(TuningDb::read(shard), sampleFile());
  EXPECT_EQ(readText(shard), toJson(sampleFile()));
  TuningFile more = sampleFile();
  more.record(2, "x", 1);
  TuningDb::write(shard, more); // replaces its own kind
  EXPECT_EQ(TuningDb::read(shard), more);

  for (const fs::path &bad : {root / "missing.json", root}) {
    try {
      TuningDb::read(bad);
      ADD_FAILURE() << "read " << bad;
    } catch (const std::runtime_error &e) {
      EXPECT_NE(std::string(e.what()).find("'" + bad.string() + "'"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(TuningDb::write(root / "no-such-dir" / "x.json", sampleFile()), std::runtime_error);
}

TEST_F(TuningDbTest, KernelCacheClearLeavesTheTuningFiles) {
  DiskCache cache(root);
  ASSERT_TRUE(cache.enabled()) << cache.disabledReason();
  TuningDb tuning = db();
  tuning.store(sampleFile());
  fs::path tuningFile = tuning.dir() / sampleKey().fileName();
  std::string before = readText(tuningFile);

  std::string keyText = "moec test kernel";
  cache.store(cacheKeyHash(keyText), {keyText, {{"kernel.o", "object"}}, {}});
  EXPECT_EQ(cache.list().size(), 1u);
  EXPECT_EQ(cache.stats().entries, 1u);

  DiskCache::ClearResult cleared = cache.clear();
  EXPECT_EQ(cleared.removed, 1u);
  EXPECT_EQ(cleared.leftAlone, 1u); // the tuning directory
  EXPECT_FALSE(cache.load(cacheKeyHash(keyText), keyText));
  ASSERT_TRUE(fs::exists(tuningFile));
  EXPECT_EQ(readText(tuningFile), before);
  EXPECT_EQ(tuning.load(sampleKey()), sampleFile());
  EXPECT_TRUE(warnings.empty());
}

} // namespace
} // namespace moec::tune
