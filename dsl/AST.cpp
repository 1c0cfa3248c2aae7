//===- AST.cpp - DSL types and signature lookups --------------------------===//
#include "moec/dsl/AST.h"

namespace moec::dsl {

namespace {
struct DTypeInfo {
  DType type;
  const char *name;
  int bytes;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::F16, "f16", 2}, {DType::BF16, "bf16", 2}, {DType::F32, "f32", 4},
    {DType::I32, "i32", 4}, {DType::I8, "i8", 1},     {DType::Bool, "bool", 1},
};

const DTypeInfo &info(DType t) {
  for (const DTypeInfo &i : kDTypes)
    if (i.type == t)
      return i;
  return kDTypes[0]; // unreachable: every enumerator is in the table
}
} // namespace

const char *dtypeName(DType t) { return info(t).name; }

std::optional<DType> parseDType(const std::string &s) {
  for (const DTypeInfo &i : kDTypes)
    if (s == i.name)
      return i.type;
  return std::nullopt;
}

int dtypeBytes(DType t) { return info(t).bytes; }

bool isFloat(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32; }

const char *binOpSpelling(BinOp op) {
  switch (op) {
  case BinOp::Add: return "+";
  case BinOp::Sub: return "-";
  case BinOp::Mul: return "*";
  case BinOp::Div: return "/";
  case BinOp::Mod: return "%";
  case BinOp::Lt: return "<";
  case BinOp::Le: return "<=";
  case BinOp::Gt: return ">";
  case BinOp::Ge: return ">=";
  case BinOp::Eq: return "==";
  case BinOp::Ne: return "!=";
  case BinOp::And: return "&&";
  case BinOp::Or: return "||";
  }
  return "?";
}

const DimDecl *OpDef::findDim(const std::string &name) const {
  for (const DimDecl &d : dims)
    if (d.name == name)
      return &d;
  return nullptr;
}

const AttrDecl *OpDef::findAttr(const std::string &name) const {
  for (const AttrDecl &a : attrs)
    if (a.name == name || a.alias == name)
      return &a;
  return nullptr;
}

std::vector<std::string> OpDef::dimNames(bool staticOnly) const {
  std::vector<std::string> names;
  for (const DimDecl &d : dims)
    if (d.isStatic || !staticOnly)
      names.push_back(d.name);
  return names;
}

std::vector<std::string> OpDef::attrNames(bool staticOnly) const {
  std::vector<std::string> names;
  for (const AttrDecl &a : attrs)
    if (a.isStatic || !staticOnly) {
      names.push_back(a.name);
      if (a.innerName() != a.name)
        names.push_back(a.innerName());
    }
  return names;
}

const TensorDecl *OpDef::findTensor(const std::string &name) const {
  int i = tensorIndex(name);
  return i < 0 ? nullptr : &tensors[i];
}

int OpDef::tensorIndex(const std::string &name) const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == name)
      return static_cast<int>(i);
  return -1;
}

} // namespace moec::dsl
