//===- RuntimeTest.cpp - The C++ API: caches, keys, warm starts, launches ----===//
#include "moec/jit/Runtime.h"

#include "moec/contracts/Half.h"
#include "moec/dsl/Parser.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/DiskCache.h"
#include "moec/runtime/HostTensor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace moec;

namespace {

/// Removes the directories the tests made when the test program ends.
struct TempDirs : ::testing::Environment {
  std::vector<fs::path> dirs;
  void TearDown() override {
    std::error_code ignored;
    for (const fs::path &d : dirs)
      fs::remove_all(d, ignored);
  }
};
TempDirs *tempDirs = static_cast<TempDirs *>(::testing::AddGlobalTestEnvironment(new TempDirs));

fs::path freshDir(const std::string &tag) {
  fs::path dir = fs::temp_directory_path() / ("moec-rt-" + tag + "-" + std::to_string(::getpid()) + "-" +
                                              std::to_string(std::random_device{}()));
  fs::remove_all(dir);
  tempDirs->dirs.push_back(dir);
  return dir;
}

/// A runtime on the CPU with its own cache directory, collecting warnings.
struct TestRuntime {
  std::vector<std::string> warnings;
  Runtime rt;
  explicit TestRuntime(const fs::path &dir, bool alwaysCompile = false)
      : rt([&] {
          Runtime::Options o;
          o.target = Target::cpu();
          o.cacheDir = dir;
          o.alwaysCompile = alwaysCompile;
          o.warn = [this](const std::string &w) { warnings.push_back(w); };
          return o;
        }()) {}
};

/// B2, dropless, f32: N tokens, K experts each, H wide; returns grad_x from the kernel and from a plain
/// reference.
struct B2Case {
  int64_t N, K, H;
  HostTensor grad, idx, out;
  std::vector<float> expected;

  B2Case(int64_t n, int64_t k, int64_t h)
      : N(n), K(k), H(h), grad(DType::F32, {n * k, h}), idx(DType::I32, {n * k}), out(DType::F32, {n, h}),
        expected(n * h, 0.0f) {
    std::mt19937 rng(n * 131 + k * 7 + h);
    std::uniform_real_distribution<float> dist(-1, 1);
    auto *g = static_cast<float *>(grad.raw());
    for (int64_t i = 0; i < grad.elements(); ++i)
      g[i] = dist(rng);
    std::vector<int32_t> perm(n * k);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::memcpy(idx.raw(), perm.data(), perm.size() * 4);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t c = 0; c < h; ++c)
          expected[t * h + c] += g[perm[t * k + j] * h + c];
  }

  void run(const Kernel &kernel) { kernel.launch({grad.view(), idx.view()}, {out.view()}); }
  bool matches() const { return std::memcmp(out.raw(), expected.data(), expected.size() * 4) == 0; }
};

KernelRequest b2Request(int64_t H, int64_t K) { return {DType::F32, {{"H", H}}, {{"top_k", K}}, {}, {}}; }

} // namespace

TEST(Runtime, HitAfterMissAndCorrectResults) {
  TestRuntime t(freshDir("hit"));
  Kernel first = t.rt.get("moe_init_routing_v2_grad", b2Request(7, 3));
  EXPECT_EQ(t.rt.stats().compiles, 1u);
  Kernel second = t.rt.get("moe_init_routing_v2_grad", b2Request(7, 3));
  EXPECT_EQ(t.rt.stats().compiles, 1u);
  EXPECT_EQ(t.rt.stats().memoryHits, 1u);
  EXPECT_EQ(&first.specialization(), &second.specialization());
  for (int64_t n : {1, 5, 40}) { // a new token count reuses the kernel
    B2Case c(n, 3, 7);
    c.run(second);
    EXPECT_TRUE(c.matches()) << "N=" << n;
  }
  EXPECT_EQ(t.rt.stats().compiles, 1u);
  EXPECT_TRUE(t.warnings.empty());
}

