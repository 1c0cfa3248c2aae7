//===- MemoryAccess.cpp - Loads, stores and atomics, checked and counted ---===//
//
// BlockRunner's memory instructions: each lane's address is checked against the allocations (global), the
// block's shared window or the parameter buffer, and against its natural alignment; the global accesses'
// requests, 32-byte sectors and useful bytes are counted for the profile.
//===----------------------------------------------------------------------===//
#include "Alu.h"
#include "BlockRunner.h"

#include <algorithm>
#include <cstring>

namespace moec::ptxemu::detail {

uint8_t *BlockRunner::locate(const Warp &w, int lane, const Instr &in, uint64_t addr, uint32_t bytes, bool isStore) {
  auto what = [&] { return std::to_string(bytes) + "-byte " + (isStore ? "store" : "load"); };
  Space space = in.space;
  if (space == Space::None && addr >= kSharedWindow && addr - kSharedWindow < (uint64_t(1) << 32)) {
    space = Space::Shared;
    addr -= kSharedWindow;
  }
  if (addr % bytes != 0)
    fault(CUDA_ERROR_MISALIGNED_ADDRESS, w, lane, in,
          what() + " at " + hex(addr) + " is not aligned to " + std::to_string(bytes) + " bytes");
  if (space == Space::Param) {
    if (addr > params.size() || bytes > params.size() - addr)
      fault(CUDA_ERROR_ILLEGAL_ADDRESS, w, lane, in,
            what() + " at parameter offset " + std::to_string(addr) + " is past the parameters");
    return const_cast<uint8_t *>(params.data()) + addr;
  }
  if (space == Space::Shared) {
    if (addr > shared.size() || bytes > shared.size() - addr)
      fault(CUDA_ERROR_ILLEGAL_ADDRESS, w, lane, in,
            what() + " at shared offset " + hex(addr) + " is outside the block's " + std::to_string(shared.size()) +
                " bytes of shared memory");
    return shared.data() + addr;
  }
  if (space == Space::Local || space == Space::Const)
    fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, w, lane, in, "local and const memory are not supported");
  uint8_t *p = memory.find(addr, bytes);
  if (!p)
    fault(CUDA_ERROR_ILLEGAL_ADDRESS, w, lane, in, what() + " at " + hex(addr) + " is outside every allocation");
  return p;
}

void BlockRunner::countGlobal(const std::vector<Access> &accesses, bool isStore) {
  if (accesses.empty())
    return;
  uint64_t sectors[128];
  size_t n = 0;
  for (const Access &a : accesses)
    for (uint64_t s = a.address / 32; s <= (a.address + a.bytes - 1) / 32 && n < 128; ++s)
      sectors[n++] = s;
  std::sort(sectors, sectors + n);
  size_t unique = size_t(std::unique(sectors, sectors + n) - sectors);
  std::vector<Access> sorted = accesses;
  std::sort(sorted.begin(), sorted.end(), [](const Access &a, const Access &b) { return a.address < b.address; });
  uint64_t useful = 0, end = 0;
  for (const Access &a : sorted) {
    uint64_t from = std::max(a.address, end), to = a.address + a.bytes;
    if (to > from)
      useful += to - from;
    end = std::max(end, to);
  }
  (isStore ? profile.globalStoreRequests : profile.globalLoadRequests) += 1;
  (isStore ? profile.storeSectors : profile.loadSectors) += double(unique);
  (isStore ? profile.storeBytes : profile.loadBytes) += double(useful);
}

void BlockRunner::loadStore(Warp &w, const Instr &in, uint32_t exec) {
  const bool isStore = in.op == Opcode::St;
  const Operand &addrOp = in.ops[isStore ? 0 : 1];
  const Operand &data = in.ops[isStore ? 1 : 0];
  const uint32_t elem = uint32_t(typeBytes(in.type)), bytes = elem * in.vec;
  const bool global = in.space == Space::Global || in.space == Space::None;
  accesses.clear();
  for (int lane = 0; lane < 32; ++lane) {
    if (!((exec >> lane) & 1))
      continue;
    uint64_t addr = address(w, lane, addrOp, in);
    uint8_t *p = locate(w, lane, in, addr, bytes, isStore);
    if (global && !(in.space == Space::None && addr >= kSharedWindow))
      accesses.push_back({addr, bytes});
    for (unsigned i = 0; i < in.vec; ++i) {
      const Operand &e = in.vec > 1 ? data.elems[i] : data;
      if (isStore) {
        uint64_t v = read(w, lane, e, in.type, in);
        std::memcpy(p + i * elem, &v, elem); // little-endian host: the low bytes
      } else if (e.kind == Operand::Kind::Reg) {
        uint64_t v = 0;
        std::memcpy(&v, p + i * elem, elem);
        write(w, lane, e.reg, narrow(v, int(elem), isSigned(in.type)), isSigned(in.type) ? Type::S64 : Type::U64);
      }
    }
  }
  if (global && in.space != Space::Param)
    countGlobal(accesses, isStore);
}

void BlockRunner::atomic(Warp &w, const Instr &in, uint32_t exec) {
  const bool returns = in.op == Opcode::Atom;
  const size_t first = returns ? 1 : 0;
  const uint32_t bytes = uint32_t(typeBytes(in.type));
  accesses.clear();
  for (int lane = 0; lane < 32; ++lane) { // lanes in order: each update is atomic
    if (!((exec >> lane) & 1))
      continue;
    uint64_t addr = address(w, lane, in.ops[first], in);
    uint8_t *p = locate(w, lane, in, addr, bytes, true);
    if (in.space != Space::Shared)
      accesses.push_back({addr, bytes});
    uint64_t a = read(w, lane, in.ops[first + 1], in.type, in);
    uint64_t b = in.atom == AtomOp::Cas ? read(w, lane, in.ops[first + 2], in.type, in) : 0;
    uint64_t old = 0;
    std::memcpy(&old, p, bytes);
    uint64_t updated;
    try {
      updated = atomicUpdate(in, old, a, b);
    } catch (const LaneFault &f) {
      fault(f.code, w, lane, in, f.message);
    }
    std::memcpy(p, &updated, bytes);
    if (returns)
      write(w, lane, in.ops[0].reg, narrow(old, int(bytes), isSigned(in.type)), in.type);
  }
  countGlobal(accesses, true);
}

} // namespace moec::ptxemu::detail
