//===- PtxEmuBoundsTest.cpp - Loads and stores at the edges of an allocation ---===//
//
// Every width of ld / st the emulator runs (b8, b16, b32, b64 and their .v2 / .v4 forms, ld.global.nc,
// generic addressing) at the end and the start of an allocation and between two allocations. What decides:
//  - PTX ISA 6.4.1, "Addresses as Operands": "The access size of a memory instruction is the total number
//    of bytes accessed in memory. For example, the access size of ld.v4.b32 is 16 bytes." and "The address
//    must be naturally aligned to a multiple of the access size", so a W-byte access starts at a multiple
//    of W.
//  - The ISA defines no value for an access outside the memory a program owns; on a GPU compute-sanitizer
//    reports it as an invalid __global__ read or write. The emulator stands in for that check: DeviceMemory
//    (Emulator.h) hands out "allocations at addresses of their own ..., separated by unmapped gaps so a
//    one-past-the-end access is caught", and find() returns memory only "when one allocation holds all of
//    [address, address + bytes)"; a load or store outside is CUDA_ERROR_ILLEGAL_ADDRESS naming its PTX line.
// So an access of W bytes ending exactly at an allocation's end reads or writes exactly those bytes, one that
// runs a byte past it faults and writes nothing, and likewise at the start. Allocations start at multiples of
// 256 bytes (cuMemAlloc's guarantee, Memory.cpp's kAlignment), so a naturally aligned access of at most 16
// bytes never straddles two allocations' bases: the access that "starts in one allocation and runs into the
// next" is one that starts at or runs past one allocation's end into the gap, which must fault even at the
// address where an adjacent allocation would begin.
//
// Each case runs twice: cold (lane 0 first touches another allocation, so lane 1's access takes find()'s map
// lookup) and warm (the allocation was the last one touched, so find() takes its cached-allocation path).
// ptxas (CUDA 13.0, -arch=sm_90) accepts every kernel here, the generated ones included.
//===----------------------------------------------------------------------===//
#include "PtxEmuFixture.h"

#include <cstdio>

