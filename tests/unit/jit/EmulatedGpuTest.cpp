//===- EmulatedGpuTest.cpp - Every op's PTX, executed, against the CPU kernels ===//
//
// The GPU path end to end without a GPU: Runtime (target ptx) compiles the op, the PTX emulator loads it
// through the driver API, Kernel::launch binds, checks and launches it on emulated device memory. Outputs
// are compared with the CPU kernels on the same fresh random inputs (data outputs bit-exact, dot products
// within the f32 reordering bound) and with the plain C++ references of moec/cases/Cases.h. The shapes
// stress the launch geometry: H not a multiple of the vector width, one token, K = 1, E = 1, capacity
// drops, -1 slots, and explicit schedules.
//===----------------------------------------------------------------------===//
#include "moec/cases/Cases.h"

#include "moec/jit/Runtime.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/ptxemu/EmuDriver.h"

#include <gtest/gtest.h>

using namespace moec;
using namespace moec::gpucheck;

namespace {

Runtime &gpuRuntime() {
  static Runtime rt([] {
    Runtime::Options o;
    o.target = Target::ptx("sm_90");
    o.driver = &CudaDriver::emulator();
    return o;
  }());
  return rt;
}

Runtime &cpuRuntime() {
  static Runtime rt([] {
    Runtime::Options o;
    o.target = Target::cpu();
    return o;
  }());
  return rt;
}

/// Runs `c` on the emulated GPU and on the CPU with the same request; checks both against the reference
/// and against each other (bit-exact, except outputs with a bound).
void expectGpuMatchesCpu(const std::string &op, const KernelRequest &request, Case c) {
  SCOPED_TRACE(op + " " + dsl::dtypeName(request.dtype));
  Kernel gpu = gpuRuntime().get(op, request), cpu = cpuRuntime().get(op, request);
  DeviceCall call(CudaDriver::emulator(), c);
  ASSERT_NO_THROW(gpu.launch(call.tensors, nullptr, c.attrs));

  std::map<std::string, TensorView> host;
  std::map<std::string, HostTensor> cpuOut;
  for (auto &[name, t] : c.inputs)
    host[name] = t.view();
  for (auto &[name, t] : c.expected)
    host[name] = cpuOut.emplace(name, HostTensor(t.type(), t.dims())).first->second.view();
  cpu.launch(host, nullptr, c.attrs);

  for (const auto &[name, expected] : c.expected) {
    HostTensor got = call.download(name);
    auto [err, allowed] = outputError(c, name, got);
    EXPECT_GE(err, 0) << name << ": NaN where the reference has a number (an element never written?)";
    EXPECT_LE(err, allowed) << name << " against the reference";
    if (!c.bounds.count(name)) {
      ASSERT_EQ(got.bytes(), cpuOut.at(name).bytes());
      EXPECT_EQ(0, std::memcmp(got.raw(), cpuOut.at(name).raw(), got.bytes())) << name << ": GPU and CPU differ";
    } else {
      auto [cpuErr, cpuAllowed] = outputError(c, name, cpuOut.at(name));
      EXPECT_LE(cpuErr, cpuAllowed) << name << " (CPU) against the reference";
    }
  }
}

KernelRequest b2Request(DType dtype, int64_t K, int64_t H, int dropPad, Schedule s = {}) {
  KernelRequest r;
  r.dtype = dtype;
  r.dims = {{"H", H}};
  r.attrs = {{"top_k", K}, {"drop_pad_mode", dropPad}};
  r.schedule = s;
  return r;
}

KernelRequest a3Request(DType dtype, int64_t E, int64_t H, bool pad, const Case &c, Schedule s = {}) {
  KernelRequest r;
  r.dtype = dtype;
  r.dims = {{"E", E}, {"H", H}};
  r.attrs = {{"drop_and_pad", pad}};
  for (const char *optional : {"routing_map", "permuted_tokens", "probs"})
    if (c.inputs.count(optional))
      r.with.insert(optional);
  r.schedule = s;
  return r;
}

KernelRequest c2Request(DType dtype, int64_t E, int64_t K, int64_t H, bool weighted, Schedule s = {},
                        bool mixPrecision = true) {
  KernelRequest r;
  r.dtype = dtype;
  r.dims = {{"E", E}, {"K", K}, {"H", H}};
  r.attrs = {{"using_weighted_combine", weighted}, {"using_mix_precision", mixPrecision}};
  r.schedule = s;
  return r;
}

constexpr DType kDtypes[] = {DType::BF16, DType::F16, DType::F32};

std::mt19937 &rng() {
  static std::mt19937 r(std::random_device{}());
  return r;
}

} // namespace

