//===- BundleTest.cpp - AOT bundles: written, loaded, launched on a fake driver ===//
#include "moec/compiler/Pipeline.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/Bundle.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/HostTensor.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace moec;

namespace {

/// What the fake driver saw of each launch.
struct Launch {
  unsigned grid[3], block[3];
  size_t params;
  void *stream;
};
std::vector<Launch> launches;
std::string loadedPtx;
size_t paramCount = 0; // set by the test: how many parameters the kernel takes

CUresult ok() { return CUDA_SUCCESS; }

CudaDriverTable fakeDriver() {
  CudaDriverTable t;
  t.init = [](unsigned) { return ok(); };
  t.deviceGet = [](CUdevice *d, int) { *d = 0; return ok(); };
  t.deviceGetCount = [](int *n) { *n = 1; return ok(); };
  t.deviceGetAttribute = [](int *v, CUdevice_attribute a, CUdevice) {
    *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9 : 0;
    return ok();
  };
  t.deviceGetName = [](char *name, int, CUdevice) { std::strcpy(name, "fake H200"); return ok(); };
  t.devicePrimaryCtxRetain = [](CUcontext *c, CUdevice) { *c = reinterpret_cast<CUcontext>(0x10); return ok(); };
  t.devicePrimaryCtxRelease = [](CUdevice) { return ok(); };
  t.ctxSetCurrent = [](CUcontext) { return ok(); };
  t.ctxGetCurrent = [](CUcontext *c) { *c = nullptr; return ok(); };
  t.moduleLoadDataEx = [](CUmodule *m, const void *image, unsigned, CUjit_option *, void **) {
    loadedPtx = static_cast<const char *>(image);
    *m = reinterpret_cast<CUmodule>(0x20);
    return ok();
  };
  t.moduleUnload = [](CUmodule) { return ok(); };
  t.moduleGetFunction = [](CUfunction *f, CUmodule, const char *) {
    *f = reinterpret_cast<CUfunction>(0x30);
    return ok();
  };
  t.launchKernel = [](CUfunction, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned, CUstream s, void **params, void **) {
    launches.push_back({{gx, gy, gz}, {bx, by, bz}, paramCount, s});
    return ok();
  };
  t.getErrorName = [](CUresult, const char **s) { *s = "CUDA_ERROR_FAKE"; return ok(); };
  t.getErrorString = [](CUresult, const char **s) { *s = "fake"; return ok(); };
  return t;
}

/// Compiles `op` for sm_90 and returns it as a bundle entry with its PTX.
std::pair<Bundle::Entry, std::string> compileEntry(const std::string &name, DType dtype,
                                                    std::map<std::string, int64_t> statics,
                                                    std::set<std::string> with = {}) {
  auto op = loadOp(name);
  Specialization spec{dtype, statics, Target::ptx("sm_90"), {}, with};
  CompiledOp compiled = compile(*op, spec);
  Bundle::Entry e{name, dtype, resolveStatics(*op, spec), {}, "ptx-sm_90", name + ".ptx", {}};
  e.present = resolvePresence(*op, with, e.statics);
  for (const KernelInfo &k : compiled.kernels)
    e.kernels.push_back({k.name, k.output, k.schedule, k.pointPerWarp});
  return {e, compiled.ptx};
}

/// A device tensor view at a fake, 256-byte aligned address.
TensorView device(DType dtype, std::vector<int64_t> shape, uintptr_t address) {
  return {reinterpret_cast<void *>(address), dtype, std::move(shape), {}, Device::Cuda};
}

fs::path bundleDir() {
  return fs::temp_directory_path() / ("moec-bundle-" + std::to_string(::getpid()) + "-" +
                                      std::to_string(std::random_device{}()));
}

} // namespace