TEST(Runtime, KeyChangesWithWhatChangesTheCode) {
  TestRuntime t(freshDir("key"));
  const BuiltinOp &b = *findBuiltinOp("moe_init_routing_v2_grad");
  auto op = dsl::loadOpText(b.path, b.source);
  Specialization base{DType::BF16, {{"H", 7168}, {"top_k", 8}}, Target::cpu(), {}, {}};
  std::string key = t.rt.cacheKey(*op, b.source, resolve(*op, base));
  EXPECT_EQ(key, t.rt.cacheKey(*op, b.source, resolve(*op, base)));

  auto differs = [&](Specialization s, std::string source, const char *what) {
    EXPECT_NE(key, t.rt.cacheKey(*op, source, resolve(*op, s))) << what;
  };
  Specialization s = base;
  s.dtype = DType::F16;
  differs(s, b.source, "dtype");
  s = base;
  s.statics["H"] = 4096;
  differs(s, b.source, "static dim");
  s = base;
  s.statics["drop_pad_mode"] = 1;
  differs(s, b.source, "static attribute");
  s = base;
  s.statics["top_k"] = 4;
  differs(s, b.source, "static attribute top_k");
  s = base;
  s.target = Target::ptx("sm_90");
  differs(s, b.source, "target");
  Specialization sm80 = s;
  sm80.target = Target::ptx("sm_80");
  EXPECT_NE(t.rt.cacheKey(*op, b.source, resolve(*op, s)), t.rt.cacheKey(*op, b.source, resolve(*op, sm80))) << "arch";
  s = base;
  s.schedule.vector = 4;
  differs(s, b.source, "schedule");
  differs(base, std::string(b.source) + "\n# edited\n", "DSL source");
  // A3: each static dim and attribute, and the set of optional tensors given.
  const BuiltinOp &a3 = *findBuiltinOp("moe_token_unpermute_with_routing_map_grad");
  auto a3op = dsl::loadOpText(a3.path, a3.source);
  Specialization a3base{DType::F32, {{"E", 8}, {"H", 64}}, Target::cpu(), {}, {}};
  std::set<std::string> keys{t.rt.cacheKey(*a3op, a3.source, resolve(*a3op, a3base))};
  for (auto [name, value] : {std::pair<const char *, int64_t>{"E", 16}, {"H", 32}, {"drop_and_pad", 1}}) {
    Specialization v = a3base;
    v.statics[name] = value;
    EXPECT_TRUE(keys.insert(t.rt.cacheKey(*a3op, a3.source, resolve(*a3op, v))).second) << name;
  }
  for (std::set<std::string> present : std::vector<std::set<std::string>>{
           {"routing_map"}, {"routing_map", "permuted_tokens"}, {"routing_map", "permuted_tokens", "probs"}}) {
    Specialization v = a3base;
    v.present = present;
    EXPECT_TRUE(keys.insert(t.rt.cacheKey(*a3op, a3.source, resolve(*a3op, v))).second) << present.size() << " present";
  }
  // A default written out is the same specialization.
  s = base;
  s.statics["drop_pad_mode"] = 0;
  EXPECT_EQ(key, t.rt.cacheKey(*op, b.source, resolve(*op, s)));
}

/// The build ID the build generated (ctest build_id checks it is the hash of the sources now).
std::string generatedBuildId() {
  std::ifstream in(MOEC_BINARY_DIR "/include/moec/BuildId.h");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = text.find("#define MOEC_BUILD_ID \"");
  if (at == std::string::npos)
    return "";
  at += std::strlen("#define MOEC_BUILD_ID \"");
  return text.substr(at, text.find('"', at) - at);
}

TEST(Runtime, KeyNamesTheCompilerBuiltFromTheseSources) {
  TestRuntime t(freshDir("buildid"));
  const BuiltinOp &b = *findBuiltinOp("moe_init_routing_v2_grad");
  auto op = dsl::loadOpText(b.path, b.source);
  std::string id = generatedBuildId();
  ASSERT_GE(id.size(), 24u) << "no build ID in " MOEC_BINARY_DIR "/include/moec/BuildId.h";
  Specialization s{DType::F32, {{"H", 64}, {"top_k", 2}}, Target::cpu(), {}, {}};
  EXPECT_NE(t.rt.cacheKey(*op, b.source, resolve(*op, s)).find("\ncompiler " + id + "\n"), std::string::npos);
}