TEST(EmulatedGpu, InitRoutingV2Grad) {
  for (DType dt : kDtypes)
    for (int64_t H : {1, 7, 72, 130})
      for (int64_t N : {1, 37})
        for (int64_t K : {1, 3}) {
          SCOPED_TRACE("H=" + std::to_string(H) + " N=" + std::to_string(N) + " K=" + std::to_string(K));
          expectGpuMatchesCpu("moe_init_routing_v2_grad", b2Request(dt, K, H, 0),
                              initRoutingGrad(dt, N, K, H, 0, false, rng()));
          expectGpuMatchesCpu("moe_init_routing_v2_grad", b2Request(dt, K, H, 1),
                              initRoutingGrad(dt, N, K, H, 1, false, rng()));
          if (N * K >= 2)
            expectGpuMatchesCpu("moe_init_routing_v2_grad", b2Request(dt, K, H, 0),
                                initRoutingGrad(dt, N, K, H, 0, true, rng()));
        }
}

TEST(EmulatedGpu, UnpermuteWithRoutingMapGrad) {
  for (DType dt : kDtypes)
    for (int64_t H : {1, 9, 72, 130})
      for (bool probs : {false, true}) {
        SCOPED_TRACE("H=" + std::to_string(H) + (probs ? " probs" : ""));
        for (int64_t T : {1, 37})
          for (int64_t E : {1, 8}) {
            Case c = unpermuteGradNonPad(dt, T, E, std::min<int64_t>(E, 3), H, probs, rng(), true, /*shuffledRows=*/H % 2);
            expectGpuMatchesCpu("moe_token_unpermute_with_routing_map_grad", a3Request(dt, E, H, false, c), std::move(c));
            Case p = unpermuteGradPad(dt, T, E, std::max<int64_t>(1, T / 3), H, probs, rng());
            expectGpuMatchesCpu("moe_token_unpermute_with_routing_map_grad", a3Request(dt, E, H, true, p), std::move(p));
          }
      }
}

/// A3 with a routing map (and probs, or not): T tokens each routed to K random experts of E (sorted: slot
/// t * K + k is the k-th), slots in a random order, a quarter of them dropped (-1).
Case routedCase(DType dt, int64_t T, int64_t K, int64_t E, int64_t H, bool probs) {
  const int64_t R = T * K;
  std::mt19937 &random = rng();
  HostTensor outIndex(DType::I32, {R}), tokenIds(DType::I32, {R}), map(DType::Bool, {T, E});
  std::iota(ints(outIndex), ints(outIndex) + R, 0);
  std::shuffle(ints(outIndex), ints(outIndex) + R, random);
  std::memcpy(tokenIds.raw(), outIndex.raw(), outIndex.bytes());
  std::vector<Slot> slots;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int64_t> experts(E);
    std::iota(experts.begin(), experts.end(), 0);
    std::shuffle(experts.begin(), experts.end(), random);
    experts.resize(K);
    std::sort(experts.begin(), experts.end());
    for (int64_t k = 0; k < K; ++k) {
      static_cast<uint8_t *>(map.raw())[t * E + experts[k]] = 1;
      if (random() % 4 == 0)
        ints(outIndex)[t * K + k] = -1;
      else
        slots.push_back({t, ints(outIndex)[t * K + k], experts[k]});
    }
  }
  return unpermuteGradCase(dt, T, E, H, probs, false, slots, std::move(outIndex), std::move(tokenIds), std::move(map),
                           random, true);
}

