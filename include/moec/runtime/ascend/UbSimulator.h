//===- UbSimulator.h - Ascend vector cores' Unified Buffers, checked -*- C++ -*-===//
//
// The simulator runs a tiled kernel on the CPU with each core's UB as a bounded arena of the chip's
// usable bytes. The kernel places its buffers at offsets (as its plan lays them out), moves data between
// GM and UB only with copyIn/copyOut, computes in UB memory, and reports each row it finishes. Anything a
// real core would get wrong fails at once, naming the core and the buffer: a buffer past the UB's end or
// misaligned, two live buffers that overlap, a copy outside one live buffer or outside the GM tensors
// registered for the launch, a UB address off the chip's alignment, a row finished twice; finish() then
// checks that every row was finished exactly once and every buffer released. Each core counts its
// DataCopy calls, bytes in and out, and its peak UB use. Cores may run on different threads.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/contracts/ascend/Chip.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace moec::ascend {

/// What a tiled kernel did wrong, with the core and the buffer or tensor it concerns.
class UbError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class UbSimulator {
public:
  struct CoreStats {
    int64_t dataCopies = 0;
    int64_t bytesIn = 0, bytesOut = 0;
    int64_t peakUbBytes = 0; // the highest end of a live buffer
    int64_t rows = 0;        // rows it finished
    // Of those, the rows that copied GM data in, and those that only copied out (DataCopy calls between
    // the row before's finishRow and its own): what tells the rows that passed their guard.
    int64_t rowsCopyingIn = 0, rowsCopyingOutOnly = 0;
    int64_t scalarReads = 0, scalarBytes = 0; // scalar loads of GM (indices, probs, gathered elements)
  };

  /// `cores` cores of `chip` (at most chip.vectorCores) running a kernel of `rows` rows.
  UbSimulator(const Chip &chip, int64_t cores, int64_t rows);
  ~UbSimulator();

  /// A GM tensor of the launch: copies must stay inside one of them.
  void addGlobal(const std::string &name, const void *data, int64_t bytes);

  /// Places buffer `name` at `offset` in `core`'s UB and returns its memory.
  uint8_t *place(int64_t core, const std::string &name, int64_t offset, int64_t bytes);
  void release(int64_t core, const std::string &name);

  /// DataCopy GM -> UB and UB -> GM: `bytes` inside one live buffer of `core` and one GM tensor.
  void copyIn(int64_t core, uint8_t *ub, const void *gm, int64_t bytes);
  void copyOut(int64_t core, void *gm, const uint8_t *ub, int64_t bytes);

  /// `core` read `bytes` of GM as one scalar (through the scalar unit, not a DataCopy).
  void scalarRead(int64_t core, int64_t bytes);

  /// `core` finished `row`.
  void finishRow(int64_t core, int64_t row);

  /// Every row finished exactly once, every buffer released.
  void finish() const;

  const CoreStats &stats(int64_t core) const;
  const Chip &chip() const { return chip_; }

private:
  struct Buffer {
    std::string name;
    int64_t offset, bytes;
  };
  struct Core {
    std::unique_ptr<uint8_t[]> ub;
    std::vector<Buffer> live;
    CoreStats stats;
    int64_t rowCopiesIn = 0, rowCopiesOut = 0; // since the last finished row
  };
  struct Global {
    std::string name;
    const uint8_t *data;
    int64_t bytes;
  };
  Core &core(int64_t index);
  const Buffer &bufferHolding(int64_t coreIndex, const uint8_t *ub, int64_t bytes, const char *what);
  const Global &globalHolding(int64_t coreIndex, const void *gm, int64_t bytes, const char *what) const;
  void copy(int64_t coreIndex, const uint8_t *ub, const void *gm, int64_t bytes, bool toUb);

  Chip chip_;
  std::vector<Core> cores;
  std::vector<Global> globals;
  std::unique_ptr<std::atomic<uint8_t>[]> finished; // per row: how many times (saturating at 2)
  int64_t rows;
};

} // namespace moec::ascend