TEST(Runtime, RuntimeAttributesAndDimsAreNotInTheKey) {
  TestRuntime t(freshDir("rtattr"));
  KernelRequest a = b2Request(7, 3), b = b2Request(7, 3);
  a.attrs["active_num"] = 0;
  b.attrs["active_num"] = 5;
  t.rt.get("moe_init_routing_v2_grad", a);
  t.rt.get("moe_init_routing_v2_grad", b);
  EXPECT_EQ(t.rt.stats().compiles, 1u);
}

// A repeat call with the same shapes and attributes reuses the checked signature, which covers shapes, not
// values: the index data must still be checked on every launch.
TEST(Runtime, RepeatLaunchWithTheSameShapesStillChecksIndexValues) {
  TestRuntime t(freshDir("recheck"));
  // Active mode (active_num = 3): the kernel skips rows r >= 3, so an index of N*K = 4 never reaches
  // memory and only the host's range check [0, N*K) can reject it.
  KernelRequest request = b2Request(4, 2);
  request.attrs["active_num"] = 3;
  Kernel k = t.rt.get("moe_init_routing_v2_grad", request);
  HostTensor grad(DType::F32, {3, 4}), idx(DType::I32, {4}), out(DType::F32, {2, 4});
  for (int i = 0; i < 12; ++i)
    static_cast<float *>(grad.raw())[i] = float(i);
  auto launchWith = [&](std::vector<int32_t> rows) {
    std::memcpy(idx.raw(), rows.data(), 16);
    std::fill_n(static_cast<float *>(out.raw()), 8, -7.0f);
    k.launch({grad.view(), idx.view()}, {out.view()});
  };
  auto expectGood = [&] {
    // Token 0: rows 2 and 0; token 1: row 1 (row 3 is past active_num).
    const float *o = static_cast<const float *>(out.raw());
    for (int h = 0; h < 4; ++h) {
      EXPECT_EQ(o[h], float(8 + h) + float(h)) << h;
      EXPECT_EQ(o[4 + h], float(4 + h)) << h;
    }
  };
  launchWith({2, 0, 3, 1});
  expectGood();
  for (int repeat = 0; repeat < 2; ++repeat) {
    try {
      launchWith({2, 0, 4, 1});
      ADD_FAILURE() << "an index outside [0, N*K) was accepted on launch " << repeat + 2;
    } catch (const std::exception &e) {
      EXPECT_NE(std::string(e.what()).find("element 2 is 4, outside the valid range [0, 4)"), std::string::npos)
          << e.what();
    }
  }
  launchWith({2, 0, 3, 1}); // and a good call after the bad ones still runs
  expectGood();
}

/// A3 non-pad, f32, Tk = 3 tokens, K = 2 of E = 4 experts each, H = 5; small integers, so exact.
struct A3Case {
  static constexpr int64_t Tk = 3, E = 4, H = 5, K = 2, R = Tk * K;
  HostTensor grad{DType::F32, {Tk, H}}, outIndex{DType::I32, {R}}, tokenId{DType::I32, {R}},
      map{DType::Bool, {Tk, E}}, permuted{DType::F32, {R, H}}, probs{DType::F32, {Tk, E}};
  const std::vector<std::vector<int>> experts{{1, 3}, {0, 1}, {2, 3}};
  const std::vector<int32_t> rows{4, 0, 2, 5, 1, 3}; // out_index: slot t*K + k -> permuted row

  A3Case() {
    auto *g = static_cast<float *>(grad.raw()), *p = static_cast<float *>(permuted.raw()),
         *pr = static_cast<float *>(probs.raw());
    for (int i = 0; i < Tk * H; ++i)
      g[i] = float(i % 7 - 3);
    for (int i = 0; i < R * H; ++i)
      p[i] = float(i % 5 - 2);
    for (int i = 0; i < Tk * E; ++i)
      pr[i] = float(i + 1);
    std::memcpy(outIndex.raw(), rows.data(), R * 4);
    auto *m = static_cast<bool *>(map.raw());
    std::fill_n(m, Tk * E, false);
    for (int t = 0; t < Tk; ++t)
      for (int k = 0; k < K; ++k) {
        m[t * E + experts[t][k]] = true;
        static_cast<int32_t *>(tokenId.raw())[rows[t * K + k]] = t;
      }
  }
  /// probs_grad[t, e] = <permuted_tokens[row], grad[t]> for the row token t sent to expert e, else 0.
  std::vector<float> expectedProbsGrad() const {
    std::vector<float> out(Tk * E, 0.0f);
    auto *g = static_cast<const float *>(grad.raw()), *p = static_cast<const float *>(permuted.raw());
    for (int t = 0; t < Tk; ++t)
      for (int k = 0; k < K; ++k)
        for (int j = 0; j < H; ++j)
          out[t * E + experts[t][k]] += p[rows[t * K + k] * H + j] * g[t * H + j];
    return out;
  }
};