/// A3's data gradient on case `c` runs as row groups (moe-group-rows), and matches the reference and, bit
/// for bit, the CPU kernel.
void expectA3RunsAsGroups(DType dt, int64_t E, int64_t H, bool pad, Case c) {
  KernelRequest request = a3Request(dt, E, H, pad, c);
  const LoadedOp &loaded = gpuRuntime().get("moe_token_unpermute_with_routing_map_grad", request).specialization();
  EXPECT_TRUE(std::any_of(loaded.kernels.begin(), loaded.kernels.end(), [](const KernelMeta &k) { return k.rowGroups; }))
      << "the data gradient's slots no longer run as groups";
  expectGpuMatchesCpu("moe_token_unpermute_with_routing_map_grad", request, std::move(c));
}

// moe-group-rows: A3's slots of a token run as one block's group, 16 slots at a time, the token's gradient
// read once per vector for all of them. K = 33 and 40 take a third, partly filled run (a third block); experts
// chosen at random among K + 3; dropped slots (-1) store nothing (their rows stay the fill's zeros); H = 9 and 520
// leave lanes past the row's end in the last trip along it. Against the reference, and bit for bit against the CPU
// kernel.
TEST(EmulatedGpu, GroupedRowsStoreEveryLiveSlotOnce) {
  for (DType dt : {DType::BF16, DType::F32})
    for (int64_t K : {1, 33, 40})
      for (int64_t H : {9, 72, 520}) {
        SCOPED_TRACE("K=" + std::to_string(K) + " H=" + std::to_string(H));
        expectA3RunsAsGroups(dt, K + 3, H, false, routedCase(dt, 5, K, K + 3, H, /*probs=*/false));
      }
}

/// A3 drop-and-pad on 23 tokens, E = 4 experts of capacity 19 (R = 76 slots: four full groups of 16 rows and a
/// partial one; nine full runs of 8 points and a partial one): an expert's 19 slots hold 19 distinct tokens; slots
/// sorted by token (the forward op's order: runs of a token) or shuffled (a new token at nearly every slot); a fifth
/// dropped (-1: its row stays the fill's zeros).
Case padCaseByToken(DType dt, int64_t H, bool sorted, bool probs, std::mt19937 &random) {
  const int64_t T = 23, E = 4, C = 19, R = E * C;
  std::vector<int32_t> tokenOfRow(R), tokens(T);
  std::iota(tokens.begin(), tokens.end(), 0);
  for (int64_t e = 0; e < E; ++e) {
    std::shuffle(tokens.begin(), tokens.end(), random);
    std::copy_n(tokens.begin(), C, tokenOfRow.begin() + e * C);
  }
  HostTensor outIndex(DType::I32, {R}), tokenIds(DType::I32, {R});
  std::iota(ints(outIndex), ints(outIndex) + R, 0);
  if (sorted)
    std::sort(ints(outIndex), ints(outIndex) + R, [&](int32_t a, int32_t b) {
      return std::make_pair(tokenOfRow[a], a) < std::make_pair(tokenOfRow[b], b);
    });
  else
    std::shuffle(ints(outIndex), ints(outIndex) + R, random);
  std::vector<Slot> slots;
  for (int64_t i = 0; i < R; ++i) {
    int32_t row = ints(outIndex)[i];
    ints(tokenIds)[i] = tokenOfRow[row];
    if (random() % 5 == 0)
      ints(outIndex)[i] = -1;
    else
      slots.push_back({tokenOfRow[row], row, row / C});
  }
  return unpermuteGradCase(dt, T, E, H, probs, true, slots, std::move(outIndex), std::move(tokenIds),
                           HostTensor(DType::Bool, {T, E}), random, true);
}

