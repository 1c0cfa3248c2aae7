//===- Tiling.cpp - A tiling's UB bytes and the cost model ---------------------===//
#include "moec/contracts/ascend/Tiling.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace moec::ascend {

namespace {
// Indexed by UbRole: the prefixes are the names' text of before the role was a field, kept so that every
// tiling file, table and header reads as it did.
constexpr const char *kUbRolePrefixes[] = {"in", "out", "row", "acc", "idx", "cast"};
static_assert(std::size(kUbRolePrefixes) == size_t(UbRole::Cast) + 1, "a prefix for every UbRole");
} // namespace

const char *ubRolePrefix(UbRole role) { return kUbRolePrefixes[size_t(role)]; }

std::optional<UbRole> ubRoleFromPrefix(std::string_view prefix) {
  for (size_t i = 0; i < std::size(kUbRolePrefixes); ++i)
    if (prefix == kUbRolePrefixes[i])
      return UbRole(i);
  return std::nullopt;
}

int64_t checkedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw std::overflow_error("ascend plan: " + std::to_string(a) + " * " + std::to_string(b) + " overflows int64");
  return r;
}

int64_t checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw std::overflow_error("ascend plan: " + std::to_string(a) + " + " + std::to_string(b) + " overflows int64");
  return r;
}

int64_t alignUp(int64_t v, int64_t alignment) { return checkedMul((v + alignment - 1) / alignment, alignment); }

int64_t ubBytes(const KernelTiling &t, int64_t rows, int64_t alignment) {
  int64_t total = 0;
  for (const UbBuffer &b : t.buffers) {
    int64_t perCopy =
        checkedMul(checkedMul(b.elementBytes, b.wholeRow ? t.rowLength : t.chunk), b.perRowOfPass ? rows : 1);
    total = checkedAdd(total, checkedAdd(checkedMul(b.copies, alignUp(perCopy, alignment)),
                                         alignUp(checkedMul(b.fixedBytesPerRow, rows), alignment)));
  }
  return total;
}

double coreCostNs(const Chip &chip, const CoreWork &w) {
  double copyNs = double(w.dataCopies) * chip.dataCopyNs;
  double moveNs = chip.gmGBpsPerCore > 0 ? double(w.gmBytes) / chip.gmGBpsPerCore : 0;
  double streamNs = w.bufferCount > 1 && w.passes > 0
                        ? std::max(copyNs, moveNs) + std::min(copyNs, moveNs) / double(w.passes)
                        : copyNs + moveNs;
  return chip.coreLaunchNs + double(w.scalarReads) * chip.scalarReadNs + streamNs;
}

double copyBoundNs(const Chip &chip, double bytes) {
  double bandwidth = chip.gmGBpsPerCore * double(chip.vectorCores);
  return chip.coreLaunchNs + (bandwidth > 0 ? bytes / bandwidth : 0);
}

int64_t deadRowBytes(const KernelTiling &t) {
  int64_t bytes = 0;
  for (const UbBuffer &b : t.buffers)
    if (b.elementBytes == 0)
      bytes = checkedAdd(bytes, b.fixedBytesPerRow);
  return bytes;
}

} // namespace moec::ascend
