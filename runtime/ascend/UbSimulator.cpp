//===- UbSimulator.cpp - Checked Unified Buffers for tiled kernels on the CPU ---===//
#include "moec/runtime/ascend/UbSimulator.h"

#include <algorithm>
#include <cstring>

namespace moec::ascend {
namespace {

std::string coreName(int64_t core) { return "core " + std::to_string(core); }

} // namespace

UbSimulator::UbSimulator(const Chip &chip, int64_t coreCount, int64_t rowCount) : chip_(chip), rows(rowCount) {
  if (coreCount < 1 || coreCount > chip.vectorCores)
    throw UbError("ub simulator: " + std::to_string(coreCount) + " cores; chip '" + chip.name + "' has " +
                  std::to_string(chip.vectorCores));
  if (rowCount < 0 || rowCount > (int64_t(1) << 40))
    throw UbError("ub simulator: " + std::to_string(rowCount) + " rows is out of range");
  cores.resize(size_t(coreCount));
  for (Core &c : cores)
    c.ub = std::make_unique<uint8_t[]>(size_t(chip.ubBytes));
  finished = std::make_unique<std::atomic<uint8_t>[]>(size_t(std::max<int64_t>(rowCount, 1)));
  for (int64_t r = 0; r < rowCount; ++r)
    finished[size_t(r)].store(0, std::memory_order_relaxed);
}

UbSimulator::~UbSimulator() = default;

UbSimulator::Core &UbSimulator::core(int64_t index) {
  if (index < 0 || index >= int64_t(cores.size()))
    throw UbError("ub simulator: no " + coreName(index) + " (the launch has " + std::to_string(cores.size()) + ")");
  return cores[size_t(index)];
}

void UbSimulator::addGlobal(const std::string &name, const void *data, int64_t bytes) {
  if (bytes < 0 || (!data && bytes > 0))
    throw UbError("ub simulator: GM tensor '" + name + "' has " + std::to_string(bytes) + " bytes at " +
                  (data ? "an address" : "null"));
  globals.push_back({name, static_cast<const uint8_t *>(data), bytes});
}

uint8_t *UbSimulator::place(int64_t index, const std::string &name, int64_t offset, int64_t bytes) {
  Core &c = core(index);
  std::string where = coreName(index) + ", UB buffer '" + name + "'";
  if (bytes <= 0 || offset < 0 || offset > chip_.ubBytes || bytes > chip_.ubBytes - offset)
    throw UbError(where + ": [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                  ") is not inside the " + std::to_string(chip_.ubBytes) + " B UB");
  if (offset % chip_.ubAlignment != 0)
    throw UbError(where + ": offset " + std::to_string(offset) + " is not a multiple of " +
                  std::to_string(chip_.ubAlignment) + " B");
  for (const Buffer &b : c.live) {
    if (b.name == name)
      throw UbError(where + ": already placed");
    if (offset < b.offset + b.bytes && b.offset < offset + bytes)
      throw UbError(where + ": [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                    ") overlaps live buffer '" + b.name + "' [" + std::to_string(b.offset) + ", " +
                    std::to_string(b.offset + b.bytes) + ")");
  }
  c.live.push_back({name, offset, bytes});
  c.stats.peakUbBytes = std::max(c.stats.peakUbBytes, offset + bytes);
  return c.ub.get() + offset;
}

void UbSimulator::release(int64_t index, const std::string &name) {
  Core &c = core(index);
  auto it = std::find_if(c.live.begin(), c.live.end(), [&](const Buffer &b) { return b.name == name; });
  if (it == c.live.end())
    throw UbError(coreName(index) + ", UB buffer '" + name + "': released but not placed");
  c.live.erase(it);
}

const UbSimulator::Buffer &UbSimulator::bufferHolding(int64_t index, const uint8_t *ub, int64_t bytes,
                                                      const char *what) {
  Core &c = core(index);
  std::string where = coreName(index) + ", " + what + " of " + std::to_string(bytes) + " B";
  if (bytes <= 0)
    throw UbError(where + ": a DataCopy moves at least one byte");
  const uint8_t *base = c.ub.get();
  if (ub < base || ub >= base + chip_.ubBytes)
    throw UbError(where + ": the UB address is not in this core's UB");
  int64_t offset = ub - base;
  if (offset % chip_.ubAlignment != 0)
    throw UbError(where + ": UB offset " + std::to_string(offset) + " is not a multiple of " +
                  std::to_string(chip_.ubAlignment) + " B");
  for (const Buffer &b : c.live)
    if (offset >= b.offset && offset < b.offset + b.bytes) {
      if (bytes > b.offset + b.bytes - offset)
        throw UbError(where + ": runs past the end of UB buffer '" + b.name + "' (" +
                      std::to_string(b.offset + b.bytes - offset) + " B left)");
      return b;
    }
  throw UbError(where + ": UB offset " + std::to_string(offset) + " is in no live buffer");
}

const UbSimulator::Global &UbSimulator::globalHolding(int64_t index, const void *gm, int64_t bytes,
                                                      const char *what) const {
  auto p = static_cast<const uint8_t *>(gm);
  for (const Global &g : globals)
    if (p >= g.data && p < g.data + g.bytes) {
      if (bytes > g.data + g.bytes - p)
        throw UbError(coreName(index) + ", " + what + " of " + std::to_string(bytes) + " B: runs past the end of GM tensor '" +
                      g.name + "' (" + std::to_string(g.data + g.bytes - p) + " B left)");
      return g;
    }
  throw UbError(coreName(index) + ", " + what + " of " + std::to_string(bytes) +
                " B: the GM address is in no tensor of the launch");
}

void UbSimulator::copyIn(int64_t index, uint8_t *ub, const void *gm, int64_t bytes) {
  copy(index, ub, gm, bytes, /*toUb=*/true);
}

void UbSimulator::copyOut(int64_t index, void *gm, const uint8_t *ub, int64_t bytes) {
  copy(index, ub, gm, bytes, /*toUb=*/false);
}

void UbSimulator::copy(int64_t index, const uint8_t *ub, const void *gm, int64_t bytes, bool toUb) {
  const char *what = toUb ? "DataCopy GM -> UB" : "DataCopy UB -> GM";
  bufferHolding(index, ub, bytes, what);
  globalHolding(index, gm, bytes, what);
  // Both checks passed: `ub` is this core's (mutable) arena and `gm` a registered tensor the launch
  // writes through its outputs, so the casts drop nothing the caller did not give.
  if (toUb)
    std::memcpy(const_cast<uint8_t *>(ub), gm, size_t(bytes));
  else
    std::memcpy(const_cast<void *>(gm), ub, size_t(bytes));
  Core &c = core(index);
  ++c.stats.dataCopies;
  (toUb ? c.stats.bytesIn : c.stats.bytesOut) += bytes;
  ++(toUb ? c.rowCopiesIn : c.rowCopiesOut);
}

void UbSimulator::scalarRead(int64_t index, int64_t bytes) {
  Core &c = core(index);
  ++c.stats.scalarReads;
  c.stats.scalarBytes += bytes;
}

void UbSimulator::finishRow(int64_t index, int64_t row) {
  Core &c = core(index);
  if (row < 0 || row >= rows)
    throw UbError(coreName(index) + ": row " + std::to_string(row) + " is not in [0, " + std::to_string(rows) + ")");
  uint8_t before = finished[size_t(row)].fetch_add(1, std::memory_order_relaxed);
  if (before != 0) {
    finished[size_t(row)].store(2, std::memory_order_relaxed); // saturate
    throw UbError(coreName(index) + ": row " + std::to_string(row) + " finished a second time");
  }
  ++c.stats.rows;
  if (c.rowCopiesIn > 0)
    ++c.stats.rowsCopyingIn;
  else if (c.rowCopiesOut > 0)
    ++c.stats.rowsCopyingOutOnly;
  c.rowCopiesIn = c.rowCopiesOut = 0;
}

void UbSimulator::finish() const {
  for (int64_t r = 0; r < rows; ++r)
    if (uint8_t n = finished[size_t(r)].load(std::memory_order_relaxed); n != 1)
      throw UbError("ub simulator: row " + std::to_string(r) + (n == 0 ? " was never finished" : " was finished twice"));
  for (size_t c = 0; c < cores.size(); ++c)
    if (!cores[c].live.empty())
      throw UbError(coreName(int64_t(c)) + ", UB buffer '" + cores[c].live.front().name + "': still placed at the end");
}

const UbSimulator::CoreStats &UbSimulator::stats(int64_t index) const {
  if (index < 0 || index >= int64_t(cores.size()))
    throw UbError("ub simulator: no " + coreName(index));
  return cores[size_t(index)].stats;
}

} // namespace moec::ascend
