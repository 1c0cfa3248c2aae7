//===- Binding.cpp - Checking a call against an op's signature ------------===//
//
// 1. Attributes: known names only, defaults applied, required ones present.
// 2. Inputs: present, dtype and rank as declared, contiguous.
// 3. Dims: bound from shape entries that are a bare dim name, then solved from products such as N * K
//    (one unknown factor, exact division), until nothing changes; then every entry is checked.
// 4. Requires (those over attributes and ranks before the dims are bound), then index ranges (host
//    tensors only), then the output shapes.
//===----------------------------------------------------------------------===//
#include "moec/runtime/Binding.h"

#include "moec/contracts/NearestName.h"
#include "moec/dsl/Printer.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>

namespace moec {

using namespace dsl;

namespace {

[[noreturn]] void fail(const OpDef &op, const std::string &message) {
  throw ArgumentError(op.name + ": " + message);
}

std::string dimLabel(const TensorDecl &t, size_t pos) {
  const ShapeDim &d = t.shape[pos];
  return "tensor '" + t.name + "' dim " + std::to_string(pos) + " (" + (d.flattenLeading ? "*" : "") +
         printExpr(*d.size) + ")";
}

/// The factors of a product of names and literals (`N * K`), or nothing for any other expression.
bool collectFactors(const Expr &e, std::vector<const Expr *> &factors) {
  if (e.kind == ExprKind::Binary && e.binOp == BinOp::Mul)
    return collectFactors(*e.operands[0], factors) && collectFactors(*e.operands[1], factors);
  if (e.kind == ExprKind::Name || e.kind == ExprKind::IntLit) {
    factors.push_back(&e);
    return true;
  }
  return false;
}

class Binder {
public:
  Binder(const OpDef &op, DType dtype, const std::map<std::string, TensorView> &inputs)
      : op(op), dtype(dtype), inputs(inputs) {}

  void bindAttrs(const std::map<std::string, int64_t> &given, BoundCall &call) {
    for (const auto &[name, value] : given)
      if (!op.findAttr(name))
        fail(op, "unknown attribute '" + name + "'" + didYouMean(name, op.attrNames(false)));
    for (const AttrDecl &a : op.attrs) {
      if (a.innerName() != a.name && given.count(a.name) && given.count(a.innerName()))
        fail(op, "attribute '" + a.name + "' is given twice, as '" + a.name + "' and as its alias '" +
                     a.innerName() + "'");
      std::optional<int64_t> v = a.defaultValue;
      if (auto it = given.find(a.name); it != given.end())
        v = it->second;
      else if (auto alias = given.find(a.innerName()); alias != given.end())
        v = alias->second;
      if (!v)
        fail(op, "attribute '" + a.name + "' is required");
      if (a.isBool && *v != 0 && *v != 1)
        fail(op, "attribute '" + a.name + "' is a bool: expected 0 or 1, got " + std::to_string(*v));
      call.attrs[a.name] = *v;
      call.bindings.values[a.name] = call.bindings.values[a.innerName()] = *v;
    }
  }

  void checkInputs(BoundCall &call) {
    for (const TensorDecl &t : op.tensors) {
      if (t.isOutput)
        continue;
      auto it = inputs.find(t.name);
      if (t.optional)
        call.bindings.present[t.name] = it != inputs.end();
      if (it == inputs.end()) {
        if (t.optional)
          continue;
        fail(op, "input tensor '" + t.name + "' is missing");
      }
      if (t.optional)
        call.present.insert(t.name);
      const TensorView &v = it->second;
      DType expected = t.elem.resolve(dtype);
      bool sameStorage = expected == DType::Bool && v.dtype == DType::I8; // bool tensors take 0/1 bytes
      if (v.dtype != expected && !sameStorage)
        fail(op, "tensor '" + t.name + "': expected dtype " + dtypeName(expected) + ", got " + dtypeName(v.dtype));
      bool flatten = !t.shape.empty() && t.shape[0].flattenLeading;
      size_t rank = v.shape.size();
      if (flatten ? rank < t.shape.size() : rank != t.shape.size())
        fail(op, "tensor '" + t.name + "': expected " + (flatten ? "at least " : "") +
                     std::to_string(t.shape.size()) + " dims " + declaredShape(t) + ", got " +
                     std::to_string(rank) + " dims " + v.shapeString());
      if (!v.isContiguous())
        fail(op, "tensor '" + t.name + "' is not contiguous (strides must be row-major); make a contiguous copy");
      for (int64_t d : v.shape)
        if (d < 0)
          fail(op, "tensor '" + t.name + "' has a negative dim: " + v.shapeString());
      if (!checkedElements(v.shape, dtypeBytes(v.dtype)))
        fail(op, "tensor '" + t.name + "' of shape " + v.shapeString() + " is over moec's limit of " +
                     std::to_string(kMaxTensorBytes) + " bytes");
      call.bindings.ranks[t.name] = rank;
    }
  }

