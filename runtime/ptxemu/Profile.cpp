//===- Profile.cpp - Launch counts and the H200 time bound ----------------===//
#include "moec/contracts/Schedule.h"
#include "moec/runtime/ptxemu/Calibration.h"
#include "moec/runtime/ptxemu/Emulator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <queue>

namespace moec::ptxemu {

double Profile::totalWarpInstructions() const {
  double n = 0;
  for (double c : warpInstructions)
    n += c;
  return n;
}

void Profile::add(const Profile &o) {
  if (kernel.empty())
    kernel = o.kernel, grid = o.grid, block = o.block;
  blocks += o.blocks;
  blocksRun += o.blocksRun;
  for (int i = 0; i < kInstrClasses; ++i)
    warpInstructions[size_t(i)] += o.warpInstructions[size_t(i)];
  globalLoadRequests += o.globalLoadRequests;
  globalStoreRequests += o.globalStoreRequests;
  loadSectors += o.loadSectors;
  storeSectors += o.storeSectors;
  loadBytes += o.loadBytes;
  storeBytes += o.storeBytes;
  warpCycles += o.warpCycles;
  registers = std::max(registers, o.registers);
}

unsigned residentWarpsPerSm(const Profile &p) {
  uint64_t warpsPerBlock = std::max<uint64_t>(1, (p.block.count() + kWarpSize - 1) / kWarpSize);
  uint64_t blocks = std::min<uint64_t>(32, 64 / warpsPerBlock);
  if (p.registers) {
    uint64_t perWarp = (uint64_t(p.registers) * kWarpSize + 255) / 256 * 256; // allocated per warp in units of 256
    blocks = std::min<uint64_t>(blocks, 65536 / (perWarp * warpsPerBlock));
  }
  return unsigned(std::max<uint64_t>(blocks, 1) * warpsPerBlock);
}

double makespanCycles(const Profile &p, const GpuModel &gpu) {
  if (p.blockCycles.empty() || p.blocks == 0)
    return 0;
  const uint64_t warpsPerBlock = std::max<uint64_t>(1, (p.block.count() + kWarpSize - 1) / kWarpSize);
  const uint64_t slots = uint64_t(gpu.sms) * std::max<uint64_t>(1, residentWarpsPerSm(p) / warpsPerBlock);
  // A min-heap of the slots' free times; block b of the grid is run block b * run / blocks's stand-in.
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> freeAt;
  uint64_t end = 0;
  const uint64_t run = p.blockCycles.size();
  for (uint64_t b = 0; b < p.blocks; ++b) {
    uint64_t start = 0;
    if (freeAt.size() == slots) {
      start = freeAt.top();
      freeAt.pop();
    }
    uint64_t done = start + p.blockCycles[size_t((unsigned __int128)b * run / p.blocks)];
    freeAt.push(done);
    end = std::max(end, done);
  }
  return double(end);
}

double Bound::seconds() const { return std::sqrt(memory * memory + issue * issue + latency * latency); }

Bound bound(const Profile &p, const GpuModel &gpu) {
  Bound b;
  b.memory = p.sectorBytes() / gpu.bandwidth;
  b.issue = p.totalWarpInstructions() / (gpu.sms * gpu.issuePerSm * gpu.clock);
  double warps = double(p.blocks) * double((p.block.count() + kWarpSize - 1) / kWarpSize);
  double concurrent = std::min(warps, gpu.sms * residentWarpsPerSm(p));
  b.latency = concurrent > 0 ? p.warpCycles / concurrent / gpu.clock : 0;
  return b;
}

double boundSeconds(const Profile &p, const GpuModel &gpu) { return bound(p, gpu).seconds(); }

double boundSeconds(const std::vector<Profile> &launches, const GpuModel &gpu) {
  double seconds = 0;
  for (const Profile &p : launches)
    seconds += boundSeconds(p, gpu);
  return seconds;
}

double estimateFromCounts(const Profile &p, double makespan, const GpuModel &gpu) {
  namespace c = calibration;
  const double memory = 32 * (p.loadSectors + c::kStoreWeight * p.storeSectors) / (c::kEfficiency * gpu.bandwidth);
  const double rate = std::min(gpu.issuePerSm, residentWarpsPerSm(p) * c::kIssuePerWarp);
  const double issue = p.totalWarpInstructions() / (gpu.sms * rate * gpu.clock);
  const double latency = c::kLatencyScale * makespan / gpu.clock;
  const double biggest = std::max({memory, issue, latency});
  if (biggest <= 0)
    return 0;
  double sum = 0; // the norm of the three, scaled by the biggest so that a large norm does not overflow
  for (double t : {memory, issue, latency})
    sum += std::pow(t / biggest, c::kNorm);
  return biggest * std::pow(sum, 1 / c::kNorm);
}

double estimatedSeconds(const Profile &p, const GpuModel &gpu) {
  return estimateFromCounts(p, makespanCycles(p, gpu), gpu);
}

double estimatedSeconds(const std::vector<Profile> &launches, const GpuModel &gpu) {
  double seconds = 0;
  for (const Profile &p : launches)
    seconds += estimatedSeconds(p, gpu);
  return seconds;
}

ErrorBand estimateErrorBand(const std::string &op) {
  // calibrate.py writes every held-out cell together ("all") last.
  const calibration::Band &all = calibration::kHeldOut[std::size(calibration::kHeldOut) - 1];
  for (const calibration::Band &band : calibration::kHeldOut)
    if (op == band.op)
      return {band.op, band.cells, band.meanAbs, band.worst, calibration::kSource};
  return {all.op, all.cells, all.meanAbs, all.worst, calibration::kSource};
}

double boundFractionOfCopy(const Profile &p, double minimumBytes, const GpuModel &gpu) {
  double bound = boundSeconds(p, gpu);
  return bound > 0 ? (minimumBytes / gpu.bandwidth) / bound : 0;
}

std::string formatProfile(const Profile &p, double minimumBytes) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%s: grid (%u,%u,%u) block (%u,%u,%u)", p.kernel.c_str(), p.grid.x, p.grid.y,
                p.grid.z, p.block.x, p.block.y, p.block.z);
  out += line;
  if (p.sampled()) {
    std::snprintf(line, sizeof line, ", sampled %llu of %llu blocks (counts scaled)", (unsigned long long)p.blocksRun,
                  (unsigned long long)p.blocks);
    out += line;
  }
  out += "\n  warp instructions:";
  for (int i = 0; i < kInstrClasses; ++i)
    if (p.warpInstructions[size_t(i)] > 0) {
      std::snprintf(line, sizeof line, " %s %.0f,", className(InstrClass(i)), p.warpInstructions[size_t(i)]);
      out += line;
    }
  std::snprintf(line, sizeof line, " total %.0f\n", p.totalWarpInstructions());
  out += line;
  std::snprintf(line, sizeof line,
                "  global requests: %.0f loads, %.0f stores; sectors %.0f + %.0f (%.0f bytes); useful bytes %.0f; "
                "coalescing %.1f%%\n",
                p.globalLoadRequests, p.globalStoreRequests, p.loadSectors, p.storeSectors, p.sectorBytes(),
                p.usefulBytes(), 100 * p.coalescing());
  out += line;
  double minimum = minimumBytes > 0 ? minimumBytes : p.usefulBytes();
  GpuModel gpu;
  Bound b = bound(p, gpu);
  std::snprintf(line, sizeof line,
                "  H200 bound: %.2f us (memory %.2f us, issue %.2f us, latency %.2f us at %u warps per SM%s); %.1f%% "
                "of copy bandwidth for %.0f bytes\n",
                1e6 * b.seconds(), 1e6 * b.memory, 1e6 * b.issue, 1e6 * b.latency, residentWarpsPerSm(p),
                p.registers ? "" : ", registers unknown", 100 * boundFractionOfCopy(p, minimum), minimum);
  out += line;
  return out;
}

} // namespace moec::ptxemu
