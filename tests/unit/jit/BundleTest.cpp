//===- BundleTest.cpp - AOT bundles: written, loaded, launched on a fake driver ===//
#include "TempDir.h"
#include "moec/compiler/Pipeline.h"
#include "moec/jit/Runtime.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/Bundle.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/HostTensor.h"

#include "FakeCudaDriver.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace moec;

namespace {

/// What the fake driver saw of each launch.
struct Launch {
  unsigned grid[3], block[3];
  size_t params;
  void *stream;
  std::vector<uint64_t> values; // the parameters (all 8 bytes in the ABI), when paramCount is set
};
std::vector<Launch> launches;
struct Memset {
  CUdeviceptr to;
  unsigned char value;
  size_t bytes;
  CUstream stream;
};
std::vector<Memset> memsets;
std::string loadedPtx;
size_t paramCount = 0; // set by the test: how many parameters the kernel takes


/// The shared fake driver, recording loaded PTX and launches.
CudaDriverTable fakeDriver() {
  CudaDriverTable t = moec::fake::fakeCudaDriverTable();
  t.moduleLoadDataEx = [](CUmodule *m, const void *image, unsigned, CUjit_option *, void **) {
    loadedPtx = static_cast<const char *>(image);
    *m = reinterpret_cast<CUmodule>(0x20);
    return CUDA_SUCCESS;
  };
  t.launchKernel = [](CUfunction, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned, CUstream s, void **params, void **) {
    std::vector<uint64_t> values;
    for (size_t i = 0; i < paramCount; ++i)
      values.push_back(*static_cast<uint64_t *>(params[i]));
    launches.push_back({{gx, gy, gz}, {bx, by, bz}, paramCount, s, values});
    return CUDA_SUCCESS;
  };
  t.memsetD8Async = [](CUdeviceptr to, unsigned char value, size_t bytes, CUstream s) {
    memsets.push_back({to, value, bytes, s});
    return CUDA_SUCCESS;
  };
  return t;
}

/// Compiles `op` for sm_90 and returns it as a bundle entry with its PTX.
std::pair<Bundle::Entry, std::string> compileEntry(const std::string &name, DType dtype,
                                                    std::map<std::string, int64_t> statics,
                                                    std::set<std::string> with = {}) {
  auto op = loadOp(name);
  ResolvedSpecialization spec = resolve(*op, {dtype, statics, Target::ptx("sm_90"), {}, with});
  CompiledOp compiled = compile(*op, spec);
  Bundle::Entry e{name, dtype, spec.statics, spec.present, "ptx-sm_90", name + ".ptx", {}};
  e.kernels = kernelMetas(compiled);
  e.workspace = compiled.workspace;
  return {e, compiled.ptx};
}

/// A device tensor view at a fake, 256-byte aligned address.
TensorView device(DType dtype, std::vector<int64_t> shape, uintptr_t address) {
  return {reinterpret_cast<void *>(address), dtype, std::move(shape), {}, Device::Cuda};
}

fs::path bundleDir() { return moec::tests::freshTempDir("bundle"); }

/// A bundle of B2 (bf16 or f16, `b2Statics`) and A3 with probs (`a3Dtype`, `a3Statics`), written and opened
/// on the fake driver; removed with the object.
struct TwoOpBundle {
  std::pair<Bundle::Entry, std::string> b2, a3;
  fs::path dir = bundleDir();
  std::unique_ptr<CudaDriver> driver = CudaDriver::fromTable(fakeDriver());
  std::unique_ptr<Bundle> bundle;

  TwoOpBundle(DType b2Dtype, std::map<std::string, int64_t> b2Statics, DType a3Dtype,
              std::map<std::string, int64_t> a3Statics)
      : b2(compileEntry("moe_init_routing_v2_grad", b2Dtype, std::move(b2Statics))),
        a3(compileEntry("moe_token_unpermute_with_routing_map_grad", a3Dtype, std::move(a3Statics),
                        {"routing_map", "permuted_tokens", "probs"})) {
    Bundle::write(dir, {b2.first, a3.first}, {b2.second, a3.second},
                  {{b2.first.op, findBuiltinOp(b2.first.op)->source}, {a3.first.op, findBuiltinOp(a3.first.op)->source}},
                  "test");
    bundle = Bundle::open(dir, *driver);
  }
  ~TwoOpBundle() { fs::remove_all(dir); }
};

} // namespace