// The optional-tensor set is part of both keys (memory and disk): a kernel compiled without probs must not
// serve a call with probs (it left probs_grad all zero).
TEST(Runtime, KernelWithoutOptionalTensorsDoesNotServeACallWithThem) {
  fs::path dir = freshDir("present");
  A3Case c;
  const KernelRequest plain{DType::F32, {{"E", A3Case::E}, {"H", A3Case::H}}, {}, {}, {}};
  KernelRequest withProbs = plain;
  withProbs.with = {"routing_map", "permuted_tokens", "probs"};
  for (int pass = 0; pass < 2; ++pass) { // pass 1: a new runtime, the same disk cache
    TestRuntime t(dir);
    HostTensor ptGrad(DType::F32, {A3Case::R, A3Case::H});
    t.rt.get("moe_token_unpermute_with_routing_map_grad", plain)
        .launch({{"unpermuted_tokens_grad", c.grad.view()}, {"out_index", c.outIndex.view()},
                 {"permute_token_id", c.tokenId.view()}, {"permuted_tokens_grad", ptGrad.view()}});
    HostTensor probsGrad(DType::F32, {A3Case::Tk, A3Case::E});
    std::fill_n(static_cast<float *>(probsGrad.raw()), A3Case::Tk * A3Case::E, -99.0f);
    t.rt.get("moe_token_unpermute_with_routing_map_grad", withProbs)
        .launch({{"unpermuted_tokens_grad", c.grad.view()}, {"out_index", c.outIndex.view()},
                 {"permute_token_id", c.tokenId.view()}, {"routing_map", c.map.view()},
                 {"permuted_tokens", c.permuted.view()}, {"probs", c.probs.view()},
                 {"permuted_tokens_grad", ptGrad.view()}, {"probs_grad", probsGrad.view()}});
    std::vector<float> expected = c.expectedProbsGrad();
    const float *got = static_cast<const float *>(probsGrad.raw());
    for (int i = 0; i < A3Case::Tk * A3Case::E; ++i)
      EXPECT_EQ(got[i], expected[i]) << "pass " << pass << " probs_grad[" << i / A3Case::E << ", "
                                     << i % A3Case::E << "]";
    // permuted_tokens_grad[row] = grad[t] * probs[t, e]: the probs were used, too.
    const float *pg = static_cast<const float *>(ptGrad.raw()), *g = static_cast<const float *>(c.grad.raw()),
                *pr = static_cast<const float *>(c.probs.raw());
    for (int t = 0; t < A3Case::Tk; ++t)
      for (int k = 0; k < A3Case::K; ++k)
        for (int h = 0; h < A3Case::H; ++h)
          EXPECT_EQ(pg[c.rows[t * A3Case::K + k] * A3Case::H + h],
                    g[t * A3Case::H + h] * pr[t * A3Case::E + c.experts[t][k]]);
    EXPECT_EQ(t.rt.stats().compiles, pass == 0 ? 2u : 0u);
  }
}

TEST(Runtime, WarmStartLoadsFromDiskWithoutCompiling) {
  fs::path dir = freshDir("warm");
  {
    TestRuntime cold(dir);
    cold.rt.get("moe_init_routing_v2_grad", b2Request(9, 2));
    EXPECT_EQ(cold.rt.stats().compiles, 1u);
  }
  TestRuntime warm(dir);
  Kernel k = warm.rt.get("moe_init_routing_v2_grad", b2Request(9, 2));
  EXPECT_EQ(warm.rt.stats().compiles, 0u);
  EXPECT_EQ(warm.rt.stats().diskHits, 1u);
  B2Case c(11, 2, 9);
  c.run(k);
  EXPECT_TRUE(c.matches());
  // Every stage is kept in the entry, but the host assembly (a second run of the code generator: only a
  // dump dir gets it).
  size_t entries = 0;
  for (const auto &e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(".", 0) == 0)
      continue;
    ++entries;
    for (const char *f : {"op.moe", "moe.mlir", "loops.mlir", "kernel.ll", "kernel.o", "meta.json"})
      EXPECT_TRUE(fs::exists(e.path() / f)) << f;
    EXPECT_FALSE(fs::exists(e.path() / "kernel.s"));
  }
  EXPECT_EQ(entries, 1u);
}

