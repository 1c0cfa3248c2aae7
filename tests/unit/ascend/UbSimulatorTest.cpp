//===- UbSimulatorTest.cpp - The checked UB: what it catches, what it counts ----===//
#include "moec/runtime/ascend/UbSimulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <thread>

namespace moec::ascend {
namespace {

Chip smallChip() {
  Chip c = builtinChip("910b");
  c.name = "small";
  c.vectorCores = 4;
  c.ubBytes = 4096;
  return c;
}

/// `what` throws a UbError whose message holds every one of `parts`.
void expectUbError(const std::function<void()> &what, const std::vector<std::string> &parts) {
  try {
    what();
    ADD_FAILURE() << "no error";
  } catch (const UbError &e) {
    for (const std::string &p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\n  lacks: " << p;
  }
}

// A gather-sum tiled by hand the way a plan lays it out (rows split over cores, each row in chunks that
// fit the UB: an input buffer, an f32 accumulator), run on 4 cores: the result matches a plain loop,
// every row is finished once, and the counts are those of the plan.
TEST(UbSimulator, RunsATiledGatherSumAndCountsItsCopies) {
  Chip chip = smallChip();
  const int64_t tokens = 37, k = 3, h = 700, chunk = 256, cores = 4; // 700 = 256 + 256 + 188
  std::mt19937 rng(7);
  std::vector<float> x(size_t(tokens * k * h));
  std::vector<int32_t> index(size_t(tokens * k));
  for (float &v : x)
    v = std::uniform_real_distribution<float>(-1, 1)(rng);
  for (int32_t &i : index)
    i = int32_t(rng() % uint32_t(tokens * k));
  std::vector<float> out(size_t(tokens * h), -1), expected(size_t(tokens * h), 0);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t e = 0; e < h; ++e)
        expected[size_t(t * h + e)] += x[size_t(index[size_t(t * k + j)] * h + e)];

  UbSimulator sim(chip, cores, tokens);
  sim.addGlobal("x", x.data(), int64_t(x.size() * 4));
  sim.addGlobal("out", out.data(), int64_t(out.size() * 4));
  std::vector<std::thread> threads;
  for (int64_t c = 0; c < cores; ++c)
    threads.emplace_back([&, c] {
      uint8_t *in = sim.place(c, "in.x", 0, chunk * 4);
      auto *acc = reinterpret_cast<float *>(sim.place(c, "acc.f32", chunk * 4, chunk * 4));
      int64_t per = tokens / cores, former = tokens % cores;
      int64_t begin = c * per + std::min(c, former), end = begin + per + (c < former ? 1 : 0);
      for (int64_t t = begin; t < end; ++t) {
        for (int64_t h0 = 0; h0 < h; h0 += chunk) {
          int64_t len = std::min(chunk, h - h0);
          std::fill(acc, acc + len, 0.0f);
          for (int64_t j = 0; j < k; ++j) {
            sim.copyIn(c, in, &x[size_t(index[size_t(t * k + j)] * h + h0)], len * 4);
            for (int64_t e = 0; e < len; ++e)
              acc[e] += reinterpret_cast<float *>(in)[e];
          }
          sim.copyOut(c, &out[size_t(t * h + h0)], reinterpret_cast<uint8_t *>(acc), len * 4);
        }
        sim.finishRow(c, t);
      }
      sim.release(c, "in.x");
      sim.release(c, "acc.f32");
    });
  for (std::thread &t : threads)
    t.join();
  sim.finish();
  EXPECT_EQ(out, expected);
  int64_t copies = 0, in = 0, outBytes = 0, rows = 0;
  for (int64_t c = 0; c < cores; ++c) {
    copies += sim.stats(c).dataCopies;
    in += sim.stats(c).bytesIn;
    outBytes += sim.stats(c).bytesOut;
    rows += sim.stats(c).rows;
    EXPECT_EQ(sim.stats(c).peakUbBytes, 2 * chunk * 4);
  }
  EXPECT_EQ(copies, tokens * 3 * (k + 1)); // 3 chunks a row: k gathers and one write each
  EXPECT_EQ(in, tokens * k * h * 4);
  EXPECT_EQ(outBytes, tokens * h * 4);
  EXPECT_EQ(rows, tokens);
}

TEST(UbSimulator, BuffersMustFitAlignedAndApart) {
  Chip chip = smallChip();
  UbSimulator sim(chip, 2, 4);
  expectUbError([&] { sim.place(0, "big", 0, 4097); }, {"core 0", "'big'", "not inside the 4096 B UB"});
  expectUbError([&] { sim.place(1, "tail", 4064, 64); }, {"core 1", "'tail'", "[4064, 4128)"});
  expectUbError([&] { sim.place(0, "odd", 16, 32); }, {"core 0", "'odd'", "offset 16 is not a multiple of 32 B"});
  sim.place(0, "a", 0, 1024);
  expectUbError([&] { sim.place(0, "b", 992, 64); }, {"core 0", "'b'", "overlaps live buffer 'a' [0, 1024)"});
  expectUbError([&] { sim.place(0, "a", 2048, 32); }, {"'a'", "already placed"});
  sim.place(1, "b", 992, 64); // another core's UB is its own
  sim.release(0, "a");
  sim.place(0, "b", 992, 64); // released: the space is free again
  expectUbError([&] { sim.release(0, "a"); }, {"core 0", "'a'", "released but not placed"});
  expectUbError([&] { sim.place(2, "c", 0, 32); }, {"no core 2"});
  expectUbError([] { UbSimulator(smallChip(), 5, 1); }, {"5 cores", "has 4"});
}

TEST(UbSimulator, CopiesMustStayInsideOneBufferAndOneTensor) {
  Chip chip = smallChip();
  UbSimulator sim(chip, 1, 1);
  std::vector<uint8_t> gm(256), other(64);
  sim.addGlobal("gm", gm.data(), 256);
  uint8_t *buf = sim.place(0, "in", 0, 128);
  sim.copyIn(0, buf, gm.data(), 128);
  expectUbError([&] { sim.copyIn(0, buf, gm.data(), 160); }, {"core 0", "runs past the end of UB buffer 'in'"});
  expectUbError([&] { sim.copyIn(0, buf + 32, gm.data() + 200, 64); }, {"runs past the end of GM tensor 'gm'"});
  expectUbError([&] { sim.copyIn(0, buf, other.data(), 32); }, {"the GM address is in no tensor"});
  expectUbError([&] { sim.copyIn(0, buf + 4, gm.data(), 32); }, {"UB offset 4 is not a multiple of 32 B"});
  expectUbError([&] { sim.copyOut(0, gm.data(), buf + 256, 32); }, {"UB offset 256 is in no live buffer"});
  expectUbError([&] { sim.copyOut(0, gm.data(), gm.data(), 32); }, {"not in this core's UB"});
  expectUbError([&] { sim.copyIn(0, buf, gm.data(), 0); }, {"at least one byte"});
  EXPECT_EQ(sim.stats(0).dataCopies, 1);
}

TEST(UbSimulator, EveryRowIsFinishedExactlyOnceAndEveryBufferReleased) {
  Chip chip = smallChip();
  {
    UbSimulator sim(chip, 2, 3);
    sim.finishRow(0, 0);
    sim.finishRow(1, 2);
    expectUbError([&] { sim.finishRow(1, 0); }, {"core 1", "row 0 finished a second time"});
    expectUbError([&] { sim.finishRow(0, 3); }, {"row 3 is not in [0, 3)"});
    expectUbError([&] { sim.finish(); }, {"row 0 was finished twice"});
  }
  {
    UbSimulator sim(chip, 2, 3);
    sim.finishRow(0, 0);
    sim.finishRow(0, 2);
    expectUbError([&] { sim.finish(); }, {"row 1 was never finished"});
  }
  {
    UbSimulator sim(chip, 2, 1);
    sim.finishRow(1, 0);
    sim.place(1, "left", 0, 32);
    expectUbError([&] { sim.finish(); }, {"core 1", "'left'", "still placed at the end"});
  }
}

} // namespace
} // namespace moec::ascend