// moe-group-rows with keys: A3's drop-and-pad slots i copy token permute_token_id[i]'s gradient row, and a
// block's run of 16 slots loads it again only where the token (or whether the slot is dropped) changes from
// the slot before (padCaseByToken: sorted and shuffled slots); H = 9 and 520 leave lanes past the row's end.
// Against the reference, and bit for bit against the CPU kernel.
TEST(EmulatedGpu, KeyedGroupsReloadWhereTheTokenChanges) {
  for (DType dt : {DType::BF16, DType::F32})
    for (bool sorted : {true, false})
      for (int64_t H : {9, 72, 520}) {
        SCOPED_TRACE(std::string(sorted ? "sorted" : "shuffled") + " H=" + std::to_string(H));
        expectA3RunsAsGroups(dt, 4, H, true, padCaseByToken(dt, H, sorted, false, rng()));
      }
}

/// Every output of `op` on the emulated GPU for case `c`.
std::map<std::string, HostTensor> gpuOutputs(const std::string &op, const KernelRequest &request, const Case &c) {
  DeviceCall call(CudaDriver::emulator(), c);
  gpuRuntime().get(op, request).launch(call.tensors, nullptr, c.attrs);
  std::map<std::string, HostTensor> out;
  for (const auto &[name, expected] : c.expected)
    out.emplace(name, call.download(name));
  return out;
}

/// `a` and `b` (outputs of the same case) hold the same bytes, output by output.
void expectSameOutputs(const std::map<std::string, HostTensor> &a, const std::map<std::string, HostTensor> &b) {
  for (const auto &[name, tensor] : b) {
    ASSERT_EQ(a.at(name).bytes(), tensor.bytes()) << name;
    EXPECT_EQ(std::memcmp(a.at(name).raw(), tensor.raw(), tensor.bytes()), 0) << name << " differs";
  }
}

/// A3's probs_grad on case `c` runs rows of points (moe-group-points; `runs`: a one-dim domain's runs of
/// points; `rowsOfPoints` its schedule), and matches, bit for bit, a warp per point (the optimization off),
/// then the reference and the CPU kernel.
void expectA3RunsAsPointRows(DType dt, int64_t E, int64_t H, bool pad, bool runs, Case c, Schedule rowsOfPoints = {}) {
  const std::string op = "moe_token_unpermute_with_routing_map_grad";
  Schedule perPoint;
  perPoint.disabled = kGroupPoints;
  KernelRequest grouped = a3Request(dt, E, H, pad, c, rowsOfPoints), plain = a3Request(dt, E, H, pad, c, perPoint);
  auto kernelsThat = [&](const KernelRequest &request, bool KernelMeta::*flag) {
    const LoadedOp &loaded = gpuRuntime().get(op, request).specialization();
    return std::count_if(loaded.kernels.begin(), loaded.kernels.end(), [&](const KernelMeta &k) { return k.*flag; });
  };
  EXPECT_EQ(kernelsThat(grouped, &KernelMeta::pointPerWarp), 0) << "probs_grad no longer runs rows of points";
  EXPECT_EQ(kernelsThat(grouped, &KernelMeta::pointRuns), runs ? 1 : 0);
  EXPECT_EQ(kernelsThat(plain, &KernelMeta::pointPerWarp), 1);
  expectSameOutputs(gpuOutputs(op, grouped, c), gpuOutputs(op, plain, c));
  expectGpuMatchesCpu(op, grouped, std::move(c));
}

