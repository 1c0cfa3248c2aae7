//===- HardeningTest.cpp - Hostile inputs: bounds, sizes, schedules ------===//
//
// Regression tests for a hostile-user review (one class each): gathers and scatters through index tensors
// that declare no range ran unchecked (SIGSEGV, heap corruption, garbage with exit 0); element counts
// wrapped to 0; nested reductions compiled in exponential time; schedules and attributes went unchecked.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Pipeline.h"
#include "moec/dsl/Parser.h"
#include "moec/jit/CpuRun.h"
#include "moec/jit/Runtime.h"
#include "moec/ops/BuiltinOps.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

using namespace moec;

namespace {

/// A built-in op, loaded once.
const dsl::OpDef &builtinOp(const std::string &name) {
  static std::map<std::string, std::unique_ptr<dsl::OpDef>> ops;
  auto &op = ops[name];
  if (!op)
    op = loadOp(name);
  return *op;
}

/// `text` as an op loaded from "user.moe".
std::unique_ptr<dsl::OpDef> userOp(const std::string &text) { return dsl::loadOpText("user.moe", text); }

/// Expects `f` to throw E whose message contains every one of `parts`.
template <typename E, typename F> void expectThrowContaining(F f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const E &e) {
    for (const std::string &p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << p << "' not in: " << e.what();
  }
}

HostTensor ints(std::vector<int32_t> values) {
  HostTensor t(DType::I32, {int64_t(values.size())});
  std::copy(values.begin(), values.end(), static_cast<int32_t *>(t.raw()));
  return t;
}

HostTensor iota(int64_t rows, int64_t cols) {
  HostTensor t(DType::F32, {rows, cols});
  for (int64_t i = 0; i < rows * cols; ++i)
    static_cast<float *>(t.raw())[i] = float(i + 1);
  return t;
}

const char *kGather = R"(op gather<T: f32>
  dim N: runtime, M: runtime, H: static
  in idx: i32[N]
  in x: T[M, H]
  out y: T[N, H]
{
  y[n, h] = x[idx[n], h]
}
)";

TEST(BoundsChecks, GatherThroughAnUncheckedIndexIsCheckedByTheKernel) {
  auto op = userOp(kGather);
  HostTensor x = iota(5, 3);
  // In range: the plain gather.
  HostTensor good = ints({4, 0, 2});
  CpuRunResult r = runOnCpu(*op, DType::F32, {}, {{"idx", good.view()}, {"x", x.view()}});
  const float *y = static_cast<const float *>(r.outputs.at("y").raw());
  for (int n = 0; n < 3; ++n)
    for (int h = 0; h < 3; ++h)
      EXPECT_EQ(y[n * 3 + h], float(static_cast<int32_t *>(good.raw())[n] * 3 + h + 1));
  // -1 and M: each reported with the value, the tensor, the dim, the extent and the source location.
  for (int32_t bad : {-1, 5, 1 << 30}) {
    HostTensor idx = ints({1, bad, 2});
    expectThrowContaining<ArgumentError>(
        [&] { runOnCpu(*op, DType::F32, {}, {{"idx", idx.view()}, {"x", x.view()}}); },
        {"user.moe:7:13", "index " + std::to_string(bad) + " into tensor 'x' dim 0", "outside [0, 5)"});
  }
}

TEST(BoundsChecks, ScatterThroughAnUncheckedIndexIsCheckedByTheKernel) {
  auto op2 = userOp(R"(op scatter<T: f32>
  dim N: runtime, H: static
  in idx: i32[N]
  in x: T[N, H]
  out y: T[N, H]
{
  y[m, h] = T(0.0)
  for i < N {
    y[idx[i], h] = x[i, h]
  }
}
)");
  HostTensor x = iota(4, 2);
  HostTensor perm = ints({3, 1, 0, 2});
  CpuRunResult r = runOnCpu(*op2, DType::F32, {}, {{"idx", perm.view()}, {"x", x.view()}});
  const float *y = static_cast<const float *>(r.outputs.at("y").raw());
  for (int i = 0; i < 4; ++i)
    for (int h = 0; h < 2; ++h)
      EXPECT_EQ(y[static_cast<int32_t *>(perm.raw())[i] * 2 + h], float(i * 2 + h + 1));
  HostTensor bad = ints({3, 1, 4, 2});
  expectThrowContaining<ArgumentError>(
      [&] { runOnCpu(*op2, DType::F32, {}, {{"idx", bad.view()}, {"x", x.view()}}); },
      {"user.moe:9:5", "index 4 into tensor 'y' dim 0", "outside [0, 4)"});
}