TEST(Bundle, WrittenLoadedAndLaunchedWithoutTheCompiler) {
  TwoOpBundle two(DType::BF16, {{"H", 7168}, {"top_k", 8}}, DType::BF16, {{"H", 4096}, {"E", 64}});
  const std::unique_ptr<Bundle> &bundle = two.bundle;
  const std::string &b2Ptx = two.b2.second;
  ASSERT_EQ(bundle->entries().size(), 2u);

  // B2 at N = 4096 tokens: a row per block of 256 threads (8 bf16 lanes each: 2048 elements a pass).
  Kernel k = bundle->get("moe_init_routing_v2_grad", {DType::BF16, {{"H", 7168}}, {{"top_k", 8}}, {}, {}});
  EXPECT_EQ(loadedPtx, b2Ptx);
  launches.clear();
  paramCount = 7; // 3 tensors, the status buffer, N, R, active_num
  // Fake device addresses 1 GiB apart: the launch refuses outputs that overlap another tensor.
  k.launch({device(DType::BF16, {4096 * 8, 7168}, 0x40000000), device(DType::I32, {4096 * 8}, 0x80000000)},
           {device(DType::BF16, {4096, 7168}, 0xC0000000)}, reinterpret_cast<void *>(0x77));
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].grid[0], 4096u);
  EXPECT_EQ(launches[0].block[0], 256u);
  EXPECT_EQ(launches[0].block[1], 1u);
  EXPECT_EQ(launches[0].stream, reinterpret_cast<void *>(0x77));

  // A3 with probs, T = 100 tokens, K = 8 (R = 800): probs grad, which also writes the data grad's rows as
  // it reads them (fuse-row-stores; a warp per token's row of (t, e) points, moe-group-points: 100 rows,
  // 8 per block), then the zero
  // fill of the R rows it left unwritten (moe-fill-uncovered-rows; a warp per row, 8 per block).
  Kernel g = bundle->get("moe_token_unpermute_with_routing_map_grad",
                         {DType::BF16, {{"H", 4096}, {"E", 64}}, {}, {"routing_map", "permuted_tokens", "probs"}, {}});
  launches.clear();
  std::map<std::string, TensorView> t = {
      {"unpermuted_tokens_grad", device(DType::BF16, {100, 4096}, 0x40000000)},
      {"out_index", device(DType::I32, {800}, 0x80000000)},
      {"permute_token_id", device(DType::I32, {800}, 0x90000000)},
      {"routing_map", device(DType::Bool, {100, 64}, 0xA0000000)},
      {"permuted_tokens", device(DType::BF16, {800, 4096}, 0xC0000000)},
      {"probs", device(DType::BF16, {100, 64}, 0x100000000)},
      {"permuted_tokens_grad", device(DType::BF16, {800, 4096}, 0x140000000)},
      {"probs_grad", device(DType::BF16, {100, 64}, 0x180000000)}};
  memsets.clear();
  paramCount = 12; // 8 tensors, the status buffer, the workspace, Tk, R
  g.launch(t, reinterpret_cast<void *>(0x78));
  // The workspace (a byte per row of permuted_tokens_grad) is zeroed on the stream, then passed to every
  // kernel after the status buffer.
  ASSERT_EQ(memsets.size(), 1u);
  EXPECT_EQ(memsets[0].value, 0);
  EXPECT_EQ(memsets[0].bytes, 800u);
  EXPECT_EQ(memsets[0].stream, reinterpret_cast<CUstream>(0x78));
  ASSERT_EQ(launches.size(), 2u);
  for (const Launch &l : launches) {
    ASSERT_EQ(l.values.size(), 12u);
    EXPECT_EQ(l.values[9], memsets[0].to);
    EXPECT_EQ(l.values[10], 100u);
    EXPECT_EQ(l.values[11], 800u);
  }
  EXPECT_EQ(launches[0].grid[0], (100u + 7) / 8);
  EXPECT_EQ(launches[0].block[0], 32u);
  EXPECT_EQ(launches[0].block[1], 8u);
  // The fill's write guard ("nothing wrote this row") depends on the row only: a warp per row.
  EXPECT_EQ(launches[1].grid[0], 800u / 8);
  EXPECT_EQ(launches[1].block[0], 32u);
  EXPECT_EQ(launches[1].block[1], 8u);
}

