//===- DefaultSchedule.cpp - The compiler's default schedule ---------------------===//
#include "moec/compiler/DefaultSchedule.h"

#include "llvm/TargetParser/Host.h"

#include <algorithm>

namespace moec {

static int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

int64_t hostVectorLanes() {
  static const int64_t lanes = [] {
    llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
    auto has = [&](const char *name) { return features.lookup(name); };
    return has("avx512f") ? 16 : has("avx") ? 8 : 4;
  }();
  return lanes;
}

Schedule chooseSchedule(Schedule s, TargetKind target, int64_t inner, int64_t elemBytes, bool vectorizable,
                        int64_t cpuLanes) {
  if (s.vector == 0) {
    if (!vectorizable || inner <= 1) {
      s.vector = 1;
    } else if (target == TargetKind::GPU) {
      // 16-byte accesses, narrowed until the width divides the row so every row start stays aligned.
      s.vector = std::max<int64_t>(1, 16 / elemBytes);
      while (s.vector > 1 && inner % s.vector != 0)
        s.vector /= 2;
    } else {
      // Ascend: one register of f32 accumulators. CPU: one register of elements, as many f32 lanes for
      // f32 (16 with AVX-512: sweeps of every op found 8 up to 1.3x slower there), twice as many for 16-bit
      // types (64-byte loads and stores, two independent f32 chains per step: bf16 C2 and B2 at 0.03-0.09
      // more of a memcpy at 7168 and 4096 wide rows). The remainder runs scalar.
      int64_t perRegister = target == TargetKind::CPU ? std::max<int64_t>(1, 4 / std::max<int64_t>(elemBytes, 1)) : 1;
      s.vector = std::min<int64_t>({std::max<int64_t>(cpuLanes, 1) * perRegister, kMaxCpuVector, inner});
      while (s.vector & (s.vector - 1))
        --s.vector;
    }
  }
  if (s.threads == 0) {
    int64_t lanes = inner > 0 ? (inner + s.vector - 1) / s.vector : 256;
    s.threads = target == TargetKind::GPU ? std::clamp<int64_t>(roundUp(lanes, 32), 32, 256) : 1;
  }
  // CPU: the least rows one worker takes at once, so a small batch is not spread thinner than that.
  if (s.rowsPerBlock == 0)
    s.rowsPerBlock = target == TargetKind::GPU ? std::max<int64_t>(1, 128 / s.threads) : 16;
  if (s.unroll == 0)
    s.unroll = 8;
  return s;
}

} // namespace moec
