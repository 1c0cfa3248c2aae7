//===- FuzzRunArgs.cpp - libFuzzer: binding a call to a built-in op --------===//
//
// The input bytes pick a built-in op, a dtype, attributes (known names, aliases, an unknown one; any
// value) and, per input tensor, whether it is given, its dtype, shape, strides, device and (for small
// host tensors) its data. bindCall must bind the call or throw ArgumentError; a bound call must accept
// outputs of the shapes it derived (checkOutputs) and give its statics and kernel scalars.
//===----------------------------------------------------------------------===//
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/Binding.h"

#include "FuzzUtil.h"

#include <cstdio>
#include <cstdlib>

using namespace moec;

namespace {

const std::vector<std::unique_ptr<dsl::OpDef>> &ops() {
  static const std::vector<std::unique_ptr<dsl::OpDef>> all = [] {
    std::vector<std::unique_ptr<dsl::OpDef>> v;
    for (const BuiltinOp &op : builtinOps())
      v.push_back(loadOp(op.name));
    return v;
  }();
  return all;
}

constexpr DType kTypes[] = {DType::F16, DType::BF16, DType::F32, DType::I32, DType::I8, DType::Bool};

int64_t value(fuzz::Bytes &in) {
  switch (in.u8() % 4) {
  case 0: return int64_t(in.u8() % 8);           // small
  case 1: return int64_t(int8_t(in.u8()));       // small, maybe negative
  case 2: return int64_t(in.u16());              // medium
  default: return int64_t(in.u64());             // anything
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096)
    return -1;
  fuzz::Bytes in(data, size);
  const dsl::OpDef &op = *ops()[in.u8() % ops().size()];
  uint8_t dtypeByte = in.u8();
  DType dtype = (dtypeByte & 0x80) || op.allowedTypes.empty() ? kTypes[dtypeByte % 6]
                                                              : op.allowedTypes[dtypeByte % op.allowedTypes.size()];

  std::map<std::string, int64_t> attrs;
  for (int n = in.u8() % 5; n-- > 0;) {
    size_t pick = in.u8() % (op.attrs.size() * 2 + 1);
    std::string name = pick == op.attrs.size() * 2 ? "bogus"
                       : pick % 2                 ? op.attrs[pick / 2].innerName()
                                                  : op.attrs[pick / 2].name;
    attrs[name] = value(in);
  }

  std::vector<std::vector<uint8_t>> buffers; // host tensor data, kept alive across the call
  buffers.reserve(op.tensors.size());
  std::map<std::string, TensorView> inputs;
  for (const dsl::TensorDecl &t : op.tensors) {
    if (t.isOutput)
      continue;
    uint8_t flags = in.u8();
    if ((t.optional && (flags & 1)) || flags == 0xff)
      continue;
    TensorView v;
    v.dtype = flags & 2 ? kTypes[in.u8() % 6] : t.elem.resolve(dtype);
    size_t rank = flags & 4 ? in.u8() % 5 : t.shape.size();
    for (size_t i = 0; i < rank; ++i)
      v.shape.push_back(flags & 8 ? value(in) : int64_t(in.u8() % 9));
    if (flags & 16)
      for (size_t i = 0, n = flags & 32 ? in.u8() % 5 : rank; i < n; ++i)
        v.strides.push_back(value(in));
    bool small = true;
    int64_t elements = 1;
    for (int64_t d : v.shape) {
      if (d < 0 || d > 4096 || (elements *= d) > 4096)
        small = false;
    }
    if (small && !(flags & 64)) {
      size_t bytes = size_t(elements) * size_t(dsl::dtypeBytes(v.dtype));
      std::vector<uint8_t> &buffer = buffers.emplace_back(bytes);
      for (uint8_t &b : buffer)
        b = in.u8();
      v.data = buffer.data();
      v.device = Device::Host;
    } else {
      v.data = reinterpret_cast<void *>(uintptr_t(0x100000));
      v.device = Device::Cuda;
    }
    inputs[t.name] = std::move(v);
  }

  BoundCall call;
  try {
    call = bindCall(op, dtype, attrs, inputs);
  } catch (const ArgumentError &) {
    return 0;
  }
  (void)call.statics(op);
  (void)call.kernelScalars(op);
  std::map<std::string, TensorView> outputs;
  for (const auto &[name, shape] : call.outputShapes)
    outputs[name] = TensorView{reinterpret_cast<void *>(uintptr_t(0x200000)), op.findTensor(name)->elem.resolve(dtype),
                               shape, {}, Device::Cuda};
  try {
    checkOutputs(op, dtype, call, outputs);
  } catch (const ArgumentError &e) {
    std::fprintf(stderr, "fuzz-run-args: checkOutputs rejects the shapes bindCall derived: %s\n", e.what());
    std::abort();
  }
  return 0;
}