// A3 without probs: the data gradient's slots of a token write the same row (moe-group-rows), so its
// kernel takes a block per token, the block's 8 warps splitting the row (rowGroups: grid.x = Tk, whatever
// the rows per block), then the zero fill of the rows no slot wrote (a warp per row, 8 per block).
TEST(Bundle, RowGroupsLaunchABlockPerGroup) {
  fs::path dir = bundleDir();
  std::unique_ptr<CudaDriver> driver = CudaDriver::fromTable(fakeDriver());
  auto a3 = compileEntry("moe_token_unpermute_with_routing_map_grad", DType::BF16, {{"H", 4096}, {"E", 64}});
  ASSERT_EQ(a3.first.kernels.size(), 2u);
  EXPECT_TRUE(a3.first.kernels[0].rowGroups);
  EXPECT_FALSE(a3.first.kernels[1].rowGroups);
  Bundle::write(dir, {a3.first}, {a3.second}, {{a3.first.op, findBuiltinOp(a3.first.op)->source}}, "test");
  std::unique_ptr<Bundle> bundle = Bundle::open(dir, *driver);
  EXPECT_TRUE(bundle->entries().at(0).kernels.at(0).rowGroups) << "rowGroups does not survive bundle.json";
  Kernel g = bundle->get("moe_token_unpermute_with_routing_map_grad", {DType::BF16, {{"H", 4096}, {"E", 64}}, {}, {}, {}});
  launches.clear();
  paramCount = 0;
  g.launch({{"unpermuted_tokens_grad", device(DType::BF16, {100, 4096}, 0x40000000)},
            {"out_index", device(DType::I32, {800}, 0x80000000)},
            {"permute_token_id", device(DType::I32, {800}, 0x90000000)},
            {"permuted_tokens_grad", device(DType::BF16, {800, 4096}, 0x140000000)}},
           nullptr);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].grid[0], 100u);
  EXPECT_EQ(launches[0].block[0], 32u);
  EXPECT_EQ(launches[0].block[1], 8u);
  EXPECT_EQ(launches[1].grid[0], 800u / 8);
  fs::remove_all(dir);
}