// moe-group-points: A3's probs_grad runs a token's experts on one warp, the dot products of up to 8
// routed ones together, the token's gradient row loaded once per vector for all of them. K = 1 and 3 leave
// a partly filled batch at the row's end, 8 fills one, 11 and 17 take a second and a third; a quarter of
// the slots dropped (-1); experts chosen at random among K + 6; H = 9 and 100 leave lanes past the row's
// end.
TEST(EmulatedGpu, PointRowsRunTheirDotProductsTogether) {
  for (DType dt : {DType::BF16, DType::F32})
    for (int64_t K : {1, 3, 8, 11, 17})
      for (int64_t H : {9, 100, 520}) {
        SCOPED_TRACE("K=" + std::to_string(K) + " H=" + std::to_string(H));
        expectA3RunsAsPointRows(dt, K + 6, H, false, false, routedCase(dt, 5, K, K + 6, H, /*probs=*/true));
      }
}

// A row of points runs 32 points at a time, a lane each, and the live ones' dot products in order;
// moe-lane-point-access makes the slot count a warp-wide scan, continued from the 32 experts before (off:
// each lane counts its own). E = 32 is one full warp of experts, 33 leaves one in a second, 70 a partial
// third; the next 32 experts start with the routed ones' dot products still waiting.
TEST(EmulatedGpu, LanePointAccessCoversEveryWarpOfPoints) {
  Schedule unscanned;
  unscanned.disabled = kLanePointAccess;
  for (DType dt : {DType::BF16, DType::F32})
    for (int64_t E : {32, 33, 70})
      for (int64_t K : {2, 9})
        for (bool scan : {true, false}) {
          SCOPED_TRACE("E=" + std::to_string(E) + " K=" + std::to_string(K) + (scan ? " scan" : " no scan"));
          expectA3RunsAsPointRows(dt, E, 72, false, false, routedCase(dt, 6, K, E, 72, /*probs=*/true),
                                  scan ? Schedule{} : unscanned);
        }
}

// moe-group-points with keys: A3's drop-and-pad probs_grad runs over slots i, the dot product of slot i's
// row with token permute_token_id[i]'s gradient row; a warp takes a run of 8 slots, and a batch of up to
// 8 live slots shares one token (a live slot of another token runs the waiting ones first), its row
// loaded once per vector (padCaseByToken: sorted and shuffled slots); H = 9 and 520 leave lanes past the
// row's end.
TEST(EmulatedGpu, KeyedPointRunsShareOneTokensRow) {
  for (DType dt : {DType::BF16, DType::F32})
    for (bool sorted : {true, false})
      for (int64_t H : {9, 72, 520}) {
        SCOPED_TRACE(std::string(sorted ? "sorted" : "shuffled") + " H=" + std::to_string(H));
        expectA3RunsAsPointRows(dt, 4, H, true, true, padCaseByToken(dt, H, sorted, true, rng()));
      }
}

// A warp's run of slots starts where a token's slots start (emitKeyAlignedRun): it takes the tokens whose first
// slot is among its 8, up to 8 slots past them. Tokens 0 and 1 hold a slot in each of 24 experts (runs of 24,
// longer than a warp's run and the 8 past it: split), the other 28 tokens a random 8 of 24 experts' other
// slots (runs of about 1 to 13, starting anywhere in a run of 8); slots sorted by token, a fifth dropped.
// Every slot runs once: bit for bit the same as a warp per slot, and as the CPU kernel.
TEST(EmulatedGpu, PointRunsStartWhereATokensSlotsStart) {
  const int64_t T = 30, E = 24, C = 10, R = E * C;
  for (DType dt : {DType::BF16, DType::F32})
    for (int64_t H : {9, 520}) {
      SCOPED_TRACE("H=" + std::to_string(H));
      std::vector<int32_t> tokenOfRow(R), others(T - 2);
      std::iota(others.begin(), others.end(), 2);
      for (int64_t e = 0; e < E; ++e) {
        std::shuffle(others.begin(), others.end(), rng());
        tokenOfRow[e * C] = 0;
        tokenOfRow[e * C + 1] = 1;
        std::copy_n(others.begin(), C - 2, tokenOfRow.begin() + e * C + 2);
      }
      expectA3RunsAsPointRows(dt, E, H, true, true,
                              padCaseFromRows(dt, T, E, H, /*probs=*/true, tokenOfRow, rng(), true, /*dropOneIn=*/5));
    }
}