  /// The actual size of entry `pos` of input `t` (a flattened entry is the product of the leading dims).
  int64_t actualSize(const TensorDecl &t, size_t pos) const {
    const TensorView &v = inputs.at(t.name);
    if (!t.shape[0].flattenLeading)
      return v.shape[pos];
    size_t leading = v.shape.size() - t.shape.size() + 1;
    if (pos > 0)
      return v.shape[leading + pos - 1];
    int64_t product = 1;
    for (size_t i = 0; i < leading; ++i)
      product *= v.shape[i];
    return product;
  }

  void bindDims(BoundCall &call) {
    bool progress = true;
    while (progress) {
      progress = false;
      forEachInputEntry([&](const TensorDecl &t, size_t pos, int64_t actual) {
        progress |= solveEntry(t, pos, actual, call);
      });
    }
    forEachInputEntry([&](const TensorDecl &t, size_t pos, int64_t actual) {
      int64_t expected = evalChecked(*t.shape[pos].size, call.bindings);
      if (expected != actual)
        fail(op, dimLabel(t, pos) + ": expected " + std::to_string(expected) + ", got " + std::to_string(actual));
    });
    // A dim only absent optional tensors have stays unbound; a use of it is reported where it happens.
    for (const DimDecl &d : op.dims)
      if (auto it = call.bindings.values.find(d.name); it != call.bindings.values.end())
        call.dims[d.name] = it->second;
  }

  int64_t evalChecked(const Expr &e, const Bindings &b) const {
    try {
      return evalInt(e, b);
    } catch (const EvalError &error) {
      fail(op, std::string("cannot evaluate '") + printExpr(e) + "': " + error.what());
    }
  }

private:
  template <typename F> void forEachInputEntry(F f) {
    for (const TensorDecl &t : op.tensors)
      if (!t.isOutput && inputs.count(t.name))
        for (size_t pos = 0; pos < t.shape.size(); ++pos)
          f(t, pos, actualSize(t, pos));
  }

  /// Binds the one unknown dim of a product entry; returns whether a dim was bound.
  bool solveEntry(const TensorDecl &t, size_t pos, int64_t actual, BoundCall &call) {
    std::vector<const Expr *> factors;
    if (!collectFactors(*t.shape[pos].size, factors))
      return false;
    const Expr *unknown = nullptr;
    int64_t known = 1;
    for (const Expr *f : factors) {
      if (f->kind == ExprKind::IntLit) {
        known *= f->intValue;
      } else if (auto it = call.bindings.values.find(f->name); it != call.bindings.values.end()) {
        known *= it->second;
      } else if (unknown || f->nameKind != NameKind::Dim) {
        return false; // two unknowns (another entry may bind one), or an unbound attribute
      } else {
        unknown = f;
      }
    }
    if (!unknown)
      return false;
    if (known == 0 || actual % known != 0)
      fail(op, dimLabel(t, pos) + ": expected a multiple of " + std::to_string(known) + ", got " +
                   std::to_string(actual));
    call.bindings.values[unknown->name] = actual / known;
    return true;
  }

  std::string declaredShape(const TensorDecl &t) const {
    std::string s = "[";
    for (size_t i = 0; i < t.shape.size(); ++i)
      s += (i ? ", " : "") + std::string(t.shape[i].flattenLeading ? "*" : "") + printExpr(*t.shape[i].size);
    return s + "]";
  }