TEST(Runtime, CorruptEntryIsReportedOnceAndRebuilt) {
  fs::path dir = freshDir("corrupt");
  { TestRuntime(dir).rt.get("moe_init_routing_v2_grad", b2Request(5, 2)); }
  for (const auto &e : fs::directory_iterator(dir)) {
    fs::path object = e.path() / "kernel.o";
    if (!fs::exists(object))
      continue;
    std::fstream f(object, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  TestRuntime t(dir);
  Kernel k = t.rt.get("moe_init_routing_v2_grad", b2Request(5, 2));
  EXPECT_EQ(t.rt.stats().compiles, 1u);
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("corrupt"), std::string::npos) << t.warnings[0];
  B2Case c(3, 2, 5);
  c.run(k);
  EXPECT_TRUE(c.matches());
  TestRuntime again(dir); // the rebuilt entry is good
  again.rt.get("moe_init_routing_v2_grad", b2Request(5, 2));
  EXPECT_EQ(again.rt.stats().diskHits, 1u);
  EXPECT_TRUE(again.warnings.empty());
}

namespace {

std::string readText(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The one entry directory in the cache `dir`.
fs::path onlyEntry(const fs::path &dir) {
  std::vector<fs::path> entries;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.path().filename().string()[0] != '.')
      entries.push_back(e.path());
  EXPECT_EQ(entries.size(), 1u);
  return entries.empty() ? dir : entries[0];
}

/// Applies `edit` to the entry's meta.json and files, then seals it again as DiskCache would (sizes,
/// hashes, checksum): an entry DiskCache accepts but the runtime cannot use, as a buggy or different
/// moec could leave one.
void forgeEntry(const fs::path &entry, const std::function<void(nlohmann::json &meta, const fs::path &)> &edit) {
  nlohmann::json meta = nlohmann::json::parse(readText(entry / "meta.json"));
  edit(meta, entry);
  for (auto &[name, record] : meta["files"].items()) {
    std::string bytes = readText(entry / name);
    record = {{"size", bytes.size()}, {"hash", contentHash(bytes)}};
  }
  meta.erase("checksum");
  meta["checksum"] = contentHash(meta.dump());
  std::ofstream(entry / "meta.json", std::ios::trunc) << meta.dump(2);
}

struct BadEntry {
  const char *name;
  std::function<void(const fs::path &entry)> apply;
};

const BadEntry kBadEntries[] = {
    // Not sealed again: DiskCache's checksum catches every edit of meta.json.
    {"kernel record duplicated",
     [](const fs::path &e) {
       auto meta = nlohmann::json::parse(readText(e / "meta.json"));
       meta["user"]["kernels"].push_back(meta["user"]["kernels"][0]);
       std::ofstream(e / "meta.json", std::ios::trunc) << meta.dump(2);
     }},
    {"kernel records dropped",
     [](const fs::path &e) {
       auto meta = nlohmann::json::parse(readText(e / "meta.json"));
       meta["user"]["kernels"] = nlohmann::json::array();
       std::ofstream(e / "meta.json", std::ios::trunc) << meta.dump(2);
     }},
    {"a FIFO as kernel.o",
     [](const fs::path &e) {
       fs::remove(e / "kernel.o");
       ASSERT_EQ(::mkfifo((e / "kernel.o").c_str(), 0644), 0);
     }},
    // Sealed again: what only the runtime can find wrong.
    {"kernel.o that does not load",
     [](const fs::path &e) {
       forgeEntry(e, [](nlohmann::json &, const fs::path &dir) {
         std::ofstream(dir / "kernel.o", std::ios::trunc) << "not an object file";
       });
     }},
    {"a kernel missing from kernel.o",
     [](const fs::path &e) {
       forgeEntry(e, [](nlohmann::json &m, const fs::path &) { m["user"]["kernels"][0]["name"] = "nosuch"; });
     }},
    {"a JSON type error in a kernel record",
     [](const fs::path &e) {
       forgeEntry(e, [](nlohmann::json &m, const fs::path &) { m["user"]["kernels"][0]["threads"] = "many"; });
     }},
    {"a schedule out of range",
     [](const fs::path &e) {
       forgeEntry(e, [](nlohmann::json &m, const fs::path &) { m["user"]["kernels"][0]["threads"] = 1 << 20; });
     }},
    {"no kernels list",
     [](const fs::path &e) { forgeEntry(e, [](nlohmann::json &m, const fs::path &) { m["user"].erase("kernels"); }); }},
    {"no workspace list",
     [](const fs::path &e) { forgeEntry(e, [](nlohmann::json &m, const fs::path &) { m["user"].erase("workspace"); }); }},
    {"a workspace that is not a list of names",
     [](const fs::path &e) {
       forgeEntry(e, [](nlohmann::json &m, const fs::path &) { m["user"]["workspace"] = {1, 2}; });
     }},
    {"a workspace naming an input",
     [](const fs::path &e) {
       forgeEntry(e, [](nlohmann::json &m, const fs::path &) { m["user"]["workspace"] = {"grad_expanded_x"}; });
     }},
    {"no kernel.o",
     [](const fs::path &e) {
       forgeEntry(e, [](nlohmann::json &m, const fs::path &dir) {
         m["files"].erase("kernel.o");
         fs::remove(dir / "kernel.o");
       });
     }},
};

} // namespace

TEST(Runtime, EveryUnusableEntryIsReportedRemovedAndRebuilt) {
  for (const BadEntry &bad : kBadEntries) {
    SCOPED_TRACE(bad.name);
    fs::path dir = freshDir("bad");
    { TestRuntime(dir).rt.get("moe_init_routing_v2_grad", b2Request(6, 2)); }
    bad.apply(onlyEntry(dir));

    TestRuntime t(dir);
    Kernel k;
    ASSERT_NO_THROW(k = t.rt.get("moe_init_routing_v2_grad", b2Request(6, 2)));
    EXPECT_EQ(t.rt.stats().compiles, 1u);
    EXPECT_EQ(t.rt.stats().diskHits, 0u);
    ASSERT_EQ(t.warnings.size(), 1u);
    EXPECT_NE(t.warnings[0].find("is corrupt ("), std::string::npos) << t.warnings[0];
    B2Case c(4, 2, 6);
    c.run(k);
    EXPECT_TRUE(c.matches());

    TestRuntime again(dir); // the entry was replaced by a good one
    Kernel k2 = again.rt.get("moe_init_routing_v2_grad", b2Request(6, 2));
    EXPECT_EQ(again.rt.stats().diskHits, 1u);
    EXPECT_EQ(again.rt.stats().compiles, 0u);
    EXPECT_TRUE(again.warnings.empty());
    B2Case c2(5, 2, 6);
    c2.run(k2);
    EXPECT_TRUE(c2.matches());
  }
}

namespace {

int failingModuleLoads = 0; // the fake driver fails this many module loads, then succeeds

/// A driver with one device whose module loads fail while failingModuleLoads > 0.
CudaDriverTable flakyModuleDriver() {
  CudaDriverTable t;
  t.init = [](unsigned) { return CUDA_SUCCESS; };
  t.deviceGet = [](CUdevice *d, int) { *d = 0; return CUDA_SUCCESS; };
  t.deviceGetCount = [](int *n) { *n = 1; return CUDA_SUCCESS; };
  t.deviceGetAttribute = [](int *v, CUdevice_attribute a, CUdevice) {
    *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9 : 0;
    return CUDA_SUCCESS;
  };
  t.deviceGetName = [](char *name, int, CUdevice) { std::strcpy(name, "fake H200"); return CUDA_SUCCESS; };
  t.devicePrimaryCtxRetain = [](CUcontext *c, CUdevice) {
    *c = reinterpret_cast<CUcontext>(0x10);
    return CUDA_SUCCESS;
  };
  t.devicePrimaryCtxRelease = [](CUdevice) { return CUDA_SUCCESS; };
  t.ctxSetCurrent = [](CUcontext) { return CUDA_SUCCESS; };
  t.ctxGetCurrent = [](CUcontext *c) { *c = nullptr; return CUDA_SUCCESS; };
  t.moduleLoadDataEx = [](CUmodule *m, const void *, unsigned, CUjit_option *, void **) {
    if (failingModuleLoads > 0) {
      --failingModuleLoads;
      return CUDA_ERROR_INVALID_PTX;
    }
    *m = reinterpret_cast<CUmodule>(0x20);
    return CUDA_SUCCESS;
  };
  t.moduleUnload = [](CUmodule) { return CUDA_SUCCESS; };
  t.moduleGetFunction = [](CUfunction *f, CUmodule, const char *) {
    *f = reinterpret_cast<CUfunction>(0x30);
    return CUDA_SUCCESS;
  };
  t.getErrorName = [](CUresult, const char **s) { *s = "CUDA_ERROR_INVALID_PTX"; return CUDA_SUCCESS; };
  t.getErrorString = [](CUresult, const char **s) { *s = "invalid PTX"; return CUDA_SUCCESS; };
  return t;
}

} // namespace

TEST(Runtime, PtxThatDoesNotLoadFromTheCacheIsRebuilt) {
  fs::path dir = freshDir("ptx");
  auto driver = CudaDriver::fromTable(flakyModuleDriver());
  auto makeRuntime = [&](std::vector<std::string> &warnings) {
    Runtime::Options o;
    o.target = Target::ptx("sm_90");
    o.driver = driver.get();
    o.cacheDir = dir;
    o.warn = [&warnings](const std::string &w) { warnings.push_back(w); };
    return std::make_unique<Runtime>(std::move(o));
  };
  std::vector<std::string> coldWarnings, warnings;
  makeRuntime(coldWarnings)->get("moe_init_routing_v2_grad", b2Request(64, 2));
  ASSERT_TRUE(coldWarnings.empty());

  failingModuleLoads = 1; // the cached PTX will not load (a driver that rejects it, a damaged module)
  auto rt = makeRuntime(warnings);
  Kernel k;
  ASSERT_NO_THROW(k = rt->get("moe_init_routing_v2_grad", b2Request(64, 2)));
  EXPECT_TRUE(k.specialization().onGpu());
  EXPECT_EQ(rt->stats().compiles, 1u);
  EXPECT_EQ(rt->stats().diskHits, 0u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("is corrupt ("), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("CUDA_ERROR_INVALID_PTX"), std::string::npos) << warnings[0];
  failingModuleLoads = 0;
}

TEST(Runtime, UnwritableCacheDirFallsBackToMemory) {
  fs::path base = freshDir("ro");
  fs::create_directories(base);
  std::ofstream(base / "file") << "x"; // a path under a regular file cannot be created, even by root
  TestRuntime t(base / "file" / "cache");
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("in memory only"), std::string::npos) << t.warnings[0];
  Kernel k = t.rt.get("moe_init_routing_v2_grad", b2Request(3, 1));
  t.rt.get("moe_init_routing_v2_grad", b2Request(3, 1));
  EXPECT_EQ(t.rt.stats().compiles, 1u);
  B2Case c(4, 1, 3);
  c.run(k);
  EXPECT_TRUE(c.matches());
}

