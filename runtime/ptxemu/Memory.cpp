//===- Memory.cpp - The emulated device's global memory -------------------===//
#include "moec/runtime/ptxemu/Emulator.h"

#include <new>

#include <unistd.h>

namespace moec::ptxemu {

namespace {
constexpr uint64_t kAlignment = 256;  // what cuMemAlloc guarantees
constexpr uint64_t kGap = 1 << 20;    // unmapped bytes between allocations
} // namespace

size_t DeviceMemory::defaultLimitBytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0)
    return size_t(4) << 30;
  return size_t(pages) / 2 * size_t(pageSize);
}

uint64_t DeviceMemory::allocate(size_t bytes) {
  if (bytes > limitBytes || total > limitBytes - bytes)
    return 0;
  std::unique_ptr<uint8_t[]> data(new (std::nothrow) uint8_t[bytes ? bytes : 1]());
  if (!data)
    return 0;
  uint64_t base = (nextAddress + kAlignment - 1) / kAlignment * kAlignment;
  nextAddress = base + bytes + kGap;
  allocations.emplace(base, Allocation{bytes, std::move(data)});
  total += bytes;
  return base;
}

bool DeviceMemory::release(uint64_t address) {
  auto it = allocations.find(address);
  if (it == allocations.end())
    return false;
  total -= it->second.bytes;
  if (lastData == it->second.data.get())
    lastData = nullptr;
  allocations.erase(it);
  return true;
}

uint8_t *DeviceMemory::find(uint64_t address, size_t bytes) {
  if (lastData && address >= lastBase && address - lastBase <= lastBytes && bytes <= lastBytes - (address - lastBase))
    return lastData + (address - lastBase);
  auto it = allocations.upper_bound(address);
  if (it == allocations.begin())
    return nullptr;
  --it;
  uint64_t offset = address - it->first;
  if (offset > it->second.bytes || bytes > it->second.bytes - offset)
    return nullptr;
  lastBase = it->first, lastBytes = it->second.bytes, lastData = it->second.data.get();
  return lastData + offset;
}

} // namespace moec::ptxemu