// Row counts that are not a multiple of the rows per block: the grid is rounded up (ceil_div), or the
// last rows are never written. Only the launch geometry is checked, on the fake driver.
TEST(Bundle, GridCoversRowCountsThatAreNotAMultipleOfTheBlock) {
  TwoOpBundle two(DType::F16, {{"H", 7}, {"top_k", 2}}, DType::F32, {{"H", 7}, {"E", 3}});
  const std::unique_ptr<Bundle> &bundle = two.bundle;
  const Bundle::Entry &b2 = two.b2.first, &a3 = two.a3.first;
  auto expectCovers = [](const Launch &l, const KernelMeta &k, int64_t units) {
    const int64_t perBlock = k.schedule.rowsPerBlock;
    EXPECT_EQ(l.block[1], unsigned(perBlock)) << k.name;
    EXPECT_EQ(int64_t(l.grid[0]), (units + perBlock - 1) / perBlock) << k.name << ": " << units << " units";
  };

  // B2, N = 5 tokens, H = 7: scalar rows, several per block.
  Kernel k = bundle->get("moe_init_routing_v2_grad", {DType::F16, {{"H", 7}}, {{"top_k", 2}}, {}, {}});
  ASSERT_EQ(b2.kernels.size(), 1u);
  ASSERT_GT(b2.kernels[0].schedule.rowsPerBlock, 1) << "the case needs several rows per block";
  for (int64_t n : {1, 5, 7}) {
    ASSERT_NE(n % b2.kernels[0].schedule.rowsPerBlock, 0);
    launches.clear();
    paramCount = 7;
    k.launch({device(DType::F16, {n * 2, 7}, 0x100000), device(DType::I32, {n * 2}, 0x200000)},
             {device(DType::F16, {n, 7}, 0x300000)});
    ASSERT_EQ(launches.size(), 1u);
    expectCovers(launches[0], b2.kernels[0], n);
  }

  // A3 with probs, T = 5 tokens, K = 2 of E = 3 (R = 10): probs_grad with permuted_tokens_grad's rows
  // fused in (a warp per token's row of points, moe-group-points: 5 rows), the zero fill of unwritten rows
  // (R rows).
  Kernel g = bundle->get("moe_token_unpermute_with_routing_map_grad",
                         {DType::F32, {{"H", 7}, {"E", 3}}, {}, {"routing_map", "permuted_tokens", "probs"}, {}});
  std::map<std::string, TensorView> t = {
      {"unpermuted_tokens_grad", device(DType::F32, {5, 7}, 0x100000)},
      {"out_index", device(DType::I32, {10}, 0x200000)},
      {"permute_token_id", device(DType::I32, {10}, 0x210000)},
      {"routing_map", device(DType::Bool, {5, 3}, 0x220000)},
      {"permuted_tokens", device(DType::F32, {10, 7}, 0x300000)},
      {"probs", device(DType::F32, {5, 3}, 0x400000)},
      {"permuted_tokens_grad", device(DType::F32, {10, 7}, 0x500000)},
      {"probs_grad", device(DType::F32, {5, 3}, 0x600000)}};
  launches.clear();
  g.launch(t);
  ASSERT_EQ(launches.size(), 2u);
  ASSERT_EQ(a3.kernels.size(), 2u);
  const int64_t units[2] = {5, 10};
  bool someRemainder = false;
  for (int i = 0; i < 2; ++i) {
    expectCovers(launches[i], a3.kernels[i], units[i]);
    someRemainder |= units[i] % a3.kernels[i].schedule.rowsPerBlock != 0;
  }
  EXPECT_TRUE(someRemainder) << "no kernel of the case has a partial last block";
}