TEST(EmulatedGpu, MoeUnpermute) {
  for (DType dt : kDtypes)
    for (int64_t H : {1, 9, 72, 130})
      for (bool weighted : {false, true})
        for (int64_t T : {1, 37})
          for (auto [E, K] : {std::pair<int64_t, int64_t>{1, 1}, {8, 1}, {8, 4}, {2, 4}}) { // K > E: -1 slots
            SCOPED_TRACE("H=" + std::to_string(H) + " T=" + std::to_string(T) + " E=" + std::to_string(E) +
                         " K=" + std::to_string(K) + (weighted ? " weighted" : ""));
            expectGpuMatchesCpu("moe_unpermute", c2Request(dt, E, K, H, weighted),
                                paddleUnpermute(dt, T, E, K, H, weighted, rng()));
          }
}

TEST(EmulatedGpu, ExplicitSchedules) {
  // --threads / --rows-per-block / --vector variants: each must cover every element exactly once.
  for (Schedule s : {Schedule{1, 32, 1, 0}, Schedule{2, 64, 4, 0}, Schedule{8, 32, 2, 0}, Schedule{4, 128, 1, 0},
                     Schedule{1, 1024, 8, 0}, Schedule{32, 32, 16, 0}, Schedule{4, 64, 16, 3}}) {
    SCOPED_TRACE("vector " + std::to_string(s.vector) + " threads " + std::to_string(s.threads) + " rows " +
                 std::to_string(s.rowsPerBlock));
    for (DType dt : {DType::BF16, DType::F32}) {
      expectGpuMatchesCpu("moe_init_routing_v2_grad", b2Request(dt, 2, 130, 0, s),
                          initRoutingGrad(dt, 37, 2, 130, 0, false, rng()));
      Case c = unpermuteGradNonPad(dt, 37, 8, 3, 72, true, rng());
      expectGpuMatchesCpu("moe_token_unpermute_with_routing_map_grad", a3Request(dt, 8, 72, false, c, s), std::move(c));
      expectGpuMatchesCpu("moe_unpermute", c2Request(dt, 8, 2, 130, true, s), paddleUnpermute(dt, 37, 8, 2, 130, true, rng()));
    }
  }
}

/// The kernel's status words (per bounds check: failing dim + 1, then the index) after a launch.
std::vector<int64_t> statusWords(const Kernel &k) {
  const LoadedOp &l = k.specialization();
  std::vector<int64_t> words(l.deviceStatus->size() / sizeof(int64_t));
  CudaDriver::emulator().check(CudaDriver::emulator().api().memcpyDtoH(words.data(), l.deviceStatus->pointer(),
                                                                       l.deviceStatus->size()),
                               "cuMemcpyDtoH");
  return words;
}

/// Launches `c` with index tensor `tensor`'s element `at` set to `bad`, and expects no fault (the emulator
/// stops at any access outside the allocations) and, when `flagged`, the index in the status buffer.
void launchWithBadIndex(const std::string &op, const KernelRequest &request, Case c, const std::string &tensor,
                        int64_t at, int32_t bad, bool flagged) {
  SCOPED_TRACE(op + ": " + tensor + "[" + std::to_string(at) + "] = " + std::to_string(bad));
  ints(c.inputs.at(tensor))[at] = bad;
  Kernel k = gpuRuntime().get(op, request);
  DeviceCall call(CudaDriver::emulator(), c);
  ASSERT_NO_THROW(k.launch(call.tensors, nullptr, c.attrs));
  std::vector<int64_t> status = statusWords(k);
  bool named = std::find(status.begin(), status.end(), bad) != status.end();
  EXPECT_EQ(named, flagged) << "status words: " << ::testing::PrintToString(status);
  std::vector<int64_t> zeros(status.size()); // the buffer is sticky until read: clear it for the next launch
  const LoadedOp &l = k.specialization();
  CudaDriver::emulator().api().memcpyHtoD(l.deviceStatus->pointer(), zeros.data(), l.deviceStatus->size());
}

