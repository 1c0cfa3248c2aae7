//===- AST.h - The moec DSL's abstract syntax tree ---------------*- C++ -*-===//
//
// An op is a signature (type parameter, dims, attrs, tensors, requires) plus a body of statements in index
// notation. The parser builds this tree; `checkOp` (Sema.h) resolves names and fills in `Expr::type`.
//
//   op moe_init_routing_v2_grad<T: f16 | bf16 | f32>
//     dim   N: runtime, R: runtime, H: static
//     attr  top_k as K: static, drop_pad_mode: static = 0, active_num: runtime = 0
//     in    grad_expanded_x: T[*R, H]
//     in    expanded_row_idx: i32[N * K] in [drop_pad_mode == 1 ? -1 : 0, R)
//     out   grad_x: T[N, H]
//     require K > 0 : "topK must be > 0"
//   {
//     grad_x[n, h] = sum(k < K) { let r = expanded_row_idx[n * K + k]  ...  }
//   }
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/dsl/Diagnostics.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moec::dsl {

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

/// Concrete element types a tensor can hold.
enum class DType { F16, BF16, F32, I32, I8, Bool };

const char *dtypeName(DType t);                        // "bf16"
std::optional<DType> parseDType(const std::string &s); // "bf16" -> BF16
int dtypeBytes(DType t);
bool isFloat(DType t);

/// An element type as written in a signature: the op's generic parameter `T`, or a fixed type.
struct TypeRef {
  bool generic = false; // true: the op's type parameter
  DType fixed = DType::F32;

  DType resolve(DType typeArg) const { return generic ? typeArg : fixed; }
};

/// The type of an expression value, filled in by Sema.
///   Int   - 64-bit signed integer: dims, attrs, literals, loaded i32/i8 values, index variables
///   Bool  - comparisons, logic, loaded bool values, bool attrs
///   Float - a floating value of type `floatType` (f32, or T/f16/bf16 as loaded from a tensor)
struct ExprType {
  enum Class { Unknown, Int, Bool, Float } cls = Unknown;
  TypeRef floatType; // meaningful when cls == Float

  static ExprType intTy() { return {Int, {}}; }
  static ExprType boolTy() { return {Bool, {}}; }
  static ExprType floatTy(TypeRef t) { return {Float, t}; }
  static ExprType f32() { return {Float, TypeRef{false, DType::F32}}; }
  bool isF32() const { return cls == Float && !floatType.generic && floatType.fixed == DType::F32; }
};

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

enum class UnOp { Neg, Not };
enum class BinOp { Add, Sub, Mul, Div, Mod, Lt, Le, Gt, Ge, Eq, Ne, And, Or };
const char *binOpSpelling(BinOp op); // "+", "<=", "&&", ...

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

/// `let name = value`, inside a block or at the top of an op body.
struct Let {
  std::string name;
  ExprPtr value;
  SourceLoc loc;
};

/// What a `Name` expression refers to; set by Sema.
enum class NameKind { Unresolved, Dim, Attr, Let, IndexVar, Accumulator };

enum class ExprKind {
  IntLit,   // 42
  FloatLit, // 0.0, 1.5e-3
  BoolLit,  // true, false
  Name,     // N, top_k's alias K, a let, an index variable
  Element,  // tensor[i, j]           name = tensor, operands = indices
  Unary,    // -x, !x                 operands = [x]
  Binary,   // a op b                 operands = [a, b]
  Select,   // c ? a : b              operands = [c, a, b]; only the taken branch is evaluated
  Cast,     // f32(x), i32(x), T(x)   castTo = target, operands = [x]
  Sum,      // sum(k < K) body        name = k, operands = [bound, body]; accumulates in f32
  Rank,     // rank(tensor)           name = tensor (host-side constraints only)
  Block,    // { let a = ..; expr }   lets, operands = [result]
  Fold,     // fold(k < K, acc = init) body
            //                        name = k, accName = acc, operands = [bound, init, body]; in order
  Call,     // fma(a, b, c), min(a, b), max(a, b)
            //                        name = callee, operands = args
  Present,  // present(tensor)        name = tensor; true when an optional tensor is given (static)
};

struct Expr {
  ExprKind kind;
  SourceLoc loc;

  int64_t intValue = 0;
  double floatValue = 0;
  bool boolValue = false;
  std::string name;
  UnOp unOp = UnOp::Neg;
  BinOp binOp = BinOp::Add;
  TypeRef castTo;
  std::vector<ExprPtr> operands;
  std::vector<Let> lets; // Block only
  std::string accName;   // Fold only: the accumulator's name, in scope in the body

  // Filled in by Sema.
  ExprType type;
  NameKind nameKind = NameKind::Unresolved; // Name only
  int refIndex = -1; // Name: index into OpDef::dims / OpDef::attrs; Element/Rank/Present: into OpDef::tensors

  Expr(ExprKind k, SourceLoc l) : kind(k), loc(std::move(l)) {}
};

//===----------------------------------------------------------------------===//
// Signature
//===----------------------------------------------------------------------===//

/// `dim H: static` - a symbolic size. Static dims are baked into the kernel (and the cache key); runtime
/// dims are kernel arguments. `dim N: runtime tokens` marks the op's token count (at most one runtime
/// dim): tuned schedules are chosen per power-of-two bucket of it (moec tune, Runtime::get).
struct DimDecl {
  std::string name;
  bool isStatic = false;
  bool isTokens = false;
  SourceLoc loc;
};

/// `attr top_k as K: static = 1` - a scalar op parameter. `name` is the public name (CLI, API), `alias`
/// the name used inside the op (empty: same as name).
struct AttrDecl {
  std::string name;
  std::string alias;
  bool isStatic = false;
  bool isBool = false;
  std::optional<int64_t> defaultValue; // absent: the attribute is required
  SourceLoc loc;

  const std::string &innerName() const { return alias.empty() ? name : alias; }
};

/// One entry of a tensor's shape. `flattenLeading` (`*R`, first entry only) means R is the product of any
/// number of leading dims, so `T[*R, H]` accepts [R, H] as well as [E, C, H].
struct ShapeDim {
  ExprPtr size;
  bool flattenLeading = false;
};

struct TensorDecl {
  std::string name;
  bool isOutput = false;
  /// `in probs?: ...`: the caller may omit it. `present(probs)` says whether it was given; the kernels are
  /// specialized on that. An optional output (`out g?: ... when COND`) exists exactly when COND holds.
  bool optional = false;
  ExprPtr when; // optional outputs only
  /// `unique`: the tensor's non-negative values are pairwise distinct (host-checked), so scatters through
  /// it never collide and need no atomics.
  bool unique = false;
  TypeRef elem;
  std::vector<ShapeDim> shape;
  /// `in [lo, hi)`: every element of an integer tensor must lie in this half-open range (host-checked).
  ExprPtr rangeLo, rangeHi;
  SourceLoc rangeLoc; // the `in` of the range, for diagnostics
  SourceLoc loc;
};

/// `require cond : "message"` - checked on the host before every run.
struct Require {
  ExprPtr cond;
  std::string message;
  SourceLoc loc;
};

//===----------------------------------------------------------------------===//
// Body
//===----------------------------------------------------------------------===//

/// `target[i, j] = value`. Each index is either a fresh name (the store iterates that dim of the target,
/// `indices[i]` set, `indexExprs[i]` null) or an expression over enclosing `for` variables and lets (a
/// scatter, `indexExprs[i]` set). The value is rounded once, to nearest even, when it is f32 and the
/// target holds a narrower float.
struct Assign {
  std::string target;
  int tensorIndex = -1; // set by Sema
  std::vector<std::string> indices;
  std::vector<ExprPtr> indexExprs; // same length as indices; null for fresh names
  std::vector<SourceLoc> indexLocs;
  ExprPtr value;
  SourceLoc loc;
};

struct Stmt;

/// `for t < Tk, k < K { ... }`: the statements inside run for every point of the domain.
struct ForStmt {
  std::vector<std::string> vars;
  std::vector<ExprPtr> bounds;
  std::vector<SourceLoc> varLocs;
  std::vector<Stmt> body;
  SourceLoc loc;
};

/// `if cond { ... } else { ... }`. Outside a `for` the condition is host-evaluable (dims, attrs,
/// present()) and selects statements at specialization time; inside one it guards each store.
struct IfStmt {
  ExprPtr cond;
  std::vector<Stmt> thenBody, elseBody;
  SourceLoc loc;
};

/// A body statement: exactly one member is set.
struct Stmt {
  std::optional<Let> let;
  std::optional<Assign> assign;
  std::unique_ptr<ForStmt> forStmt;
  std::unique_ptr<IfStmt> ifStmt;
};

struct OpDef {
  std::string name;
  std::string typeParam;           // "T"; empty when the op is not generic
  std::vector<DType> allowedTypes; // what T may be
  std::vector<DimDecl> dims;
  std::vector<AttrDecl> attrs;
  std::vector<TensorDecl> tensors; // inputs and outputs, in declaration order
  std::vector<Require> requires_;
  std::vector<Stmt> body;
  SourceLoc loc;
  std::shared_ptr<const SourceFile> source;

  const DimDecl *findDim(const std::string &name) const;
  /// Finds an attribute by its public name or its alias.
  const AttrDecl *findAttr(const std::string &name) const;
  const TensorDecl *findTensor(const std::string &name) const;
  int tensorIndex(const std::string &name) const;
  /// The names a misspelt dim or attribute is compared with ("did you mean"): the dims' names, the
  /// attributes' public names and aliases; only the static ones when `staticOnly`.
  std::vector<std::string> dimNames(bool staticOnly) const;
  std::vector<std::string> attrNames(bool staticOnly) const;
};

} // namespace moec::dsl