TEST(Bundle, WrittenLoadedAndLaunchedWithoutTheCompiler) {
  auto [b2, b2Ptx] = compileEntry("moe_init_routing_v2_grad", DType::BF16, {{"H", 7168}, {"top_k", 8}});
  auto [a3, a3Ptx] = compileEntry("moe_token_unpermute_with_routing_map_grad", DType::BF16, {{"H", 4096}, {"E", 64}},
                                  {"routing_map", "permuted_tokens", "probs"});
  fs::path dir = bundleDir();
  Bundle::write(dir, {b2, a3}, {b2Ptx, a3Ptx},
                {{b2.op, findBuiltinOp(b2.op)->source}, {a3.op, findBuiltinOp(a3.op)->source}}, "test");

  auto driver = CudaDriver::fromTable(fakeDriver());
  auto bundle = Bundle::open(dir, *driver);
  ASSERT_EQ(bundle->entries().size(), 2u);

  // B2 at N = 4096 tokens: a row per block of 256 threads (8 bf16 lanes each: 2048 elements a pass).
  Kernel k = bundle->get("moe_init_routing_v2_grad", {DType::BF16, {{"H", 7168}}, {{"top_k", 8}}, {}, {}});
  EXPECT_EQ(loadedPtx, b2Ptx);
  launches.clear();
  paramCount = 6;
  k.launch({device(DType::BF16, {4096 * 8, 7168}, 0x100000), device(DType::I32, {4096 * 8}, 0x200000)},
           {device(DType::BF16, {4096, 7168}, 0x300000)}, reinterpret_cast<void *>(0x77));
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].grid[0], 4096u);
  EXPECT_EQ(launches[0].block[0], 256u);
  EXPECT_EQ(launches[0].block[1], 1u);
  EXPECT_EQ(launches[0].stream, reinterpret_cast<void *>(0x77));

  // A3 with probs, T = 100 tokens, K = 8 (R = 800): zero fill (R rows), probs grad (a warp per (t, e)
  // point: 100 * 64 points, 8 per block), data grad scatter (rows of (t, e)).
  Kernel g = bundle->get("moe_token_unpermute_with_routing_map_grad",
                         {DType::BF16, {{"H", 4096}, {"E", 64}}, {}, {"routing_map", "permuted_tokens", "probs"}, {}});
  launches.clear();
  std::map<std::string, TensorView> t = {
      {"unpermuted_tokens_grad", device(DType::BF16, {100, 4096}, 0x100000)},
      {"out_index", device(DType::I32, {800}, 0x200000)},
      {"permute_token_id", device(DType::I32, {800}, 0x210000)},
      {"routing_map", device(DType::Bool, {100, 64}, 0x220000)},
      {"permuted_tokens", device(DType::BF16, {800, 4096}, 0x300000)},
      {"probs", device(DType::BF16, {100, 64}, 0x400000)},
      {"permuted_tokens_grad", device(DType::BF16, {800, 4096}, 0x500000)},
      {"probs_grad", device(DType::BF16, {100, 64}, 0x600000)}};
  g.launch(t);
  ASSERT_EQ(launches.size(), 3u);
  EXPECT_EQ(launches[0].grid[0], 800u);
  EXPECT_EQ(launches[1].grid[0], 100u * 64 / 8);
  EXPECT_EQ(launches[1].block[0], 32u);
  EXPECT_EQ(launches[1].block[1], 8u);
  EXPECT_EQ(launches[2].grid[0], 100u * 64);
  fs::remove_all(dir);
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

TEST(Bundle, FileNamesMustStayInTheBundleDirectory) {
  fs::path dir = bundleDir();
  fs::create_directories(dir);
  std::ofstream(dir / "op.moe") << findBuiltinOp("moe_unpermute")->source;
  auto open = [&](const std::string &json) {
    std::ofstream(dir / "bundle.json", std::ios::trunc) << json;
    return Bundle::open(dir, CudaDriver::instance());
  };
  const std::string entry = R"({"op": "moe_unpermute", "dtype": "bf16", "statics": {}, "present": [],
                                "target": "ptx-sm_90", "kernels": [], "code": )";
  EXPECT_NO_THROW(open(R"({"format": 1, "ops": {"moe_unpermute": "op.moe"}, "entries": [)" + entry + R"("k.ptx"}]})"));
  for (const char *bad : {"\"../op.moe\"", "\"/etc/hostname\"", "\"..\"", "\"\""})
    EXPECT_THROW(open(std::string(R"({"format": 1, "ops": {"moe_unpermute": )") + bad + R"(}, "entries": []})"),
                 std::runtime_error)
        << bad;
  for (const char *bad : {"\"../k.ptx\"", "\"/tmp/k.ptx\"", "\"sub/k.ptx\""})
    EXPECT_THROW(open(R"({"format": 1, "ops": {"moe_unpermute": "op.moe"}, "entries": [)" + entry + bad + "}]}"),
                 std::runtime_error)
        << bad;
  fs::remove_all(dir);
}

// Found while fuzzing bundle.json: numbers that JSON allows but a bundle cannot hold (a float converts to
// int64_t with undefined behaviour when out of range; a zero schedule field divides by zero at launch).
TEST(Bundle, OutOfRangeNumbersAreRejected) {
  fs::path dir = bundleDir();
  fs::create_directories(dir);
  std::ofstream(dir / "op.moe") << findBuiltinOp("moe_unpermute")->source;
  auto open = [&](const std::string &statics, const std::string &kernel) {
    std::ofstream(dir / "bundle.json", std::ios::trunc)
        << R"({"format": 1, "ops": {"moe_unpermute": "op.moe"}, "entries": [{"op": "moe_unpermute",
              "dtype": "bf16", "present": [], "target": "ptx-sm_90", "code": "k.ptx", "statics": )"
        << statics << R"(, "kernels": [)" << kernel << "]}]}";
    return Bundle::open(dir, CudaDriver::instance());
  };
  const std::string good = R"({"name": "k", "output": "hidden_states", "pointPerWarp": false, "rowsPerBlock": 1,
                               "threads": 256, "vector": 8, "unroll": )";
  EXPECT_NO_THROW(open(R"({"H": 4096})", good + "8}"));
  for (const char *statics : {R"({"H": 1e300})", R"({"H": 4096.5})", R"({"H": 18446744073709551615})"})
    EXPECT_THROW(open(statics, good + "8}"), std::runtime_error) << statics;
  for (const char *unroll : {"0", "-1", "1e300", "2.5", "100000"})
    EXPECT_THROW(open(R"({"H": 4096})", good + unroll + "}"), std::runtime_error) << unroll;
  fs::remove_all(dir);
}