TEST(Runtime, AlwaysCompileBypassesTheDiskCache) {
  fs::path dir = freshDir("always");
  { TestRuntime(dir).rt.get("moe_init_routing_v2_grad", b2Request(4, 2)); }
  TestRuntime t(dir, /*alwaysCompile=*/true);
  t.rt.get("moe_init_routing_v2_grad", b2Request(4, 2));
  EXPECT_EQ(t.rt.stats().compiles, 1u);
  EXPECT_EQ(t.rt.stats().diskHits, 0u);
}

TEST(Runtime, ConcurrentFirstRequestsCompileOnce) {
  TestRuntime t(freshDir("threads"));
  std::vector<std::thread> threads;
  std::vector<Kernel> kernels(8);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] { kernels[i] = t.rt.get("moe_init_routing_v2_grad", b2Request(6, 4)); });
  for (std::thread &th : threads)
    th.join();
  EXPECT_EQ(t.rt.stats().compiles, 1u);
  EXPECT_EQ(t.rt.stats().memoryHits, 7u);
  for (const Kernel &k : kernels)
    EXPECT_EQ(&k.specialization(), &kernels[0].specialization());
}

/// Child of MultipleProcessesShareOneEntry: 4 threads get and run the same new kernel; at most one
/// compile in this process, and every run right.
TEST(RuntimeHammer, Child) {
  const char *dir = std::getenv("MOEC_HAMMER_DIR");
  if (!dir)
    GTEST_SKIP() << "runs as a child of Runtime.MultipleProcessesShareOneEntry";
  TestRuntime t(dir);
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      B2Case c(13, 3, 33);
      c.run(t.rt.get("moe_init_routing_v2_grad", b2Request(33, 3)));
      good += c.matches();
    });
  for (std::thread &th : threads)
    th.join();
  EXPECT_EQ(good.load(), 4);
  EXPECT_LE(t.rt.stats().compiles, 1u);
  EXPECT_TRUE(t.warnings.empty());
}