TEST(BoundsChecks, AGuardedGatherIsNotReported) {
  auto op = userOp(R"(op guarded<T: f32>
  dim N: runtime, M: runtime, H: static
  in idx: i32[N]
  in x: T[M, H]
  out y: T[N, H]
{
  y[n, h] = idx[n] >= 0 ? x[idx[n], h] : T(0.0)
}
)");
  HostTensor x = iota(2, 4), idx = ints({-1, 1});
  CpuRunResult r = runOnCpu(*op, DType::F32, {}, {{"idx", idx.view()}, {"x", x.view()}});
  const float *y = static_cast<const float *>(r.outputs.at("y").raw());
  for (int h = 0; h < 4; ++h) {
    EXPECT_EQ(y[h], 0.0f);
    EXPECT_EQ(y[4 + h], float(4 + h + 1));
  }
}

TEST(BoundsChecks, ProvenIndicesAreNotChecked) {
  // B2: expanded_row_idx[n * K + k] is proven (n < N, k < K over a dim N * K); the gathered row is not.
  const dsl::OpDef &b2 = builtinOp("moe_init_routing_v2_grad");
  CompiledOp c = compile(b2, {DType::BF16, {{"H", 64}, {"top_k", 4}}, Target::cpu(), {}, {}});
  ASSERT_EQ(c.kernels.size(), 1u);
  ASSERT_EQ(c.kernels[0].checks.size(), 1u);
  EXPECT_EQ(b2.tensors[c.kernels[0].checks[0].tensor].name, "grad_expanded_x");
}

TEST(BoundsChecks, IntegerDivisionByARuntimeZeroIsReportedNotATrap) {
  // Was SIGFPE in the JIT code: `n / q` with the runtime attribute q = 0.
  auto op = userOp(R"(op div<T: f32>
  dim N: runtime, H: static
  attr q: runtime = 1
  in x: T[N, H]
  out y: T[N, H]
{
  y[n, h] = x[n / q, h] + T(n % q)
}
)");
  HostTensor x = iota(4, 8);
  CpuRunResult r = runOnCpu(*op, DType::F32, {{"q", 2}}, {{"x", x.view()}});
  const float *y = static_cast<const float *>(r.outputs.at("y").raw());
  for (int n = 0; n < 4; ++n)
    for (int h = 0; h < 8; ++h)
      EXPECT_EQ(y[n * 8 + h], float((n / 2) * 8 + h + 1 + n % 2));
  expectThrowContaining<ArgumentError>([&] { runOnCpu(*op, DType::F32, {{"q", 0}}, {{"x", x.view()}}); },
                                       {"user.moe:7:", "division of", "by zero"});
}

TEST(Sizes, ElementCountsThatOverflowAreRejected) {
  auto op = userOp(R"(op square<T: f32>
  dim N: runtime, M: runtime
  in x: T[N, M]
  out y: T[M, M]
{
  y[i, j] = T(0.0)
}
)");
  // (0, 2^62): empty, but its row stride alone is past any limit.
  TensorView huge{reinterpret_cast<void *>(64), DType::F32, {0, int64_t(1) << 62}};
  expectThrowContaining<ArgumentError>([&] { bindCall(*op, DType::F32, {}, {{"x", huge}}); },
                                       {"tensor 'x'", "[0, 4611686018427387904]", "limit"});
  // An empty input whose shape makes an output of 2^62 elements: named, not wrapped to 0.
  TensorView wide{reinterpret_cast<void *>(64), DType::F32, {0, int64_t(1) << 31}};
  expectThrowContaining<ArgumentError>([&] { bindCall(*op, DType::F32, {}, {{"x", wide}}); },
                                       {"output 'y'", "[2147483648, 2147483648]", "limit"});
}