  const OpDef &op;
  DType dtype;
  const std::map<std::string, TensorView> &inputs;
};

int64_t readInteger(const TensorView &v, int64_t i) {
  switch (v.dtype) {
  case DType::I32: {
    int32_t x;
    std::memcpy(&x, static_cast<const char *>(v.data) + 4 * i, 4);
    return x;
  }
  case DType::I8: return static_cast<const int8_t *>(v.data)[i];
  default: return static_cast<const uint8_t *>(v.data)[i];
  }
}

struct MinMax { // a plain aggregate: a target clone's return of std::pair left its constructor unemitted
  int64_t least, greatest;
};

/// The least and greatest of n values: a loop the compiler vectorizes. Every call checks its index tensors, and
/// this is most of what a launch costs beside the kernels (C2's rowmap at DeepSeek-V3, N = 4096: 4 MB, ~2 % of
/// the kernel's time), so it is built for AVX-512 and AVX2 as well, picked at load time: a 4 MB tensor not in
/// cache reads at 13.8 GB/s that way, 6.1 with the baseline's SSE2.
template <typename I> [[gnu::always_inline]] inline MinMax minMaxLoop(const I *x, int64_t n) {
  I lo = std::numeric_limits<I>::max(), hi = std::numeric_limits<I>::min();
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  return MinMax{lo, hi};
}

#if defined(__x86_64__)
#define MOEC_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MOEC_VECTOR_CLONES
#endif
MOEC_VECTOR_CLONES MinMax minMaxI32(const int32_t *x, int64_t n) { return minMaxLoop(x, n); }
MOEC_VECTOR_CLONES MinMax minMaxI8(const int8_t *x, int64_t n) { return minMaxLoop(x, n); }
MOEC_VECTOR_CLONES MinMax minMaxU8(const uint8_t *x, int64_t n) { return minMaxLoop(x, n); }

MinMax minMaxOf(const TensorView &v) {
  switch (v.dtype) {
  case DType::I32:
    return minMaxI32(static_cast<const int32_t *>(v.data), v.elements());
  case DType::I8:
    return minMaxI8(static_cast<const int8_t *>(v.data), v.elements());
  default:
    return minMaxU8(static_cast<const uint8_t *>(v.data), v.elements());
  }
}

void checkRanges(const OpDef &op, const std::map<std::string, TensorView> &inputs, const Bindings &b) {
  for (const TensorDecl &t : op.tensors) {
    auto it = inputs.find(t.name);
    if (t.isOutput || !t.rangeLo || it == inputs.end())
      continue;
    const TensorView &v = it->second;
    if (v.device != Device::Host || v.elements() == 0)
      continue;
    int64_t lo = evalInt(*t.rangeLo, b), hi = evalInt(*t.rangeHi, b);
    auto [least, greatest] = minMaxOf(v);
    if (least >= lo && greatest < hi)
      continue;
    for (int64_t i = 0, n = v.elements(); i < n; ++i) { // the first element outside, for the message
      int64_t x = readInteger(v, i);
      if (x < lo || x >= hi)
        fail(op, "tensor '" + t.name + "' element " + std::to_string(i) + " is " + std::to_string(x) +
                     ", outside the valid range [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
    }
  }
}

[[noreturn]] void failRepeated(const OpDef &op, const std::string &name, int64_t x, int64_t first, int64_t i) {
  fail(op, "tensor '" + name + "' must hold distinct values: " + std::to_string(x) + " is at elements " +
               std::to_string(first) + " and " + std::to_string(i));
}

/// Whether `v`'s non-negative values, all below `limit` (else false, and nothing is checked), are
/// distinct: one bit per value in a buffer kept per thread (a hash set cost ~50 ns an element; this, ~1).
template <typename I>
bool checkUniqueBelow(const OpDef &op, const std::string &name, const TensorView &v, int64_t limit) {
  thread_local std::vector<uint64_t> seen;
  size_t words = size_t(limit + 63) / 64;
  if (seen.size() < words)
    seen.resize(words);
  std::fill_n(seen.begin(), words, 0);
  const I *values = static_cast<const I *>(v.data);
  for (int64_t i = 0, n = v.elements(); i < n; ++i) {
    int64_t x = values[i];
    if (x < 0)
      continue;
    if (x >= limit)
      return false;
    uint64_t bit = uint64_t(1) << (x % 64);
    if (seen[x / 64] & bit)
      failRepeated(op, name, x, std::find(values, values + i, values[i]) - values, i);
    seen[x / 64] |= bit;
  }
  return true;
}

bool checkUniqueBelow(const OpDef &op, const std::string &name, const TensorView &v, int64_t limit) {
  switch (v.dtype) {
  case DType::I32:
    return checkUniqueBelow<int32_t>(op, name, v, limit);
  case DType::I8:
    return checkUniqueBelow<int8_t>(op, name, v, limit);
  default:
    return checkUniqueBelow<uint8_t>(op, name, v, limit);
  }
}

/// `unique` tensors: their non-negative values are pairwise distinct, so scatters through them never
/// collide. Runs after checkRanges: where the values are known to lie in a range not much wider than the
/// tensor, a bitmap over it finds repeats; otherwise a hash map.
void checkUnique(const OpDef &op, const std::map<std::string, TensorView> &inputs, const Bindings &b) {
  for (const TensorDecl &t : op.tensors) {
    auto it = inputs.find(t.name);
    if (!t.unique || it == inputs.end() || it->second.device != Device::Host)
      continue;
    const TensorView &v = it->second;
    int64_t n = v.elements();
    if (t.rangeHi && n > 0) {
      int64_t hi = evalInt(*t.rangeHi, b);
      if (hi <= 0)
        continue; // no non-negative values: nothing can repeat
      if (hi / 64 <= n + 1024 && checkUniqueBelow(op, t.name, v, hi))
        continue;
    }
    std::unordered_map<int64_t, int64_t> seen;
    for (int64_t i = 0; i < n; ++i) {
      int64_t x = readInteger(v, i);
      if (x < 0)
        continue;
      auto [first, inserted] = seen.emplace(x, i);
      if (!inserted)
        failRepeated(op, t.name, x, first->second, i);
    }
  }
}

} // namespace

/// Top-level lets that the host can evaluate (`let K = R / Tk`), along the branches of host-evaluable
/// ifs: kernel domains may use them.
void bindHostLets(const std::vector<Stmt> &body, Bindings &b) {
  for (const Stmt &s : body) {
    if (s.let) {
      try {
        b.values[s.let->name] = evalInt(*s.let->value, b);
      } catch (const EvalError &) {
        // Reads tensor data: a kernel-only value.
      }
    } else if (s.ifStmt) {
      try {
        bindHostLets(evalBool(*s.ifStmt->cond, b) ? s.ifStmt->thenBody : s.ifStmt->elseBody, b);
      } catch (const EvalError &) {
      }
    }
  }
}

std::map<std::string, int64_t> BoundCall::statics(const OpDef &op) const {
  std::map<std::string, int64_t> s;
  for (const DimDecl &d : op.dims)
    if (auto it = dims.find(d.name); d.isStatic && it != dims.end())
      s[d.name] = it->second;
  for (const AttrDecl &a : op.attrs)
    if (a.isStatic)
      s[a.name] = attrs.at(a.name);
  return s;
}

std::vector<int64_t> BoundCall::kernelScalars(const OpDef &op) const {
  std::vector<int64_t> s;
  for (const DimDecl &d : op.dims)
    if (!d.isStatic)
      s.push_back(dims.count(d.name) ? dims.at(d.name) : 0); // unbound: no present tensor has it
  for (const AttrDecl &a : op.attrs)
    if (!a.isStatic)
      s.push_back(attrs.at(a.name));
  return s;
}

int64_t BoundCall::rows(const std::vector<const Expr *> &domain) const {
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < domain.size(); ++i)
    rows *= evalInt(*domain[i], bindings);
  return rows;
}

BoundCall bindCall(const OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                   const std::map<std::string, TensorView> &inputs) {
  if (std::find(op.allowedTypes.begin(), op.allowedTypes.end(), dtype) == op.allowedTypes.end() &&
      !op.allowedTypes.empty())
    fail(op, std::string("dtype ") + dtypeName(dtype) + " is not supported");
  for (const auto &[name, view] : inputs) {
    const TensorDecl *t = op.findTensor(name);
    if (!t)
      fail(op, "unknown tensor '" + name + "'");
    if (t->isOutput)
      fail(op, "'" + name + "' is an output, not an input");
  }
  BoundCall call;
  Binder binder(op, dtype, inputs);
  binder.bindAttrs(attrs, call);
  binder.checkInputs(call);
  // Requires over attributes and ranks first: `K > 0` must be reported as such, not as a failure to
  // solve N from N * K.
  for (const Require &r : op.requires_) {
    try {
      if (!evalBool(*r.cond, call.bindings))
        fail(op, r.message + " (" + printExpr(*r.cond) + ")");
    } catch (const EvalError &) {
      // Depends on a dim: checked below.
    }
  }
  binder.bindDims(call);
  for (const Require &r : op.requires_) {
    bool holds;
    try {
      holds = evalBool(*r.cond, call.bindings);
    } catch (const EvalError &error) {
      fail(op, "cannot check '" + printExpr(*r.cond) + "': " + error.what());
    }
    if (!holds)
      fail(op, r.message + " (" + printExpr(*r.cond) + ")");
  }
  checkIndexData(op, inputs, call.bindings);
  for (const TensorDecl &t : op.tensors) {
    if (!t.isOutput)
      continue;
    if (t.optional) {
      bool exists = binder.evalChecked(*t.when, call.bindings) != 0;
      call.bindings.present[t.name] = exists;
      if (!exists)
        continue;
      call.present.insert(t.name);
    }
    std::vector<int64_t> shape;
    for (const ShapeDim &d : t.shape)
      shape.push_back(binder.evalChecked(*d.size, call.bindings));
    if (!checkedElements(shape, dtypeBytes(t.elem.resolve(dtype))))
      fail(op, "output '" + t.name + "' would have shape " + TensorView{nullptr, DType::F32, shape}.shapeString() +
                   ", over moec's limit of " + std::to_string(kMaxTensorBytes) + " bytes (or a negative dim)");
    call.outputShapes[t.name] = shape;
  }
  bindHostLets(op.body, call.bindings);
  return call;
}

void checkIndexData(const OpDef &op, const std::map<std::string, TensorView> &inputs, const Bindings &bindings) {
  checkRanges(op, inputs, bindings);
  checkUnique(op, inputs, bindings);
}

void checkOutputs(const OpDef &op, DType dtype, const BoundCall &call,
                  const std::map<std::string, TensorView> &outputs) {
  for (const auto &[name, view] : outputs)
    if (!call.outputShapes.count(name))
      fail(op, "'" + name + "' is not an output of this call (an unknown name, an input, or an optional output " +
                   "whose condition does not hold)");
  for (const TensorDecl &t : op.tensors) {
    if (!t.isOutput || !call.outputShapes.count(t.name))
      continue;
    auto it = outputs.find(t.name);
    if (it == outputs.end())
      fail(op, "output tensor '" + t.name + "' is missing");
    const TensorView &v = it->second;
    const std::vector<int64_t> &expected = call.outputShapes.at(t.name);
    if (v.dtype != t.elem.resolve(dtype))
      fail(op, "tensor '" + t.name + "': expected dtype " + dtypeName(t.elem.resolve(dtype)) + ", got " +
                   dtypeName(v.dtype));
    if (v.shape.size() != expected.size())
      fail(op, "tensor '" + t.name + "': expected " + std::to_string(expected.size()) + " dims, got " +
                   std::to_string(v.shape.size()) + " dims " + v.shapeString());
    for (size_t i = 0; i < expected.size(); ++i)
      if (v.shape[i] != expected[i])
        fail(op, dimLabel(t, i) + ": expected " + std::to_string(expected[i]) + ", got " + std::to_string(v.shape[i]));
    if (!v.isContiguous())
      fail(op, "tensor '" + t.name + "' is not contiguous (strides must be row-major)");
  }
}

} // namespace moec