TEST(Runtime, MultipleProcessesShareOneEntry) {
  fs::path dir = freshDir("procs");
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) { // a fresh image: no threads or locks inherited from this test process
      ::setenv("MOEC_HAMMER_DIR", dir.c_str(), 1);
      ::execl("/proc/self/exe", "moec_jit_tests", "--gtest_filter=RuntimeHammer.Child", "--gtest_brief=1",
              static_cast<char *>(nullptr));
      ::_exit(127);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid << " status " << status;
  }
  size_t entries = 0;
  for (const auto &e : fs::directory_iterator(dir))
    entries += e.path().filename().string().rfind(".", 0) != 0;
  EXPECT_EQ(entries, 1u);
}

TEST(Runtime, LaunchErrorsNameTheProblem) {
  TestRuntime t(freshDir("errors"));
  Kernel k = t.rt.get("moe_init_routing_v2_grad", b2Request(8, 2));
  B2Case wide(3, 2, 16); // H = 16, the kernel was compiled for 8
  try {
    wide.run(k);
    FAIL() << "expected an ArgumentError";
  } catch (const ArgumentError &e) {
    EXPECT_NE(std::string(e.what()).find("compiled for H = 8"), std::string::npos) << e.what();
  }
  B2Case ok(3, 2, 8);
  TensorView onDevice = ok.out.view();
  onDevice.device = Device::Cuda;
  try {
    k.launch({ok.grad.view(), ok.idx.view()}, {onDevice});
    FAIL() << "expected an ArgumentError";
  } catch (const ArgumentError &e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'grad_x' is in CUDA memory but the kernel runs on the CPU"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(k.launch({ok.grad.view()}, {ok.out.view()}), ArgumentError);
}

TEST(Runtime, NoGpuIsReportedPlainly) {
  if (CudaDriver::instance().available())
    GTEST_SKIP() << "a CUDA driver is present on this machine";
  Runtime::Options o;
  o.cacheDir = freshDir("nogpu");
  o.target = Target::ptx("sm_90");
  try {
    Runtime rt(o);
    FAIL() << "expected a CompileError";
  } catch (const CompileError &e) {
    EXPECT_NE(std::string(e.what()).find("needs a GPU: no CUDA driver"), std::string::npos) << e.what();
  }
  Runtime::Options cpu;
  cpu.cacheDir = freshDir("nogpu-default");
  EXPECT_EQ(Runtime(cpu).target().kind, TargetKind::CPU); // the default falls back to the CPU
}

TEST(Runtime, DumpDirGetsEveryStageOfEveryCompile) {
  fs::path dump = freshDir("dump");
  Runtime::Options o;
  o.target = Target::cpu();
  o.cacheDir = freshDir("dump-cache");
  o.dumpDir = dump;
  Runtime rt(o);
  rt.get("moe_init_routing_v2_grad", b2Request(7, 3));
  std::set<std::string> stages;
  for (const auto &e : fs::directory_iterator(dump)) {
    std::string name = e.path().filename().string();
    stages.insert(name.substr(name.find('.') + 1));
    EXPECT_EQ(name.rfind("moe_init_routing_v2_grad-", 0), 0u) << name;
  }
  EXPECT_EQ(stages, (std::set<std::string>{"op.moe", "moe.mlir", "loops.mlir", "kernel.ll", "kernel.s"}));
}
