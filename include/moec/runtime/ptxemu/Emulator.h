//===- Emulator.h - Executes a PTX kernel launch on the CPU -----*- C++ -*-===//
//
// Functional execution of a launch, warp by warp: 32 lanes in lockstep under an active mask, divergent
// branches reconverging at their immediate post-dominator, shfl.sync / vote.sync / bar.sync with the PTX
// ISA's rules. Like compute-sanitizer it stops at an access outside every allocation, a misaligned
// access, or a read of a register no instruction wrote, with a message naming the kernel, the PTX line,
// the block and the thread. Each launch also yields a profile: warp instructions by class, global memory
// requests, 32-byte sectors and the bytes they carry, each warp's cycles on a latency model of its
// instruction stream, and from them an H200 time bound.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/runtime/CudaTypes.h"
#include "moec/runtime/ptxemu/Ptx.h"

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace moec::ptxemu {

/// A launch the emulator stopped; code() is what the driver returns (CUDA_ERROR_ILLEGAL_ADDRESS, ...).
class EmuFault : public std::runtime_error {
public:
  EmuFault(CUresult code, const std::string &message) : std::runtime_error(message), result(code) {}
  CUresult code() const { return result; }

private:
  CUresult result;
};

/// The emulated device's global memory: allocations at addresses of their own (never host addresses),
/// separated by unmapped gaps so a one-past-the-end access is caught.
class DeviceMemory {
public:
  /// A zero-filled allocation; 0 when `bytes` exceeds `limitBytes` in all.
  uint64_t allocate(size_t bytes);
  /// False when `address` is not the start of an allocation.
  bool release(uint64_t address);
  /// Host memory for [address, address + bytes) when one allocation holds all of it, else null.
  uint8_t *find(uint64_t address, size_t bytes);
  size_t allocatedBytes() const { return total; }
  /// All allocations together stay below this: half the host's memory (the emulated device's memory is the
  /// host's, zero-filled at allocation, so a larger one would wake the OOM killer instead of failing).
  size_t limitBytes = defaultLimitBytes();
  static size_t defaultLimitBytes();

private:
  struct Allocation {
    size_t bytes;
    std::unique_ptr<uint8_t[]> data;
  };
  std::map<uint64_t, Allocation> allocations; // by base address
  uint64_t lastBase = 0, lastBytes = 0;        // the allocation find() hit last (most accesses hit it again)
  uint8_t *lastData = nullptr;
  uint64_t nextAddress = uint64_t(1) << 36;
  size_t total = 0;
};

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t(x) * y * z; }
};

/// Counts for one launch (scaled to the whole grid when only a sample of blocks ran).
struct Profile {
  std::string kernel;
  Dim3 grid, block;
  uint64_t blocks = 0, blocksRun = 0;       // blocksRun < blocks: sampled, counts scaled by blocks / blocksRun
  std::array<double, kInstrClasses> warpInstructions{};
  double globalLoadRequests = 0, globalStoreRequests = 0;
  double loadSectors = 0, storeSectors = 0; // 32-byte sectors touched per request, summed over requests
  double loadBytes = 0, storeBytes = 0;     // distinct bytes the lanes of each request asked for, summed
  double warpCycles = 0;                    // each warp's cycles on the latency model's timeline, summed
  unsigned registers = 0;                   // registers per thread, as ptxas allocates them (0: unknown)
  std::vector<uint64_t> blockCycles;        // each block run's cycles (its slowest warp's), in the order run

  double totalWarpInstructions() const;
  double sectorBytes() const { return 32 * (loadSectors + storeSectors); }
  double usefulBytes() const { return loadBytes + storeBytes; }
  /// Useful bytes over the bytes of the sectors they sit in: 1.0 when every request is perfectly coalesced.
  double coalescing() const { return sectorBytes() > 0 ? usefulBytes() / sectorBytes() : 1.0; }
  bool sampled() const { return blocksRun < blocks; }
  void add(const Profile &other); // sums the counts of several launches (blockCycles stays a launch's own)
};

/// The latency model's cycles (see Bound): from issue to result for a global load (an H200's under
/// load), a shared-memory load, a shuffle or vote, and any other instruction; and the cycles a warp loses at
/// each branch. Fitted to the H200 runs of bench/gpu/RESULTS.md (bench/emu/RESULTS.md).
constexpr uint64_t kGlobalLoadCycles = 900, kSharedLoadCycles = 30, kWarpOpCycles = 24, kAluCycles = 6,
                   kBranchCycles = 10;

/// The H200 figures of the time bound.
struct GpuModel {
  double bandwidth = 4.3e12;      // HBM3e bytes per second
  double sms = 132, issuePerSm = 4, clock = 1.98e9;
};