TEST(Sizes, HostTensorsNameTheirLimit) {
  expectThrowContaining<std::length_error>([] { HostTensor(DType::F32, {int64_t(1) << 40, 1 << 20}); },
                                           {"[1099511627776, 1048576]", "limit"});
}

TEST(Schedules, InvalidSchedulesAreRejectedBeforeCompiling) {
  const dsl::OpDef &b2 = builtinOp("moe_init_routing_v2_grad");
  auto compileWith = [&](Schedule s, Target t) { return compile(b2, {DType::BF16, {{"H", 64}, {"top_k", 4}}, t, s, {}}); };
  expectThrowContaining<CompileError>([&] { compileWith({0, 100000, 0, 0}, Target::ptx("sm_90")); },
                                      {"schedule 'threads': 100000 is not in [0, 1024]"});
  expectThrowContaining<CompileError>([&] { compileWith({0, 48, 0, 0}, Target::ptx("sm_90")); },
                                      {"'threads': 48 is not a multiple of 32"});
  expectThrowContaining<CompileError>([&] { compileWith({8, 256, 0, 0}, Target::ptx("sm_90")); },
                                      {"'rowsPerBlock': 8 is not in [0, 4]"});
  expectThrowContaining<CompileError>([&] { compileWith({0, 0, 3, 0}, Target::cpu()); },
                                      {"'vector': 3 is not 0 (choice), 1, 2, 4, 8 or 16 (or 32 on the CPU)"});
  // 32 lanes (a 64-byte register of 16-bit elements) are a CPU width only.
  expectThrowContaining<CompileError>([&] { compileWith({0, 256, 32, 0}, Target::ptx("sm_90")); },
                                      {"'vector': 32 is not 0 (choice), 1, 2, 4, 8 or 16"});
  EXPECT_EQ(compileWith({0, 0, 32, 0}, Target::cpu()).kernels.at(0).schedule.vector, 32);
  expectThrowContaining<CompileError>([&] { compileWith({0, 0, -8, 0}, Target::cpu()); }, {"'vector': -8 is not"});
  expectThrowContaining<CompileError>([&] { compileWith({0, 0, 0, -1}, Target::cpu()); }, {"'unroll': -1 is not in [0, 64]"});
  expectThrowContaining<CompileError>([&] { compileWith({-1, 0, 0, 0}, Target::cpu()); },
                                      {"'rowsPerBlock': -1 is not in [0, 1024]"});
  // A valid schedule is the one the kernel gets, and the PTX has its block size.
  CompiledOp ok = compileWith({2, 64, 8, 4}, Target::ptx("sm_90"));
  ASSERT_EQ(ok.kernels.size(), 1u);
  EXPECT_EQ(ok.kernels[0].schedule, (Schedule{2, 64, 8, 4}));
  EXPECT_NE(ok.ptx.find(".maxntid 64, 2, 1"), std::string::npos);
}

TEST(Attributes, AnAttributeAndItsAliasTogetherAreAnError) {
  const dsl::OpDef &b2 = builtinOp("moe_init_routing_v2_grad");
  HostTensor g(DType::F32, {4, 8}), idx = ints({0, 1, 2, 3});
  expectThrowContaining<ArgumentError>(
      [&] { bindCall(b2, DType::F32, {{"top_k", 2}, {"K", 2}}, {{"grad_expanded_x", g.view()}, {"expanded_row_idx", idx.view()}}); },
      {"'top_k' is given twice", "alias 'K'"});
  expectThrowContaining<CompileError>(
      [&] { compile(b2, {DType::F32, {{"H", 8}, {"top_k", 2}, {"K", 2}}, Target::cpu(), {}, {}}); },
      {"'top_k' is given twice"});
}

TEST(Requires, ACompileTimeRequireFailurePointsAtItsSource) {
  auto op = userOp(R"(op t<T: f32>
  dim N: runtime, H: static
  in x: T[N, H]
  out y: T[N, H]
  require H % 4 == 0 : "H must be a multiple of 4"
  require 64 / (H - 4) > 0 : "never zero"
{
  y[n, h] = x[n, h]
}
)");
  // The location is the condition's operator, with the source line and a caret under it.
  expectThrowContaining<CompileError>([&] { compile(*op, {DType::F32, {{"H", 10}}, Target::cpu(), {}, {}}); },
                                      {"user.moe:5:17: error:", "H must be a multiple of 4", "\n                ^"});
  expectThrowContaining<CompileError>([&] { compile(*op, {DType::F32, {{"H", 4}}, Target::cpu(), {}, {}}); },
                                      {"user.moe:6:24: error:", "division by zero"});
}

