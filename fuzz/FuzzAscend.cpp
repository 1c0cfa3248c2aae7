//===- FuzzAscend.cpp - libFuzzer: Ascend chip files and cached tilings -----===//
//
// Every input is read as a chip file (chipFromJson) and as a cached kernel tiling (tilingFromJson, on the
// built-in 910B and, when the input was a valid chip, on that chip). Each must return or throw
// std::runtime_error, nothing else. A tiling that is accepted is planned for a few row counts, and the
// plan must keep its invariants: every row on exactly one core, no more cores than the chip has, the
// UB within the chip's (planKernel may refuse a count that overflows, with std::overflow_error).
//===----------------------------------------------------------------------===//
#include "moec/runtime/ascend/Plan.h"

#include <cstdlib>
#include <optional>
#include <stdexcept>

using namespace moec::ascend;

namespace {

void planAndCheck(const KernelTiling &t, const Chip &chip) {
  for (int64_t rows : {int64_t(0), int64_t(1), int64_t(80), int64_t(1) << 20, int64_t(1) << 40})
    for (int64_t live : {int64_t(-1), int64_t(0), rows / 2}) {
      KernelPlan p;
      try {
        p = planKernel(t, chip, rows, live, {1, 3, 64});
      } catch (const std::overflow_error &) {
        continue;
      }
      int64_t total = 0;
      for (const CoreWork &c : p.cores) {
        total += c.rows;
        if (c.liveRows > c.rows || c.dataCopies < 0 || c.gmBytes < 0)
          std::abort();
      }
      if (total != rows || p.blockDim < 1 || p.blockDim > chip.vectorCores || p.ubBytesUsed > chip.ubBytes)
        std::abort();
    }
}

void readTiling(const nlohmann::json &j, const Chip &chip) {
  std::optional<KernelTiling> t;
  try {
    t = tilingFromJson(j, chip, "fuzz");
  } catch (const std::runtime_error &) {
    return;
  }
  planAndCheck(*t, chip);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 64 * 1024)
    return -1;
  std::string text(reinterpret_cast<const char *>(data), size);
  static const Chip ascend910b = builtinChip("910b");
  std::optional<Chip> chip;
  try {
    chip = chipFromJson(text, "fuzz");
  } catch (const std::runtime_error &) {
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return 0;
  readTiling(j, ascend910b);
  if (chip)
    readTiling(j, *chip);
  return 0;
}