namespace moec::ptxemu::testing {
namespace {

/// One access form: `ld.global.v4.b32` and kin. elem bytes each, vec elements, in registers of regType.
struct Form {
  const char *ld, *st; // the opcodes (null st: a load-only form such as ld.global.nc)
  int elem, vec;
  const char *regType; // .b16 for 8- and 16-bit data (as nvcc declares %rs), else the data's own width
  int bytes() const { return elem * vec; }
};

const Form kForms[] = {
    {"ld.global.b8", "st.global.b8", 1, 1, ".b16"},           {"ld.global.b16", "st.global.b16", 2, 1, ".b16"},
    {"ld.global.b32", "st.global.b32", 4, 1, ".b32"},         {"ld.global.b64", "st.global.b64", 8, 1, ".b64"},
    {"ld.global.v2.b8", "st.global.v2.b8", 1, 2, ".b16"},     {"ld.global.v4.b8", "st.global.v4.b8", 1, 4, ".b16"},
    {"ld.global.v2.b16", "st.global.v2.b16", 2, 2, ".b16"},   {"ld.global.v4.b16", "st.global.v4.b16", 2, 4, ".b16"},
    {"ld.global.v2.b32", "st.global.v2.b32", 4, 2, ".b32"},   {"ld.global.v4.b32", "st.global.v4.b32", 4, 4, ".b32"},
    {"ld.global.v2.b64", "st.global.v2.b64", 8, 2, ".b64"},   {"ld.global.nc.u8", nullptr, 1, 1, ".b16"},
    {"ld.global.nc.v4.u32", nullptr, 4, 4, ".b32"},           {"ld.global.nc.v2.f64", nullptr, 8, 2, ".b64"},
    {"ld.u16", "st.u16", 2, 1, ".b16"},                       {"ld.v4.f32", "st.v4.f32", 4, 4, ".b32"},
};

/// The element registers {%d1, ..., %dN} (or %d1 alone).
std::string regs(const Form &f) {
  std::string s = f.vec > 1 ? "{" : "";
  for (int i = 1; i <= f.vec; ++i)
    s += (i > 1 ? ", %d" : "%d") + std::to_string(i);
  return s + (f.vec > 1 ? "}" : "");
}

/// Two kernels for a form, each (p0, p1, out): lane 0 accesses p0, lane 1 p1. `load` loads W bytes and
/// stores them to out + 16 * lane; `store` stores the bytes 0xC1, 0xC2, ... (element i holds the bytes
/// 0xC1 + i * elem, ... in little-endian order).
std::string kernels(const Form &f) {
  const std::string prologue = R"(
  .reg .pred %p<2>;
  .reg .b32 %r<2>;
  .reg .b64 %rd<8>;
  .reg )" + std::string(f.regType) + R"( %d<5>;
  ld.param.u64 %rd1, [P_param_0];
  ld.param.u64 %rd2, [P_param_1];
  ld.param.u64 %rd3, [P_param_2];
  mov.u32 %r1, %tid.x;
  setp.eq.u32 %p1, %r1, 0;
  selp.b64 %rd4, %rd1, %rd2, %p1;
)";
  auto entry = [&](const std::string &name, const std::string &body) {
    std::string pro = prologue;
    for (size_t at; (at = pro.find("P_param")) != std::string::npos;)
      pro.replace(at, 1, name);
    return ".visible .entry " + name + "(.param .u64 " + name + "_param_0, .param .u64 " + name +
           "_param_1, .param .u64 " + name + "_param_2)\n{" + pro + body + "  ret;\n}\n";
  };
  // The data each store writes and each load is checked against: byte k of the access is 0xC1 + k.
  std::string movs;
  for (int i = 0; i < f.vec; ++i) {
    uint64_t v = 0;
    for (int b = 0; b < f.elem; ++b)
      v |= uint64_t(0xC1 + i * f.elem + b) << (8 * b);
    char buf[64];
    std::snprintf(buf, sizeof buf, "  mov.b%d %%d%d, 0x%llx;\n", f.elem == 1 ? 16 : f.elem * 8, i + 1,
                  (unsigned long long)v);
    movs += buf;
  }
  std::string outForm = std::string("st.global") + (f.vec > 1 ? ".v" + std::to_string(f.vec) : "") + ".b" +
                        std::to_string(f.elem * 8);
  std::string text = entry("load", "  " + std::string(f.ld) + " " + regs(f) + ", [%rd4];\n" +
                                       "  mul.wide.u32 %rd5, %r1, 16;\n  add.s64 %rd6, %rd3, %rd5;\n  " + outForm +
                                       " [%rd6], " + regs(f) + ";\n");
  if (f.st)
    text += entry("store", movs + "  " + std::string(f.st) + " [%rd4], " + regs(f) + ";\n");
  return ptx(text);
}

class PtxEmuBounds : public PtxEmuFixture {
protected:
  /// A `bytes`-byte allocation holding 0x10, 0x11, ... (a fill no load or store here writes).
  uint64_t filled(size_t bytes) {
    std::vector<uint8_t> v(bytes);
    for (size_t i = 0; i < bytes; ++i)
      v[i] = uint8_t(0x10 + i);
    return upload(v);
  }
  std::vector<uint8_t> bytesAt(uint64_t a, size_t n) { return download<uint8_t>(a, n); }

  uint64_t decoy = 0, out = 0;
  void SetUp() override {
    decoy = filled(64);
    out = zeros<uint8_t>(64);
  }