TEST(CompileTime, NestedReductionsCompileToLinearCode) {
  // 2^14 copies of the body before: 14 nested sum(k < 2) took more than 30 s.
  std::string body = "f32(x[n, h])";
  for (int i = 0; i < 14; ++i)
    body = "sum(k" + std::to_string(i) + " < 2) (" + body + ")";
  auto op = userOp("op nest<T: f32>\n dim N: runtime, H: static\n in x: T[N, H]\n out y: T[N, H]\n{\n y[n, h] = T(" +
                   body + ")\n}\n");
  for (Target t : {Target::cpu(), Target::ptx("sm_90")}) {
    CompileOptions o;
    o.dump = {Stage::Loops};
    CompiledOp c = compile(*op, {DType::F32, {{"H", 64}}, t, {}, {}}, o);
    size_t lines = std::count(c.dumps.at(Stage::Loops).begin(), c.dumps.at(Stage::Loops).end(), '\n');
    EXPECT_LT(lines, 1000u) << t.str();
  }
}

} // namespace

// Kernel arguments are noalias (LLVM keeps loads across stores, the GPU reads inputs through the
// non-coherent cache), so a call whose output shares memory with another tensor would be undefined: the
// launch refuses it, naming both tensors. Inputs may share memory with each other (nothing writes them).
TEST(Aliasing, AnOutputOverlappingAnotherTensorIsRefused) {
  Runtime::Options o;
  o.target = Target::cpu();
  Runtime rt(o);
  KernelRequest request;
  request.dtype = DType::F32;
  request.dims = {{"H", 4}};
  request.attrs = {{"top_k", 1}};
  Kernel k = rt.get("moe_init_routing_v2_grad", request);
  HostTensor buffer = iota(8, 4), idx = ints({1, 0, 3, 2});
  auto view = [&](int64_t firstRow, int64_t rows) {
    return TensorView{static_cast<float *>(buffer.raw()) + firstRow * 4, DType::F32, {rows, 4}};
  };
  // grad_x's last row is grad_expanded_x's first.
  expectThrowContaining<ArgumentError>(
      [&] { k.launch({{"grad_expanded_x", view(3, 4)}, {"expanded_row_idx", idx.view()}, {"grad_x", view(0, 4)}}); },
      {"output 'grad_x' overlaps input 'grad_expanded_x'", "may share no memory"});
  // Adjacent, not overlapping: accepted, and the result is right.
  ASSERT_NO_THROW(
      k.launch({{"grad_expanded_x", view(4, 4)}, {"expanded_row_idx", idx.view()}, {"grad_x", view(0, 4)}}));
  const float *rows = static_cast<const float *>(buffer.raw());
  for (int64_t n = 0; n < 4; ++n) // top_k 1: grad_x[n] = grad_expanded_x[idx[n]]
    EXPECT_EQ(rows[n * 4 + 1], rows[(4 + static_cast<const int32_t *>(idx.raw())[n]) * 4 + 1]);

  // Two outputs of one op in one buffer.
  KernelRequest c2;
  c2.dtype = DType::F32;
  c2.dims = {{"E", 2}, {"K", 2}, {"H", 2}};
  Kernel unpermute = rt.get("moe_unpermute", c2);
  HostTensor yu(DType::F32, {2, 2}), rowmap = ints({0, 1}), routemap = ints({0, 1}), pu(DType::F32, {2});
  HostTensor out(DType::F32, {4});
  TensorView hidden{out.raw(), DType::F32, {1, 2}}, probs{static_cast<float *>(out.raw()) + 1, DType::F32, {1, 2}};
  TensorView rowmap2{rowmap.raw(), DType::I32, {1, 2}}, routemap2{routemap.raw(), DType::I32, {1, 2}};
  expectThrowContaining<ArgumentError>(
      [&] {
        unpermute.launch({{"hidden_states_unzipped", yu.view()}, {"zipped_expertwise_rowmap", rowmap2},
                          {"expert_routemap_topk", routemap2}, {"token_prob_unzipped", pu.view()},
                          {"hidden_states", hidden}, {"expert_prob_topk", probs}});
      },
      {"output 'expert_prob_topk' overlaps output 'hidden_states'"});
  // Inputs sharing memory are fine: the rowmap and the routemap here are the same two ints.
  TensorView probsApart{static_cast<float *>(out.raw()) + 2, DType::F32, {1, 2}};
  EXPECT_NO_THROW(unpermute.launch({{"hidden_states_unzipped", yu.view()}, {"zipped_expertwise_rowmap", rowmap2},
                                    {"expert_routemap_topk", rowmap2}, {"token_prob_unzipped", pu.view()},
                                    {"hidden_states", hidden}, {"expert_prob_topk", probsApart}}));
}

