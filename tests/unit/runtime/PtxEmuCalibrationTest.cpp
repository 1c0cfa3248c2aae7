//===- PtxEmuCalibrationTest.cpp - The C++ estimate is the model that was fitted ===//
//
// bench/emu/calibrate.py fits the estimate's constants in Python (bench/emu/calibration_model.py) and writes
// them to Calibration.h, with every measured cell's estimate under them to bench/emu/calibration.json. Here
// each cell's counts (bench/emu/calibration/<commit>.jsonl, the emulator's profile of each launch) become
// Profiles again, and ptxemu::estimatedSeconds must give the cell's estimate, and ptxemu::boundSeconds its
// uncalibrated one: the two implementations of the model agree, and a change to either fails here.
//===----------------------------------------------------------------------===//
#include "moec/runtime/ptxemu/Emulator.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <string>
#include <tuple>

namespace moec::ptxemu {
namespace {

nlohmann::json readJson(const std::string &path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

Profile profileOf(const nlohmann::json &launch) {
  Profile p;
  p.kernel = launch.at("kernel").get<std::string>();
  auto dim = [](const nlohmann::json &d) { return Dim3{d[0].get<unsigned>(), d[1].get<unsigned>(), d[2].get<unsigned>()}; };
  p.grid = dim(launch.at("grid"));
  p.block = dim(launch.at("block"));
  p.blocks = launch.at("blocks").get<uint64_t>();
  p.blocksRun = launch.at("blocks_run").get<uint64_t>();
  // The bound reads only the total, so the whole count goes to one class.
  p.warpInstructions[0] = launch.at("warp_instructions").get<double>();
  p.globalLoadRequests = launch.at("load_requests").get<double>();
  p.globalStoreRequests = launch.at("store_requests").get<double>();
  p.loadSectors = launch.at("load_sectors").get<double>();
  p.storeSectors = launch.at("store_sectors").get<double>();
  p.loadBytes = launch.at("load_bytes").get<double>();
  p.storeBytes = launch.at("store_bytes").get<double>();
  p.warpCycles = launch.at("warp_cycles").get<double>();
  p.registers = launch.at("registers").get<unsigned>();
  return p;
}

// commit op dtype mode H E K
using CellKey = std::tuple<std::string, std::string, std::string, std::string, int64_t, int64_t, int64_t>;

TEST(PtxEmuCalibration, MatchesTheFit) {
  const std::string root = MOEC_SOURCE_DIR;
  nlohmann::json fit = readJson(root + "/bench/emu/calibration.json");
  std::map<CellKey, nlohmann::json> counts;
  for (const nlohmann::json &run : fit.at("runs")) {
    const std::string commit = run.at("commit").get<std::string>();
    std::ifstream lines(root + "/bench/emu/calibration/" + commit + ".jsonl");
    ASSERT_TRUE(lines.good()) << commit;
    for (std::string line; std::getline(lines, line);) {
      nlohmann::json j = nlohmann::json::parse(line);
      counts[{commit, j.at("op"), j.at("dtype"), j.at("mode"), j.at("H"), j.at("E"), j.at("K")}] = j;
    }
  }
  ASSERT_GT(fit.at("cells").size(), 50u);
  for (const nlohmann::json &cell : fit.at("cells")) {
    SCOPED_TRACE(cell.dump());
    auto it = counts.find(
        {cell.at("commit"), cell.at("op_name"), cell.at("dtype"), cell.at("mode"), cell.at("H"), cell.at("E"), cell.at("K")});
    ASSERT_NE(it, counts.end());
    std::vector<Profile> launches;
    for (const nlohmann::json &launch : it->second.at("launches")) {
      launches.push_back(profileOf(launch));
      EXPECT_EQ(residentWarpsPerSm(launches.back()), launch.at("warps_per_sm").get<unsigned>());
    }
    const double copySeconds = it->second.at("bytes").get<double>() / GpuModel{}.bandwidth;
    double estimate = 0;
    for (size_t i = 0; i < launches.size(); ++i)
      estimate += estimateFromCounts(launches[i], it->second.at("launches")[i].at("makespan_cycles").get<double>());
    // calibration.json rounds to a tenth of a point.
    EXPECT_NEAR(100 * copySeconds / estimate, cell.at("estimate").get<double>(), 0.0501);
    EXPECT_NEAR(100 * copySeconds / boundSeconds(launches), cell.at("uncalibrated").get<double>(), 0.0501);
  }
}

/// A launch of `blocks` blocks of 256 threads (8 warps) with no register count: 8 blocks an SM, 1,056 slots.
Profile launchOf(uint64_t blocks, std::vector<uint64_t> blockCycles) {
  Profile p;
  p.block = {256, 1, 1};
  p.grid = {unsigned(blocks), 1, 1};
  p.blocks = blocks;
  p.blocksRun = blockCycles.size();
  p.blockCycles = std::move(blockCycles);
  return p;
}

TEST(PtxEmuCalibration, MakespanHandsBlocksToFreeSlotsInGridOrder) {
  ASSERT_EQ(residentWarpsPerSm(launchOf(1, {1})), 64u);
  // One wave of 1,056 blocks, and one block more: a second wave.
  EXPECT_EQ(makespanCycles(launchOf(1056, std::vector<uint64_t>(1056, 100))), 100);
  EXPECT_EQ(makespanCycles(launchOf(1057, std::vector<uint64_t>(1057, 100))), 200);
  // A block ten times longer than the rest ends last, whatever the average says.
  std::vector<uint64_t> cycles(2112, 100);
  cycles[5] = 1000;
  EXPECT_EQ(makespanCycles(launchOf(2112, cycles)), 1000);
  // The last block starts when the first slot frees up: blocks 0..1055 end at 100, 1056.. start then.
  cycles[5] = 100;
  cycles[2111] = 1000;
  EXPECT_EQ(makespanCycles(launchOf(2112, cycles)), 1100);
  // Sampled: 2 blocks run stand for the two halves of a grid of 2,112 (first 1,056 take 100, then 300).
  EXPECT_EQ(makespanCycles(launchOf(2112, {100, 300})), 400);
  // Registers leave fewer slots: 255 registers a thread, one block of 8 warps an SM, 132 slots.
  Profile heavy = launchOf(264, std::vector<uint64_t>(264, 50));
  heavy.registers = 255;
  EXPECT_EQ(residentWarpsPerSm(heavy), 8u);
  EXPECT_EQ(makespanCycles(heavy), 100);
  EXPECT_EQ(makespanCycles(launchOf(10, {})), 0); // no cycles recorded
}

TEST(PtxEmuCalibration, EstimateOfALaunchIsItsCountsAndMakespan) {
  Profile p = launchOf(2112, std::vector<uint64_t>(2112, 100));
  p.loadSectors = 1e6;
  p.storeSectors = 5e5;
  p.warpInstructions[0] = 1e7;
  EXPECT_DOUBLE_EQ(estimatedSeconds(p), estimateFromCounts(p, 200));
  EXPECT_DOUBLE_EQ(estimatedSeconds(std::vector<Profile>{p, p}), 2 * estimateFromCounts(p, 200));
  EXPECT_GT(estimateFromCounts(p, 2e6), estimateFromCounts(p, 200)); // a longer tail costs time
}

TEST(PtxEmuCalibration, ErrorBandsAreTheHeldOutCells) {
  nlohmann::json fit = readJson(std::string(MOEC_SOURCE_DIR) + "/bench/emu/calibration.json");
  const nlohmann::json &held = fit.at("held_out");
  for (const auto &[op, band] : held.at("by_op_name").items()) {
    ErrorBand b = estimateErrorBand(op);
    EXPECT_EQ(b.op, op);
    EXPECT_EQ(b.cells, band.at("cells").get<int>());
    EXPECT_DOUBLE_EQ(b.meanAbs, band.at("mean_abs").get<double>());
    EXPECT_DOUBLE_EQ(b.worst, band.at("worst").get<double>());
    for (const nlohmann::json &run : fit.at("runs"))
      EXPECT_NE(b.source.find(run.at("commit").get<std::string>()), std::string::npos) << b.source;
  }
  ErrorBand other = estimateErrorBand("an_op_the_run_did_not_measure");
  EXPECT_EQ(other.op, "all");
  EXPECT_EQ(other.cells, held.at("all").at("cells").get<int>());
  EXPECT_DOUBLE_EQ(other.worst, held.at("all").at("worst").get<double>());
}

} // namespace
} // namespace moec::ptxemu
