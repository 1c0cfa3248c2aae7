//===- Ptx.h - PTX text parsed for the emulator -----------------*- C++ -*-===//
//
// The emulator executes the PTX a GPU would run. parsePtx turns the text into kernels of decoded
// instructions: opcode, type and modifiers, operands with registers resolved to indices, branch targets
// resolved to instruction indices, and each instruction's PTX line for error messages. Anything outside
// the subset the emulator executes is a PtxError naming the line and the instruction, never a skip.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace moec::ptxemu {

/// A PTX text the emulator cannot parse or does not execute: "PTX line 12: unsupported instruction 'prmt.b32'".
class PtxError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

enum class Type : uint8_t {
  None, Pred, B8, B16, B32, B64, U8, U16, U32, U64, S8, S16, S32, S64, F16, BF16, F32, F64, F16x2, BF16x2
};
inline int typeBytes(Type t) {
  constexpr int8_t bytes[] = {0, 1, 1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 4, 4}; // in Type's order
  return bytes[size_t(t)];
}
inline bool isSigned(Type t) { return t == Type::S8 || t == Type::S16 || t == Type::S32 || t == Type::S64; }
inline bool isFloat(Type t) { return t == Type::F16 || t == Type::BF16 || t == Type::F32 || t == Type::F64; }
const char *typeName(Type t);

enum class Space : uint8_t { None, Global, Shared, Param, Local, Const }; // None: generic addressing

enum class Opcode : uint8_t {
  Mov, Ld, St, Cvta, Cvt,
  Add, Sub, Mul, Mad, Fma, Div, Rem, Neg, Abs, Min, Max, Rcp, Sqrt, Rsqrt, Ex2, Lg2,
  And, Or, Xor, Not, Shl, Shr, Popc, Clz, Brev, Prmt,
  Setp, Selp,
  Bra, Ret, Exit, BarSync, WarpSync, Membar,
  Shfl, Vote, Activemask, Atom, Red,
};

/// What the profile counts an instruction as.
enum class InstrClass : uint8_t { Integer, Float, Convert, Move, Compare, GlobalMemory, SharedMemory, Control, Warp };
constexpr int kInstrClasses = 9;
const char *className(InstrClass c);

enum class Cmp : uint8_t { None, Eq, Ne, Lt, Le, Gt, Ge, Lo, Ls, Hi, Hs, Equ, Neu, Ltu, Leu, Gtu, Geu, Num, Nan };
enum class Rounding : uint8_t { None, Rn, Rz, Rm, Rp, Rni, Rzi, Rmi, Rpi, Approx, Full };
enum class MulMode : uint8_t { None, Lo, Hi, Wide };
enum class BoolOp : uint8_t { None, And, Or, Xor };
enum class ShflMode : uint8_t { None, Bfly, Up, Down, Idx };
enum class VoteMode : uint8_t { None, Ballot, Any, All, Uni };
enum class AtomOp : uint8_t { None, Add, Min, Max, Exch, Cas, And, Or, Xor };

/// The special registers, each component its own id.
enum class Special : uint8_t {
  TidX, TidY, TidZ, NtidX, NtidY, NtidZ, CtaidX, CtaidY, CtaidZ, NctaidX, NctaidY, NctaidZ,
  LaneId, WarpId, NwarpId, SmId, NsmId, LanemaskEq, LanemaskLt, LanemaskLe, LanemaskGt, LanemaskGe,
  Clock, Clock64, GridId
};

struct Operand {
  enum class Kind : uint8_t { None, Reg, Imm, Special, Symbol, Address, Vector, Label, Sink };
  Kind kind = Kind::None;
  bool negated = false;      // !%p
  uint8_t floatBytes = 0;    // Imm written as 0fXXXXXXXX (4) or 0dXXXXXXXXXXXXXXXX (8): imm holds its bits
  int32_t reg = -1;          // Reg; Address: base register (-1: a symbol or an absolute address)
  int32_t symbol = -1;       // Symbol and Address: index into Kernel::symbols
  Special special = Special::TidX;
  int64_t imm = 0;           // Imm: the value; Address: the byte offset
  std::vector<Operand> elems; // Vector: {a, b, ...}
};

struct Instr {
  Opcode op = Opcode::Mov;
  InstrClass cls = InstrClass::Move;
  Type type = Type::None;     // the instruction type (cvt/setp/shfl: destination or compared type)
  Type srcType = Type::None;  // cvt's source type
  Space space = Space::None;
  uint8_t vec = 1;            // .v2 / .v4
  Cmp cmp = Cmp::None;
  BoolOp combine = BoolOp::None; // setp's .and/.or/.xor with a third predicate
  Rounding round = Rounding::None;
  MulMode mode = MulMode::None;
  ShflMode shfl = ShflMode::None;
  VoteMode vote = VoteMode::None;
  AtomOp atom = AtomOp::None;
  bool ftz = false, sat = false, uni = false, toSpace = false; // cvta.to
  int32_t guard = -1;         // predicate register guarding the instruction (-1: none)
  bool guardNegated = false;
  int32_t target = -1;        // Bra: the instruction index of the label
  int32_t reconverge = -1;    // Bra: where diverged lanes meet again (the immediate post-dominator); -1: exit
  int32_t line = 0;           // 1-based line in the PTX text
  std::string text;           // the opcode with its modifiers, for messages
  std::vector<Operand> ops;
  Type operandTypes[4] = {};  // how each operand is read (operandType(), decoded once)
  Type result = Type::None;   // how the destination is written (resultType())
};

struct Register {
  std::string name;
  Type type;
  int bytes; // 1 for predicates
};

/// A parameter or a .shared variable; the emulator addresses both by symbol.
struct Symbol {
  enum class Kind : uint8_t { Param, Shared } kind;
  std::string name;
  int64_t size = 0, align = 1, offset = 0; // offset in the parameter buffer or the shared window
  bool pointer = false;                    // a .ptr parameter
};

struct Kernel {
  std::string name;
  int32_t line = 0;
  std::vector<Symbol> symbols;
  std::vector<int> params; // indices into symbols, in declaration order
  int64_t paramBytes = 0, sharedBytes = 0;
  std::vector<Register> regs;
  std::vector<Instr> instrs;
  unsigned maxntid[3] = {0, 0, 0}; // 0: not given
  unsigned reqntid[3] = {0, 0, 0};
};

struct Module {
  std::string target; // e.g. sm_90
  std::vector<Kernel> kernels;
  /// The kernel `name`, or null.
  const Kernel *find(std::string_view name) const;
};

/// Parses a module; throws PtxError ("PTX line N: ...") on anything it does not accept.
Module parsePtx(std::string_view text);

} // namespace moec::ptxemu