/// Warps one SM holds at once for the launch: at most 64 warps and 32 blocks, and, when the register count
/// is known, as many blocks as the 64 K registers hold.
unsigned residentWarpsPerSm(const Profile &p);
/// The cycles from a launch's first block to its last block's end when the GPU's block scheduler hands the
/// blocks, in grid order, to the SMs' free block slots (sms x the blocks an SM holds at once) as they free up,
/// each block taking its cycles on the latency timeline (Profile::blockCycles; a sampled block stands for its
/// stratum of the grid). Unlike the latency bound's average it sees the last wave and the blocks that take
/// longer than the rest (rows with more work). 0 where no block cycles were recorded.
double makespanCycles(const Profile &p, const GpuModel &gpu = {});
/// A launch's time bounds, in seconds: its sectors at full bandwidth; its warp instructions on every issue
/// slot; and its latency bound, the warps' timeline cycles (a warp stalls at the first use of a load in
/// flight) spread over the warps that run at once. The launch takes about their root sum of squares: where
/// two are close, neither hides the other (B2 with a latency bound at 85 % of its memory bound ran at 75 %
/// of a copy, not 100 %); the maximum matched the H200 runs worse (bench/emu/RESULTS.md).
struct Bound {
  double memory = 0, issue = 0, latency = 0;
  double seconds() const;
};
Bound bound(const Profile &p, const GpuModel &gpu = {});
double boundSeconds(const Profile &p, const GpuModel &gpu = {});
/// The bound of launches that run one after another (an op's kernels): the sum of theirs.
double boundSeconds(const std::vector<Profile> &launches, const GpuModel &gpu = {});
/// The fraction of copy bandwidth the bound allows for an op whose minimum traffic is `minimumBytes`:
/// (minimumBytes / bandwidth) / boundSeconds.
double boundFractionOfCopy(const Profile &p, double minimumBytes, const GpuModel &gpu = {});
/// The calibrated estimate of a launch's time, in seconds, with the constants bench/emu/calibrate.py fitted
/// to a GPU run (Calibration.h): its sectors at the bandwidth (a stored sector weighing kStoreWeight loaded
/// ones, over kEfficiency); its warp instructions at the issue rate its resident warps sustain (kIssuePerWarp
/// each, at most 4 an SM); its makespan x kLatencyScale; combined by their kNorm-norm. The model is
/// bench/emu/calibration_model.py's; PtxEmuCalibration.* checks that the two agree on every measured cell.
double estimatedSeconds(const Profile &p, const GpuModel &gpu = {});
/// The same from the counts and a makespan in cycles (estimatedSeconds takes makespanCycles(p)).
double estimateFromCounts(const Profile &p, double makespanCycles, const GpuModel &gpu = {});
/// The estimate of launches that run one after another: the sum of theirs.
double estimatedSeconds(const std::vector<Profile> &launches, const GpuModel &gpu = {});
/// The calibration's error, in points of copy bandwidth, on the cells it held out from the fit: `op`'s own
/// where it has some, else all of them (`op` is then "all").
struct ErrorBand {
  std::string op;
  int cells = 0;
  double meanAbs = 0, worst = 0;
  std::string source; // the run and the shapes the band comes from
};
ErrorBand estimateErrorBand(const std::string &op);

/// Each kernel's registers per thread as ptxas allocates them for `target` (sm_90, ...): empty where ptxas
/// is not installed or fails. Runs ptxas -v on the module (profiling only).
std::map<std::string, unsigned> ptxasRegisters(std::string_view ptx, const std::string &target);

/// A few lines: instructions by class, requests, sectors, coalescing, the bound.
std::string formatProfile(const Profile &p, double minimumBytes = 0);

struct LaunchOptions {
  /// Run at most this many blocks, spread evenly over the grid, and scale the profile (0: every block).
  /// Outputs are then incomplete: for profiling only.
  uint64_t sampleBlocks = 0;
  /// Stop a launch after this many warp instructions (a kernel that never ends is an error, not a hang).
  uint64_t maxWarpInstructions = uint64_t(1) << 36;
  /// Fill each profile's register count from ptxas (ptxasRegisters), for the latency bound's occupancy.
  bool registersFromPtxas = false;
};

/// Runs `kernel` over `grid` x `block` with the parameter values `params` (one pointer per parameter,
/// as cuLaunchKernel takes them). Throws EmuFault on a fault; returns the launch's profile.
Profile launchKernel(const Kernel &kernel, Dim3 grid, Dim3 block, unsigned dynamicSharedBytes, void **params,
                     DeviceMemory &memory, const LaunchOptions &options = {});

} // namespace moec::ptxemu