TEST(Bundle, MissingSpecializationsAndDevicesAreReported) {
  auto [b2, b2Ptx] = compileEntry("moe_init_routing_v2_grad", DType::BF16, {{"H", 7168}, {"top_k", 8}});
  fs::path dir = bundleDir();
  Bundle::write(dir, {b2}, {b2Ptx}, {{b2.op, findBuiltinOp(b2.op)->source}}, "test");
  auto driver = CudaDriver::fromTable(fakeDriver());
  auto bundle = Bundle::open(dir, *driver);
  try {
    bundle->get("moe_init_routing_v2_grad", {DType::BF16, {{"H", 4096}}, {{"top_k", 8}}, {}, {}});
    FAIL() << "expected an ArgumentError";
  } catch (const ArgumentError &e) {
    EXPECT_NE(std::string(e.what()).find("it has:\n  moe_init_routing_v2_grad bf16 ptx-sm_90 H=7168"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(bundle->get("moe_unpermute", {}), ArgumentError);
  Kernel k = bundle->get("moe_init_routing_v2_grad", {DType::BF16, {{"H", 7168}}, {{"top_k", 8}}, {}, {}});
  HostTensor host(DType::BF16, {8, 7168});
  EXPECT_THROW(k.launch({host.view(), device(DType::I32, {8}, 0x1000)}, {device(DType::BF16, {1, 7168}, 0x2000)}),
               ArgumentError); // a host tensor for a GPU kernel
  EXPECT_THROW(k.launch({device(DType::BF16, {8, 7168}, 0x1008), device(DType::I32, {8}, 0x1000)},
                        {device(DType::BF16, {1, 7168}, 0x2000)}),
               ArgumentError); // not 16-byte aligned

  auto none = Bundle::open(dir, CudaDriver::instance());
  if (!CudaDriver::instance().available()) {
    try {
      none->get("moe_init_routing_v2_grad", {DType::BF16, {{"H", 7168}}, {{"top_k", 8}}, {}, {}});
      FAIL() << "expected an ArgumentError";
    } catch (const ArgumentError &e) {
      EXPECT_NE(std::string(e.what()).find("bundle kernels run on a GPU: no CUDA driver"), std::string::npos)
          << e.what();
    }
  }
  fs::remove_all(dir);
}

namespace {

/// A one-entry bundle (B2, bf16, H=7168) whose bundle.json is then edited by `edit`; returns the error
/// Bundle::open gives, or "" if it opens.
std::string openError(const std::function<void(nlohmann::json &index, const fs::path &dir)> &edit) {
  static auto compiled = compileEntry("moe_init_routing_v2_grad", DType::BF16, {{"H", 7168}, {"top_k", 8}});
  fs::path dir = bundleDir();
  Bundle::write(dir, {compiled.first}, {compiled.second},
                {{compiled.first.op, findBuiltinOp(compiled.first.op)->source}}, "test");
  std::ifstream in(dir / "bundle.json");
  nlohmann::json index = nlohmann::json::parse(in);
  edit(index, dir);
  std::ofstream(dir / "bundle.json", std::ios::trunc) << index.dump(2);
  auto driver = CudaDriver::fromTable(fakeDriver());
  std::string error;
  try {
    Bundle::open(dir, *driver);
  } catch (const std::exception &e) {
    error = e.what();
  }
  fs::remove_all(dir);
  return error;
}

/// Sets `field` of the first entry's first kernel.
std::function<void(nlohmann::json &, const fs::path &)> kernelField(const char *field, nlohmann::json value) {
  return [=](nlohmann::json &index, const fs::path &) { index["entries"][0]["kernels"][0][field] = value; };
}

std::function<void(nlohmann::json &, const fs::path &)> staticValue(const char *name, nlohmann::json value) {
  return [=](nlohmann::json &index, const fs::path &) { index["entries"][0]["statics"][name] = value; };
}

/// Whether `error` names bundle.json and contains `what`.
::testing::AssertionResult reports(const std::string &error, const std::string &what) {
  if (error.find("bundle.json'") != std::string::npos && error.find(what) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "error: '" << error << "', expected it to contain '" << what << "'";
}

} // namespace

TEST(Bundle, OpensAnUneditedBundle) { EXPECT_EQ(openError([](nlohmann::json &, const fs::path &) {}), ""); }

TEST(Bundle, PathsMustStayInsideTheBundle) {
  auto opPath = [](std::string path) {
    return [=](nlohmann::json &index, const fs::path &) { index["ops"]["moe_init_routing_v2_grad"] = path; };
  };
  EXPECT_TRUE(reports(openError(opPath("/etc/passwd")),
                      "'ops.moe_init_routing_v2_grad': '/etc/passwd' must be a relative"));
  EXPECT_TRUE(reports(openError(opPath("../../etc/passwd")), "'../../etc/passwd' must not contain '..'"));
  EXPECT_TRUE(reports(openError([](nlohmann::json &index, const fs::path &dir) {
                        fs::create_symlink("/etc", dir / "link");
                        index["ops"]["moe_init_routing_v2_grad"] = "link/passwd";
                      }),
                      "'link/passwd' resolves to '/etc/passwd', outside the bundle directory"));
  auto codePath = [](std::string path) {
    return [=](nlohmann::json &index, const fs::path &) { index["entries"][0]["code"] = path; };
  };
  EXPECT_TRUE(reports(openError(codePath("/etc/passwd")), "entries[0]: 'code': '/etc/passwd' must be a relative"));
  EXPECT_TRUE(reports(openError(codePath("x/../../secret.ptx")), "must not contain '..'"));
  EXPECT_TRUE(reports(openError(codePath("")), "'code': '' must be a relative"));
}

TEST(Bundle, NumbersAreCheckedIntegersInRange) {
  EXPECT_TRUE(reports(openError(staticValue("H", 1e20)), "entries[0]: 'statics': 'H' must be an integer, got 1e+20"));
  EXPECT_TRUE(reports(openError(staticValue("H", 1.5)), "'statics': 'H' must be an integer, got 1.5"));
  EXPECT_TRUE(reports(openError(staticValue("H", -4)), "'statics': 'H': -4 is not in [1, 2147483647]"));
  EXPECT_TRUE(reports(openError(staticValue("H", 0)), "'statics': 'H': 0 is not in [1, 2147483647]"));
  EXPECT_TRUE(reports(openError(staticValue("H", int64_t(1) << 31)), "'H': 2147483648 is not in"));
  EXPECT_TRUE(reports(openError(staticValue("H", uint64_t(1) << 63)),
                      "'H' must be an integer, got 9223372036854775808"));
  EXPECT_TRUE(reports(openError(staticValue("drop_pad_mode", 2)),
                      "'statics' fail the op's check: dropPadMode must be 0 or 1"));
  EXPECT_TRUE(reports(openError(staticValue("top_k", -(int64_t(1) << 40))),
                      "'top_k': -1099511627776 is not in [-2147483648, 2147483647]"));
  EXPECT_TRUE(reports(openError(staticValue("nosuch", 1)), "'nosuch' is not a static dim or attribute"));

  EXPECT_TRUE(reports(openError(kernelField("rowsPerBlock", 0)),
                      "entries[0]: kernels[0]: 'rowsPerBlock': 0 is not in [1, 4]"));
  EXPECT_TRUE(reports(openError(kernelField("threads", int64_t(1) << 40)),
                      "'threads': 1099511627776 is not in [1, 1024]"));
  EXPECT_TRUE(reports(openError(kernelField("threads", 48)), "'threads': 48 is not a multiple of 32"));
  EXPECT_TRUE(reports(openError(kernelField("threads", 2.5)), "'threads' must be an integer, got 2.5"));
  EXPECT_TRUE(reports(openError(kernelField("rowsPerBlock", 8)), "'rowsPerBlock': 8 is not in [1, 4]"));
  EXPECT_TRUE(reports(openError(kernelField("vector", 3)), "'vector': 3 is not 1, 2, 4, 8 or 16"));
  EXPECT_TRUE(reports(openError(kernelField("unroll", 65)), "'unroll': 65 is not in [0, 64]"));
  EXPECT_TRUE(reports(openError(kernelField("unroll", -1)), "'unroll': -1 is not in [0, 64]"));
  EXPECT_TRUE(reports(openError(kernelField("pointPerWarp", 1)), "'pointPerWarp' must be true or false"));
  EXPECT_TRUE(reports(openError(kernelField("pointRuns", 1)), "'pointRuns' must be true or false"));
  EXPECT_TRUE(reports(openError([](nlohmann::json &index, const fs::path &) {
                        index["entries"][0]["kernels"][0]["pointRuns"] = true;
                        index["entries"][0]["kernels"][0]["rowGroups"] = true;
                      }),
                      "at most one of 'pointPerWarp', 'rowGroups' and 'pointRuns' may be true"));
  EXPECT_TRUE(reports(openError(kernelField("name", 7)), "'name' must be a non-empty string"));
}

TEST(Bundle, AFifoInTheBundleIsRejectedNotWaitedOn) {
  std::string error = openError([](nlohmann::json &index, const fs::path &dir) {
    ASSERT_EQ(::mkfifo((dir / "op.fifo").c_str(), 0644), 0);
    index["ops"]["moe_init_routing_v2_grad"] = "op.fifo";
  });
  EXPECT_NE(error.find("op.fifo' is not a regular file"), std::string::npos) << error;
}