TEST(EmulatedGpu, OutOfRangeIndicesNeverReachMemory) {
  // Index tensors with values outside their declared ranges, passed on the device where the runtime does
  // not read them (MOEC_CHECK_INDICES unset): the compiler's bounds checks must skip every such gather and
  // scatter and report the index. A negative row where the op means "no row" is skipped by the op itself.
  for (int32_t bad : {1 << 30, -7}) {
    launchWithBadIndex("moe_init_routing_v2_grad", b2Request(DType::BF16, 2, 72, 0),
                       initRoutingGrad(DType::BF16, 9, 2, 72, 0, false, rng()), "expanded_row_idx", 5, bad, true);
    Case a3 = unpermuteGradNonPad(DType::F32, 9, 8, 3, 72, true, rng());
    KernelRequest a3r = a3Request(DType::F32, 8, 72, false, a3);
    launchWithBadIndex("moe_token_unpermute_with_routing_map_grad", a3r, std::move(a3), "out_index", 4, bad, bad > 0);
    Case pad = unpermuteGradPad(DType::BF16, 9, 8, 3, 72, true, rng());
    KernelRequest padr = a3Request(DType::BF16, 8, 72, true, pad);
    const int32_t *outIndex = ints(pad.inputs.at("out_index"));
    int64_t kept = std::find_if(outIndex, outIndex + pad.inputs.at("out_index").elements(),
                                [](int32_t row) { return row >= 0; }) - outIndex; // a slot whose token is read
    launchWithBadIndex("moe_token_unpermute_with_routing_map_grad", padr, std::move(pad), "permute_token_id", kept,
                       bad, true);
    launchWithBadIndex("moe_unpermute", c2Request(DType::BF16, 8, 2, 72, true),
                       paddleUnpermute(DType::BF16, 9, 8, 2, 72, true, rng()), "zipped_expertwise_rowmap", 3, bad,
                       bad > 0);
    launchWithBadIndex("moe_unpermute", c2Request(DType::BF16, 8, 2, 72, true),
                       paddleUnpermute(DType::BF16, 9, 8, 2, 72, true, rng()), "expert_routemap_topk", 1, bad, bad > 0);
  }
}

TEST(EmulatedGpu, ProductionShapesAtFewTokens) {
  // The kernels bench/gpu times (spec §8.1, DeepSeek-V3: H 7168, top-8 of 256 experts), at 3 tokens.
  const int64_t H = 7168, E = 256, K = 8, T = 3;
  for (DType dt : {DType::BF16}) { // the other dtypes' kernels differ only in element width, tested above
    expectGpuMatchesCpu("moe_init_routing_v2_grad", b2Request(dt, K, H, 0), initRoutingGrad(dt, T, K, H, 0, false, rng()));
    expectGpuMatchesCpu("moe_init_routing_v2_grad", b2Request(dt, K, H, 1), initRoutingGrad(dt, T, K, H, 1, false, rng()));
    for (bool probs : {false, true}) {
      Case c = unpermuteGradNonPad(dt, T, E, K, H, probs, rng());
      expectGpuMatchesCpu("moe_token_unpermute_with_routing_map_grad", a3Request(dt, E, H, false, c), std::move(c));
      Case p = unpermuteGradPad(dt, T, E, 2, H, probs, rng());
      expectGpuMatchesCpu("moe_token_unpermute_with_routing_map_grad", a3Request(dt, E, H, true, p), std::move(p));
    }
    for (bool weighted : {false, true})
      expectGpuMatchesCpu("moe_unpermute", c2Request(dt, E, K, H, weighted), paddleUnpermute(dt, T, E, K, H, weighted, rng()));
  }
}

