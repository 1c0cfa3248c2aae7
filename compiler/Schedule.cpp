//===- Schedule.cpp - The compiler's default schedule ---------------------===//
#include "moec/compiler/Schedule.h"

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
      // One register of f32 accumulators (16 lanes with AVX-512: sweeps of every op found 8 up to 1.3x
      // slower there); the remainder runs scalar.
      s.vector = std::min<int64_t>(std::max<int64_t>(cpuLanes, 1), inner);
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