  /// Lane 1 (cold: lane 0 first touches the decoy) or the only lane (warm: the host's find() just touched
  /// `base`) accesses `addr` with the form's load and, when it has one, its store; both must succeed.
  /// `base`/`size`: the allocation, whose bytes are checked after the store (only [addr, addr + W) changed).
  void expectInBounds(const Form &f, const std::string &text, uint64_t base, size_t size, uint64_t addr, bool warm) {
    SCOPED_TRACE(std::string(f.ld) + (warm ? " (warm)" : " (cold)") + " at offset " + std::to_string(addr - base) +
                 " of " + std::to_string(size) + " bytes");
    const size_t w = size_t(f.bytes()), off = size_t(addr - base);
    if (uint8_t *o = mem.find(out, 64)) // every allocation holds the same fill: an earlier case's bytes must go
      std::memset(o, 0, 64);
    launch(text, "load", base, addr, warm);
    std::vector<uint8_t> got = bytesAt(out + (warm ? 0 : 16), w);
    for (size_t k = 0; k < w; ++k)
      EXPECT_EQ(got[k], uint8_t(0x10 + off + k)) << "byte " << k << " loaded";
    if (!f.st)
      return;
    launch(text, "store", base, addr, warm);
    std::vector<uint8_t> after = bytesAt(base, size);
    for (size_t i = 0; i < size; ++i) {
      uint8_t expected = i >= off && i < off + w ? uint8_t(0xC1 + (i - off)) : uint8_t(0x10 + i);
      EXPECT_EQ(after[i], expected) << "byte " << i << " after the store";
    }
    // Put the fill back for the next case.
    if (uint8_t *p = mem.find(base, size))
      for (size_t i = 0; i < size; ++i)
        p[i] = uint8_t(0x10 + i);
  }