TEST(EmulatedGpu, MixtralProbsKernelsAtFewTokens) {
  // A3 with probs at Mixtral's shape (H 4096, top-2 of 8 experts): a token's 8 experts are one chunk of a
  // warp's lanes (the waiting points stay in their lanes), its 2 routed ones a batch of 2 whose loop along
  // H is unrolled for loads in flight (16 steps of 256, 4 at a time); drop-and-pad's slots run the same way.
  // Bit for bit the same with the unroll off (loads-in-flight), and as the CPU kernels.
  const std::string op = "moe_token_unpermute_with_routing_map_grad";
  const int64_t H = 4096, E = 8, K = 2, T = 5;
  Schedule noUnroll;
  noUnroll.disabled = kLoadsInFlight;
  for (DType dt : {DType::BF16, DType::F32})
    for (bool pad : {false, true}) {
      SCOPED_TRACE(std::string(dsl::dtypeName(dt)) + (pad ? " drop_and_pad" : " non-pad"));
      Case c = pad ? unpermuteGradPad(dt, T, E, 2, H, /*probs=*/true, rng())
                   : unpermuteGradNonPad(dt, T, E, K, H, /*probs=*/true, rng());
      expectSameOutputs(gpuOutputs(op, a3Request(dt, E, H, pad, c), c),
                        gpuOutputs(op, a3Request(dt, E, H, pad, c, noUnroll), c));
      expectGpuMatchesCpu(op, a3Request(dt, E, H, pad, c), std::move(c));
    }
}

// C2 at Mixtral's 8 experts: the fold over a token's experts is a short list (short-lists), and the loop
// along H runs in a version per power of two of live experts (none, 2, 4, 8), each thread's 2 steps along
// H = 4096 unrolled (moe-unroll-row-loops). Token t is routed to t % 9 experts, so every version runs, full
// and partly filled. Bit for bit the same with both off, and as the CPU kernels. Without mixed precision the
// GPU's fold keeps its accumulator in the dtype, rounded after every add (or fma): a short list all the same.
TEST(EmulatedGpu, ShortListVersionsAtEveryCount) {
  const int64_t H = 4096, E = 8, K = 8, T = 27;
  Schedule plain;
  plain.disabled = kShortLists | kLoadsInFlight;
  for (DType dt : {DType::BF16, DType::F16, DType::F32})
    for (bool weighted : {false, true})
      for (bool mix : {true, false}) {
        if (dt == DType::F16 && mix)
          continue; // as bf16's
        SCOPED_TRACE(std::string(dsl::dtypeName(dt)) + (weighted ? " weighted" : "") + (mix ? "" : " in the dtype"));
        Case c = paddleUnpermute(dt, T, E, K, H, weighted, rng(), /*reference=*/true, /*everyCount=*/true, mix);
        expectSameOutputs(gpuOutputs("moe_unpermute", c2Request(dt, E, K, H, weighted, {}, mix), c),
                          gpuOutputs("moe_unpermute", c2Request(dt, E, K, H, weighted, plain, mix), c));
        expectGpuMatchesCpu("moe_unpermute", c2Request(dt, E, K, H, weighted, {}, mix), std::move(c));
      }
}

TEST(EmulatedGpu, NothingLeaksOnTheDevice) {
  size_t before = ptxemu::allocatedBytes();
  expectGpuMatchesCpu("moe_unpermute", c2Request(DType::BF16, 8, 2, 72, false),
                      paddleUnpermute(DType::BF16, 5, 8, 2, 72, false, rng()));
  // The kernel's status buffer stays allocated with the loaded op; the call's buffers are gone.
  EXPECT_LE(ptxemu::allocatedBytes(), before + 4096);
}