namespace {
/// A scatter through a `unique` index, with a declared range or without one (`range`: "" or " in [-1, N)").
std::unique_ptr<dsl::OpDef> uniqueScatter(const std::string &range) {
  return userOp("op scatter<T: f32>\n  dim N: runtime, H: static\n  in idx: i32[N]" + range +
                " unique\n  in x: T[N, H]\n  out y: T[N, H]\n{\n  y[m, h] = T(0.0)\n  for i < N {\n"
                "    if idx[i] >= 0 {\n      y[idx[i], h] = x[i, h]\n    }\n  }\n}\n");
}
} // namespace

TEST(IndexData, RepeatsInAUniqueTensorAreFoundWithOrWithoutARange) {
  // A declared range lets the check use a bitmap over it; without one it hashes the values. Both name the
  // first two elements that hold the repeated value, and -1 (a skipped slot) may repeat.
  std::mt19937 rng(7);
  for (const std::string range : {std::string(" in [-1, N)"), std::string()}) {
    auto op = uniqueScatter(range);
    const int32_t n = 3001;
    std::vector<int32_t> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    perm[10] = perm[20] = -1;
    HostTensor x = iota(n, 2);
    HostTensor good = ints(perm);
    EXPECT_NO_THROW(runOnCpu(*op, DType::F32, {}, {{"idx", good.view()}, {"x", x.view()}})) << range;
    for (auto [first, second] : {std::pair{0, n - 1}, std::pair{1234, 1235}, std::pair{n - 2, n - 1}}) {
      std::vector<int32_t> repeated = perm;
      int32_t value = first == n - 2 ? n - 1 : 1234 + first % 7; // n - 1: the range's last value
      for (int32_t &v : repeated)
        if (v == value)
          v = -1; // nowhere else
      repeated[first] = repeated[second] = value;
      HostTensor bad = ints(repeated);
      expectThrowContaining<ArgumentError>(
          [&] {
            runOnCpu(*op, DType::F32, {}, {{"idx", bad.view()}, {"x", x.view()}});
          },
          {"tensor 'idx' must hold distinct values: " + std::to_string(value) + " is at elements " +
           std::to_string(first) + " and " + std::to_string(second)});
    }
  }
}

TEST(IndexData, TheFirstElementOutsideItsRangeIsNamed) {
  // Past the end, below the start, and both (the first one is named).
  auto op = uniqueScatter(" in [-1, N)");
  HostTensor x = iota(100, 2);
  for (auto [bad, message] : {std::pair<std::map<int, int32_t>, std::string>{{{37, 100}}, "element 37 is 100"},
                              {{{80, -2}}, "element 80 is -2"},
                              {{{37, 100}, {20, -2}}, "element 20 is -2"}}) {
    std::vector<int32_t> perm(100);
    std::iota(perm.begin(), perm.end(), 0);
    for (auto [i, v] : bad)
      perm[i] = v;
    HostTensor idx = ints(perm);
    expectThrowContaining<ArgumentError>(
        [&] {
          runOnCpu(*op, DType::F32, {}, {{"idx", idx.view()}, {"x", x.view()}});
        },
        {"tensor 'idx' " + message + ", outside the valid range [-1, 100)"});
  }
}