  /// The form's load and store at `addr` both fault with `code`, naming the access's line, and the store
  /// writes nothing: the allocation [base, base + size) keeps its fill.
  void expectFault(const Form &f, const std::string &text, uint64_t base, size_t size, uint64_t addr, bool warm,
                   CUresult code = CUDA_ERROR_ILLEGAL_ADDRESS) {
    std::string where = addr >= base ? "offset " + std::to_string(addr - base)
                                     : std::to_string(base - addr) + " bytes before the start";
    SCOPED_TRACE(std::string(f.ld) + (warm ? " (warm)" : " (cold)") + " at " + where + " of " +
                 std::to_string(size) + " bytes");
    for (const char *kernel : {"load", "store"}) {
      if (std::string(kernel) == "store" && !f.st)
        continue;
      if (warm)
        mem.find(base, 0); // the cached allocation is `base`'s (a 0-byte look-up fits any allocation)
      EmuFault e = warm ? fault(text, kernel, {1}, {1}, addr, addr, out)
                        : fault(text, kernel, {1}, {2}, decoy + 16, addr, out);
      EXPECT_EQ(e.code(), code) << kernel << ": " << e.what();
      std::string at = faultLine(text, std::string(kernel) == "load" ? std::string(f.ld) + " " + regs(f) + ", [%rd4]"
                                                                      : std::string(f.st) + " [%rd4]");
      EXPECT_NE(std::string(e.what()).find(at), std::string::npos) << kernel << ": " << e.what();
      if (code == CUDA_ERROR_ILLEGAL_ADDRESS)
        EXPECT_NE(std::string(e.what()).find("thread (" + std::string(warm ? "0" : "1") + ",0,0)"),
                  std::string::npos)
            << e.what();
      std::vector<uint8_t> after = bytesAt(base, size);
      for (size_t i = 0; i < size; ++i)
        EXPECT_EQ(after[i], uint8_t(0x10 + i)) << kernel << ": byte " << i << " changed by a faulting access";
    }
  }

private:
  void launch(const std::string &text, const char *kernel, uint64_t base, uint64_t addr, bool warm) {
    if (warm) {
      mem.find(base, 0); // the cached allocation is `base`'s
      run(text, kernel, {1}, {1}, addr, addr, out);
    } else {
      run(text, kernel, {1}, {2}, decoy + 16, addr, out);
    }
  }
};

// An access ending exactly at the end succeeds; starting at the end, or running one byte past it, faults.
TEST_F(PtxEmuBounds, AccessEndingAtTheEndOfAnAllocation) {
  for (const Form &f : kForms) {
    const std::string text = kernels(f);
    const size_t w = size_t(f.bytes());
    for (bool warm : {false, true}) {
      uint64_t exact = filled(3 * w); // a multiple of W: the last W bytes are one aligned access
      expectInBounds(f, text, exact, 3 * w, exact + 2 * w, warm);
      expectFault(f, text, exact, 3 * w, exact + 3 * w, warm);
      // 2W - 1 bytes (W for a byte access): the aligned access at W runs exactly one byte past the end.
      size_t shortBy = w > 1 ? 2 * w - 1 : 1;
      uint64_t odd = filled(shortBy);
      expectInBounds(f, text, odd, shortBy, odd, warm);
      expectFault(f, text, odd, shortBy, odd + w, warm);
    }
  }
}

// 13 bytes, a multiple of none of the wider sizes: the last aligned access that fits ends before the end
// (at 12 for W = 2, 4; at 8 for W = 8), the next runs past it, and a 16-byte access does not fit at all.
TEST_F(PtxEmuBounds, AllocationNotAMultipleOfTheAccessSize) {
  const size_t size = 13;
  for (const Form &f : kForms) {
    const std::string text = kernels(f);
    const size_t w = size_t(f.bytes());
    for (bool warm : {false, true}) {
      uint64_t a = filled(size);
      size_t lastFit = (size / w) * w; // the first aligned offset whose access does not fit
      if (lastFit >= w)
        expectInBounds(f, text, a, size, a + lastFit - w, warm);
      expectFault(f, text, a, size, a + lastFit, warm);
      if (w > size)
        EXPECT_EQ(lastFit, 0u) << "a 16-byte access at the start of 13 bytes";
    }
  }
}

// An allocation of no bytes has none to access, its own address included.
TEST_F(PtxEmuBounds, ZeroByteAllocation) {
  for (const Form &f : kForms) {
    const std::string text = kernels(f);
    uint64_t empty = mem.allocate(0);
    ASSERT_NE(empty, 0u);
    for (bool warm : {false, true})
      expectFault(f, text, empty, 0, empty, warm);
  }
}

// At the start: the first W bytes are fine; the aligned access just before the start (its last byte one
// before the first) faults; starting one byte before the start is misaligned for W > 1 (the ISA leaves it
// undefined, the emulator reports it) and out of bounds for a byte access.
TEST_F(PtxEmuBounds, AccessAtTheStartOfAnAllocation) {
  for (const Form &f : kForms) {
    const std::string text = kernels(f);
    const size_t w = size_t(f.bytes());
    for (bool warm : {false, true}) {
      uint64_t a = filled(2 * w);
      expectInBounds(f, text, a, 2 * w, a, warm);
      expectFault(f, text, a, 2 * w, a - w, warm);
      expectFault(f, text, a, 2 * w, a - 1, warm, w > 1 ? CUDA_ERROR_MISALIGNED_ADDRESS : CUDA_ERROR_ILLEGAL_ADDRESS);
    }
  }
}

// Two allocations one after the other: an access that starts at or runs past the first one's end faults at
// every aligned address up to the second one, in particular at the first multiple of 256 past the end (where
// an adjacent allocation would begin) and ending exactly at the second one's start; the second one's first
// bytes are fine. A 256-byte allocation ends exactly where a following one could start.
TEST_F(PtxEmuBounds, AccessBetweenTwoAllocations) {
  for (const Form &f : kForms) {
    const std::string text = kernels(f);
    const uint64_t w = uint64_t(f.bytes());
    for (size_t size : {size_t(13), size_t(256)}) {
      for (bool warm : {false, true}) {
        uint64_t a = filled(size), b = filled(64);
        ASSERT_GT(b, a + size) << "allocations in address order";
        uint64_t next256 = (a + size + 255) / 256 * 256;
        EXPECT_GT(b, next256) << "no gap after the first allocation: an overrun would read the next one";
        for (uint64_t at : {(a + size + w - 1) / w * w, next256, next256 + w, b - w})
          expectFault(f, text, a, size, at, warm);
        expectFault(f, text, b, 64, b - w, warm);
        expectInBounds(f, text, b, 64, b, warm);
        if (w <= size)
          expectInBounds(f, text, a, size, a + (size / w - 1) * w, warm);
      }
    }
  }
}

// Shared memory: the block's window is its static variables, then its dynamic bytes (an .extern .shared
// array, placed at the next multiple of 16). Here 13 static bytes, so the dynamic ones start at 16: an
// access ending exactly at the end of the static 13 or of the dynamic bytes succeeds, one a byte past faults.
// (PTX ISA "Shared State Space"; the emulator checks the block's window, not each variable, as a GPU does.)
// EMULATOR BUG, fixed in Execute.cpp's launchKernel: the window was the static plus the dynamic bytes,
// 13 + 16 = 29, while the dynamic array sits at [16, 32), so its last 3 bytes faulted.
const std::string kShared = ptx(R"PTX(
.extern .shared .align 16 .b8 dyn[];
.visible .entry sh_ld(.param .u32 sh_ld_param_0, .param .u32 sh_ld_param_1, .param .u64 sh_ld_param_2)
{
  .shared .align 4 .b8 s13[13];
  .reg .pred %p<2>;
  .reg .b16 %h<2>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<2>;

  ld.param.u32 %r1, [sh_ld_param_0];
  ld.param.u32 %r2, [sh_ld_param_1];
  ld.param.u64 %rd1, [sh_ld_param_2];
  mov.u32 %r3, s13;
  add.u32 %r4, %r3, %r1;
  setp.eq.u32 %p1, %r2, 1;
  @%p1 bra WORD;
  setp.eq.u32 %p1, %r2, 4;
  @%p1 bra QUAD;
  mov.b16 %h1, 0xC1;
  st.shared.b8 [%r4], %h1;
  ld.shared.b8 %h1, [%r4];
  cvt.u32.u16 %r5, %h1;
  st.global.b32 [%rd1], %r5;
  ret;
WORD:
  mov.b32 %r5, 0xC4C3C2C1;
  st.shared.b32 [%r4], %r5;
  ld.shared.b32 %r5, [%r4];
  st.global.b32 [%rd1], %r5;
  ret;
QUAD:
  mov.b32 %r5, 0xC4C3C2C1;
  st.shared.v4.b32 [%r4], {%r5, %r5, %r5, %r5};
  ld.shared.v4.b32 {%r6, %r7, %r8, %r9}, [%r4];
  st.global.v4.b32 [%rd1], {%r6, %r7, %r8, %r9};
  ret;
}
)PTX");

TEST_F(PtxEmuBounds, SharedMemoryEdges) {
  struct Case {
    unsigned dynamic, offset, kind; // kind: 0 a byte, 1 a word, 4 sixteen bytes
    bool fits;
    const char *what;
  };
  const Case cases[] = {
      {0, 12, 0, true, "the last static byte"},
      {0, 13, 0, false, "one byte past 13 static bytes"},
      {0, 8, 1, true, "the last whole word of 13 bytes"},
      {0, 12, 1, false, "a word running 3 bytes past 13"},
      {0, 0, 4, false, "16 bytes in a 13-byte window"},
      {0, 0xFFFFFFFFu, 0, false, "one byte before the window (the 32-bit offset wraps)"},
      {0, 0xFFFFFFFCu, 1, false, "the word before the window"},
      {16, 16, 4, true, "all 16 dynamic bytes, ending at the window's end"},
      {16, 31, 0, true, "the last dynamic byte"},
      {16, 32, 0, false, "one byte past the dynamic bytes"},
      {16, 32, 4, false, "16 bytes past the dynamic bytes"},
      {20, 32, 4, false, "16 bytes where only 4 of 20 dynamic bytes remain"},
      {32, 32, 4, true, "the second 16 of 32 dynamic bytes"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(c.what) + ": " + std::to_string(c.dynamic) + " dynamic bytes, offset " +
                 std::to_string(c.offset));
    uint64_t dOut = zeros<uint32_t>(4);
    if (c.fits) {
      launchShared(kShared, "sh_ld", {1}, {1}, c.dynamic, c.offset, c.kind, dOut);
      std::vector<uint32_t> o = download<uint32_t>(dOut, 4);
      EXPECT_EQ(o[0], c.kind == 0 ? 0xC1u : 0xC4C3C2C1u);
      if (c.kind == 4)
        EXPECT_EQ(o[3], 0xC4C3C2C1u);
    } else {
      EmuFault e = faultShared(kShared, "sh_ld", {1}, {1}, c.dynamic, c.offset, c.kind, dOut);
      EXPECT_EQ(e.code(), CUDA_ERROR_ILLEGAL_ADDRESS) << e.what();
      EXPECT_NE(std::string(e.what()).find("st.shared"), std::string::npos) << "the store faults first: " << e.what();
    }
  }
}

} // namespace
} // namespace moec::ptxemu::testing
