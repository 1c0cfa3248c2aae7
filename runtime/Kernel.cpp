//===- Kernel.cpp - Checking and launching a loaded specialization --------===//
#include "moec/runtime/Kernel.h"

#include "moec/runtime/CudaDriver.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace moec {

using namespace dsl;

void LoadedOp::plan() {
  std::map<std::string, PlannedKernel> byName;
  for (PlannedKernel &p : planKernels(*op, specializationBindings(*op, present, statics)))
    byName.emplace(p.name, std::move(p));
  plans.clear();
  for (const KernelMeta &k : kernels) {
    auto it = byName.find(k.name);
    if (it == byName.end())
      throw std::runtime_error(op->name + ": kernel '" + k.name + "' is not a kernel of this specialization");
    plans.push_back(it->second);
  }
  for (const std::string &name : workspace) {
    const TensorDecl *t = op->findTensor(name);
    if (!t || !t->isOutput || t->shape.size() < 2 || (t->optional && !present.count(name)))
      throw std::runtime_error(op->name + ": the workspace's '" + name + "' is not an output of rank 2 or more");
  }
}

namespace {

[[noreturn]] void fail(const LoadedOp &l, const std::string &message) {
  throw ArgumentError(l.op->name + ": " + message);
}

/// The call must fit what the kernels were compiled for: the static dims its shapes imply, and which
/// optional tensors it passes.
void checkSpecialization(const LoadedOp &l, const BoundCall &call) {
  for (const DimDecl &d : l.op->dims) {
    auto compiled = l.statics.find(d.name);
    auto bound = call.dims.find(d.name);
    if (d.isStatic && compiled != l.statics.end() && bound != call.dims.end() && bound->second != compiled->second)
      fail(l, "dim " + d.name + ": the kernel was compiled for " + d.name + " = " + std::to_string(compiled->second) +
                  ", the tensors give " + std::to_string(bound->second) + "; request a kernel for it");
  }
  for (const TensorDecl &t : l.op->tensors) {
    if (!t.optional)
      continue;
    bool compiled = l.present.count(t.name) > 0, given = call.present.count(t.name) > 0;
    if (compiled != given)
      fail(l, "optional tensor '" + t.name + "' is " + (given ? "given" : "missing") + " but the kernel was compiled " +
                  (compiled ? "with" : "without") + " it");
  }
}

void checkDevices(const LoadedOp &l, const std::map<std::string, TensorView> &tensors) {
  Device expected = l.onGpu() ? Device::Cuda : Device::Host;
  for (const auto &[name, view] : tensors)
    if (view.device != expected)
      fail(l, "tensor '" + name + "' is in " + (view.device == Device::Host ? "host" : "CUDA") +
                  " memory but the kernel runs on the " + (l.onGpu() ? "GPU" : "CPU"));
}

/// GPU kernels use 16-byte vector accesses (the schedule promises them for aligned rows).
void checkAlignment(const LoadedOp &l, const std::map<std::string, TensorView> &tensors) {
  for (const auto &[name, view] : tensors)
    if (reinterpret_cast<uintptr_t>(view.data) % 16 != 0)
      fail(l, "tensor '" + name + "' must be 16-byte aligned on the GPU");
}

/// The kernels' tensor arguments are noalias: an output may share no byte with any other tensor (inputs
/// may share memory with each other; nothing writes them).
void checkNoOverlap(const LoadedOp &l, const std::map<std::string, TensorView> &inputs,
                    const std::map<std::string, TensorView> &outputs) {
  auto range = [](const TensorView &v) {
    auto begin = reinterpret_cast<uintptr_t>(v.data);
    return std::make_pair(begin, begin + uintptr_t(v.elements()) * uintptr_t(dtypeBytes(v.dtype)));
  };
  for (auto out = outputs.begin(); out != outputs.end(); ++out) {
    auto [b0, e0] = range(out->second);
    if (!out->second.data || b0 == e0)
      continue;
    auto clash = [&](const std::string &kind, const std::string &name, const TensorView &v) {
      auto [b1, e1] = range(v);
      if (v.data && b1 != e1 && b0 < e1 && b1 < e0)
        fail(l, "output '" + out->first + "' overlaps " + kind + " '" + name +
                    "': an output may share no memory with another tensor");
    };
    for (const auto &[name, view] : inputs)
      clash("input", name, view);
    for (auto other = std::next(out); other != outputs.end(); ++other)
      clash("output", other->first, other->second);
  }
}

std::map<std::string, TensorView> byName(const LoadedOp &l, const std::vector<TensorView> &views, bool outputs) {
  std::map<std::string, TensorView> named;
  size_t i = 0;
  for (const TensorDecl &t : l.op->tensors) {
    if (t.isOutput != outputs)
      continue;
    if (i >= views.size())
      fail(l, std::string("expected ") + (outputs ? "outputs" : "inputs") + " for every declared tensor in order; '" +
                  t.name + "' is missing");
    const TensorView &v = views[i++];
    if (v.data || !v.shape.empty() || !t.optional)
      named[t.name] = v;
  }
  if (i != views.size())
    fail(l, "got " + std::to_string(views.size()) + (outputs ? " outputs" : " inputs") + ", the op declares " +
                std::to_string(i));
  return named;
}

/// The error for a bounds check the kernel reported: status holds, per check, the failing dim + 1 (0:
/// none) and the index value. Returns without throwing when nothing failed.
void throwIfIndexOutside(const LoadedOp &l, const KernelMeta &meta, const int64_t *status, const BoundCall &call) {
  for (size_t i = 0; i < meta.checks.size(); ++i) {
    int64_t dim = status[2 * i] - 1, value = status[2 * i + 1];
    if (dim < 0)
      continue;
    const IndexCheck &c = meta.checks[i];
    std::string where = l.op->source ? l.op->source->path + ":" + std::to_string(c.line) + ":" + std::to_string(c.col) + ": "
                                     : "";
    if (c.tensor == IndexCheck::kDivision)
      fail(l, where + "integer division of " + std::to_string(value) + " by zero (or overflow) in the kernel; " +
                  "the result is incomplete");
    std::string tensor = c.tensor >= 0 && size_t(c.tensor) < l.op->tensors.size() ? l.op->tensors[c.tensor].name : "?";
    std::string extent;
    if (c.tensor >= 0 && size_t(c.tensor) < l.op->tensors.size() && size_t(dim) < l.op->tensors[c.tensor].shape.size()) {
      try {
        extent = ", outside [0, " + std::to_string(evalInt(*l.op->tensors[c.tensor].shape[dim].size, call.bindings)) + ")";
      } catch (const EvalError &) {
      }
    }
    fail(l, where + "index " + std::to_string(value) + " into tensor '" + tensor + "' dim " + std::to_string(dim) +
                extent + " (the access was skipped; the outputs are incomplete)");
  }
}

/// MOEC_CHECK_INDICES=1: device tensors get the host's index checks too (copied back), and every launch
/// waits for the kernels to report their bounds checks.
bool checkDeviceIndices() {
  static const bool enabled = [] {
    const char *v = std::getenv("MOEC_CHECK_INDICES");
    return v && std::string(v) == "1";
  }();
  return enabled;
}

/// Copies the device tensors the op checks (index ranges, `unique`) to the host and checks them there.
void checkDeviceIndexData(const LoadedOp &l, const std::map<std::string, TensorView> &inputs, const BoundCall &call) {
  std::map<std::string, TensorView> hostViews;
  std::vector<std::vector<uint8_t>> copies;
  for (const TensorDecl &t : l.op->tensors) {
    auto it = inputs.find(t.name);
    if (t.isOutput || (!t.rangeLo && !t.unique) || it == inputs.end() || it->second.device != Device::Cuda)
      continue;
    TensorView v = it->second;
    auto &bytes = copies.emplace_back(size_t(v.elements()) * dtypeBytes(v.dtype));
    if (!bytes.empty())
      l.driver->check(l.driver->api().memcpyDtoH(bytes.data(), reinterpret_cast<CUdeviceptr>(v.data), bytes.size()),
                      "cuMemcpyDtoH (MOEC_CHECK_INDICES)");
    v.data = bytes.data();
    v.device = Device::Host;
    hostViews[t.name] = v;
  }
  checkIndexData(*l.op, hostViews, call.bindings);
}

/// The workspace's size: for each output it names, one byte per row, at kWorkspaceAlignment offsets.
int64_t workspaceBytes(const LoadedOp &l, const std::map<std::string, TensorView> &outputs) {
  int64_t bytes = 0;
  for (const std::string &name : l.workspace) {
    const std::vector<int64_t> &shape = outputs.at(name).shape;
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < shape.size(); ++d)
      if (__builtin_mul_overflow(rows, shape[d], &rows))
        fail(l, "output '" + name + "' has more rows than int64 holds");
    bytes = (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
    if (__builtin_add_overflow(bytes, rows, &bytes))
      fail(l, "the workspace needs more bytes than int64 holds");
  }
  return bytes;
}

/// The stream's workspace, at least `bytes` long, zeroed on the stream ahead of the kernels.
CUdeviceptr zeroedDeviceWorkspace(const LoadedOp &l, int64_t bytes, void *stream) {
  constexpr size_t kMaxStreams = 64; // more streams than this: drop the buffers once they are idle
  size_t size = size_t(std::max<int64_t>(bytes, 1));
  std::shared_ptr<CudaBuffer> buffer;
  {
    std::lock_guard<std::mutex> lock(l.statusMutex);
    auto it = l.deviceWorkspaces.find(stream);
    if (it == l.deviceWorkspaces.end() || it->second->size() < size) {
      // A buffer kernels may still use is released only after the work queued before it is done.
      if (it != l.deviceWorkspaces.end())
        l.driver->check(l.driver->api().streamSynchronize(static_cast<CUstream>(stream)), "cuStreamSynchronize");
      if (l.deviceWorkspaces.size() >= kMaxStreams) {
        l.driver->check(l.driver->api().ctxSynchronize(), "cuCtxSynchronize");
        l.deviceWorkspaces.clear();
      }
      l.deviceWorkspaces[stream] = std::make_shared<CudaBuffer>(*l.driver, size, l.cuda->contextShared());
    }
    buffer = l.deviceWorkspaces[stream];
  }
  l.driver->check(l.driver->api().memsetD8Async(buffer->pointer(), 0, size_t(bytes), static_cast<CUstream>(stream)),
                  "cuMemsetD8Async");
  return buffer->pointer();
}

size_t statusWords(const LoadedOp &l) {
  size_t checks = 0;
  for (const KernelMeta &k : l.kernels)
    checks = std::max(checks, k.checks.size());
  return std::max<size_t>(2, 2 * checks);
}

} // namespace

/// What a call's checks depend on besides index data: every tensor's dtype, device, contiguity and shape
/// (absent ones marked) and the attributes.
static std::string signature(const LoadedOp &l, const std::map<std::string, TensorView> &inputs,
                             const std::map<std::string, TensorView> &outputs,
                             const std::map<std::string, int64_t> &attrs) {
  std::string sig;
  auto add = [&](int64_t v) { sig.append(reinterpret_cast<const char *>(&v), sizeof v); };
  for (const TensorDecl &t : l.op->tensors) {
    const auto &views = t.isOutput ? outputs : inputs;
    auto it = views.find(t.name);
    if (it == views.end()) {
      add(-1);
      continue;
    }
    const TensorView &v = it->second;
    add(static_cast<int64_t>(v.dtype) << 8 | static_cast<int64_t>(v.device) << 4 | v.isContiguous());
    add(static_cast<int64_t>(v.shape.size()));
    for (int64_t d : v.shape)
      add(d);
  }
  if (inputs.size() + outputs.size() > l.op->tensors.size())
    add(-2); // unknown names: the full check reports them
  for (const auto &[name, value] : attrs) {
    sig += name;
    add(value);
  }
  return sig;
}

const LoadedOp &Kernel::specializationFor(const std::map<std::string, TensorView> &tensors) const {
  return pick(tensors, nullptr);
}

const LoadedOp &Kernel::pick(const std::map<std::string, TensorView> &tensors,
                             const std::map<std::string, TensorView> *more) const {
  if (!tuned)
    return *loaded;
  auto find = [&](const std::map<std::string, TensorView> *in) -> const TensorView * {
    if (!in)
      return nullptr;
    auto it = in->find(tuned->tensor);
    return it == in->end() ? nullptr : &it->second;
  };
  const TensorView *view = find(&tensors);
  if (!view)
    view = find(more);
  // A missing tensor or a wrong rank: the heuristic's kernel, whose checks then report the call.
  if (!view || view->shape.size() <= tuned->axis)
    return *loaded;
  const LoadedOp *variant = tuned->forTokens(view->shape[tuned->axis]);
  return variant ? *variant : *loaded;
}

std::shared_ptr<const LoadedOp::CheckedCall> Kernel::check(const std::map<std::string, TensorView> &inputs,
                                                           const std::map<std::string, TensorView> &outputs,
                                                           const std::map<std::string, int64_t> &overrides) const {
  return checkOn(pick(inputs, &outputs), inputs, outputs, overrides);
}

std::shared_ptr<const LoadedOp::CheckedCall> Kernel::checkOn(const LoadedOp &l,
                                                             const std::map<std::string, TensorView> &inputs,
                                                             const std::map<std::string, TensorView> &outputs,
                                                             const std::map<std::string, int64_t> &overrides) const {
  const std::map<std::string, int64_t> *callAttrs = &attrs;
  std::map<std::string, int64_t> merged;
  if (!overrides.empty()) {
    merged = attrs;
    for (const auto &[name, value] : overrides)
      merged[name] = value;
    callAttrs = &merged;
  }
  std::string sig = signature(l, inputs, outputs, *callAttrs);
  {
    std::lock_guard<std::mutex> lock(l.checkedMutex);
    auto it = l.checked.find(sig);
    if (it != l.checked.end()) {
      checkIndexData(*l.op, inputs, it->second->call.bindings);
      return it->second;
    }
  }
  std::map<std::string, int64_t> all = *callAttrs;
  for (const auto &[name, value] : l.statics) {
    const AttrDecl *a = l.op->findAttr(name);
    if (!a)
      continue;
    for (const std::string &given : {a->name, a->innerName()})
      if (auto it = all.find(given); it != all.end() && it->second != value)
        fail(l, "attribute '" + given + "' is " + std::to_string(it->second) + " but the kernel was compiled for " +
                    std::to_string(value) + "; request a kernel for it");
    all.erase(a->innerName());
    all[name] = value;
  }
  auto checked = std::make_shared<LoadedOp::CheckedCall>();
  checked->call = bindCall(*l.op, l.dtype, all, inputs);
  checkSpecialization(l, checked->call);
  checkOutputs(*l.op, l.dtype, checked->call, outputs);
  checkDevices(l, inputs);
  checkDevices(l, outputs);
  checked->scalars = checked->call.kernelScalars(*l.op);
  for (size_t k = 0; k < l.kernels.size(); ++k) {
    std::vector<const dsl::Expr *> domain = l.plans[k].domain;
    int64_t runs = 1; // a row group: up to kRowGroupMembers consecutive indices of the second-last dim
    if (l.kernels[k].rowGroups) {
      if (domain.size() < 2)
        fail(l, "kernel '" + l.kernels[k].name + "' runs groups of rows but its domain has " +
                    std::to_string(domain.size()) + " dims, not 2 or more");
      int64_t members = evalInt(*domain[domain.size() - 2], checked->call.bindings);
      runs = members / kRowGroupMembers + (members % kRowGroupMembers != 0);
      domain.erase(domain.end() - 2);
    }
    int64_t units = checked->call.rows(domain);
    if (__builtin_mul_overflow(units, runs, &units))
      fail(l, "kernel '" + l.kernels[k].name + "': its domain has more row groups than int64 holds");
    if (l.kernels[k].pointRuns) {
      if (domain.size() != 1)
        fail(l, "kernel '" + l.kernels[k].name + "' runs runs of points but its domain has " +
                    std::to_string(domain.size()) + " dims, not 1");
      int64_t points = evalInt(*domain.front(), checked->call.bindings);
      units = points / kPointRunLength + (points % kPointRunLength != 0);
    }
    if (l.kernels[k].pointPerWarp && !l.plans[k].domain.empty() &&
        __builtin_mul_overflow(units, evalInt(*l.plans[k].domain.back(), checked->call.bindings), &units))
      fail(l, "kernel '" + l.kernels[k].name + "': its domain has more points than int64 holds");
    checked->units.push_back(units);
  }
  checked->workspaceBytes = workspaceBytes(l, outputs);
  // Alignment depends on the pointers, not the signature: GPU calls re-check it below on every launch.
  std::lock_guard<std::mutex> lock(l.checkedMutex);
  if (l.checked.size() < 1024) // bounded: shapes vary with batch size
    l.checked.emplace(std::move(sig), checked);
  return checked;
}

void Kernel::launch(const std::vector<TensorView> &inputs, const std::vector<TensorView> &outputs, void *stream,
                    const std::map<std::string, int64_t> &overrides) const {
  std::map<std::string, TensorView> tensors = byName(*loaded, inputs, false);
  for (auto &[name, view] : byName(*loaded, outputs, true))
    tensors[name] = view;
  launch(tensors, stream, overrides);
}

void Kernel::launch(const std::map<std::string, TensorView> &tensors, void *stream,
                    const std::map<std::string, int64_t> &overrides) const {
  const LoadedOp &l = pick(tensors, nullptr);
  std::map<std::string, TensorView> inputs, outputs;
  for (const auto &[name, view] : tensors) {
    const TensorDecl *t = l.op->findTensor(name);
    if (!t)
      fail(l, "unknown tensor '" + name + "'");
    (t->isOutput ? outputs : inputs)[name] = view;
  }
  std::shared_ptr<const LoadedOp::CheckedCall> checked = checkOn(l, inputs, outputs, overrides);
  checkNoOverlap(l, inputs, outputs); // depends on the pointers: checked on every launch

  // The ABI: one pointer per tensor, the status buffer of the bounds checks, then the scalars.
  std::vector<void *> pointers;
  pointers.reserve(l.op->tensors.size() + 1);
  for (const TensorDecl &t : l.op->tensors) {
    auto it = tensors.find(t.name);
    pointers.push_back(it == tensors.end() ? nullptr : it->second.data);
  }
  std::vector<int64_t> scalars = checked->scalars;
  if (!l.onGpu()) {
    std::vector<int64_t> status(statusWords(l));
    pointers.push_back(status.data());
    // Zeroed for every call; one buffer per launching thread, so concurrent calls do not share it.
    thread_local std::vector<uint8_t> workspace;
    if (!l.workspace.empty()) {
      if (workspace.size() < size_t(checked->workspaceBytes))
        workspace.resize(checked->workspaceBytes);
      std::fill_n(workspace.begin(), checked->workspaceBytes, 0);
      pointers.push_back(workspace.data());
    }
    for (size_t k = 0; k < l.kernels.size(); ++k) {
      if (l.cpuLauncher)
        l.cpuLauncher(k, l.cpu[k], pointers, scalars, checked->units[k], tensors);
      else
        launchCpu(l.cpu[k], pointers, scalars, checked->units[k], ThreadPool::shared(),
                  l.kernels[k].schedule.rowsPerBlock);
      throwIfIndexOutside(l, l.kernels[k], status.data(), checked->call);
    }
    return;
  }

  checkAlignment(l, tensors);
  // The module's context, current on this thread while its kernels are launched (any thread may launch).
  CudaContext::Scope current(*l.driver, l.cuda->context());
  bool readStatus = checkDeviceIndices();
  if (readStatus)
    checkDeviceIndexData(l, inputs, checked->call);
  std::shared_ptr<CudaBuffer> status;
  {
    std::lock_guard<std::mutex> lock(l.statusMutex);
    if (!l.deviceStatus)
      l.deviceStatus = std::make_shared<CudaBuffer>(*l.driver, statusWords(l) * sizeof(int64_t),
                                                    l.cuda->contextShared());
    status = l.deviceStatus;
  }
  pointers.push_back(reinterpret_cast<void *>(status->pointer()));
  if (!l.workspace.empty())
    pointers.push_back(reinterpret_cast<void *>(zeroedDeviceWorkspace(l, checked->workspaceBytes, stream)));
  for (size_t k = 0; k < l.kernels.size(); ++k) {
    const KernelMeta &meta = l.kernels[k];
    int64_t perBlock = meta.schedule.rowsPerBlock;
    int64_t unitsPerBlock = meta.rowGroups ? 1 : perBlock; // a group of rows takes a whole block
    int64_t blocks = (checked->units[k] + unitsPerBlock - 1) / unitsPerBlock;
    if (blocks > int64_t(UINT32_MAX))
      fail(l, "kernel '" + meta.name + "' needs " + std::to_string(blocks) + " thread blocks, more than CUDA allows");
    CudaDim3 grid{static_cast<unsigned>(blocks), 1, 1};
    CudaDim3 block{static_cast<unsigned>(meta.schedule.threads), static_cast<unsigned>(perBlock), 1};
    std::vector<void *> params;
    for (void *&p : pointers)
      params.push_back(&p);
    for (int64_t &s : scalars)
      params.push_back(&s);
    launchCuda(*l.driver, static_cast<CUfunction>(l.functions[k]), grid, block, static_cast<CUstream>(stream),
               params.data());
    if (readStatus && !meta.checks.empty()) {
      std::vector<int64_t> words(statusWords(l));
      l.driver->check(l.driver->api().streamSynchronize(static_cast<CUstream>(stream)), "cuStreamSynchronize");
      l.driver->check(l.driver->api().memcpyDtoH(words.data(), status->pointer(), words.size() * sizeof(int64_t)),
                      "cuMemcpyDtoH (MOEC_CHECK_INDICES)");
      if (std::any_of(words.begin(), words.end(), [](int64_t w) { return w != 0; })) {
        std::vector<int64_t> zeros(words.size());
        l.driver->api().memcpyHtoD(status->pointer(), zeros.data(), zeros.size() * sizeof(int64_t));
        throwIfIndexOutside(l, meta, words.data(), checked->call);
      }
    }
  }
}

std::string requestText(const std::string &name, DType dtype, const std::map<std::string, int64_t> &dims,
                        const std::map<std::string, int64_t> &attrs, const std::set<std::string> &with) {
  std::string text = name;
  text += '|';
  text += dsl::dtypeName(dtype);
  for (const auto *values : {&dims, &attrs}) {
    text += '|';
    for (const auto &[k, v] : *values) {
      text += k;
      text += '=';
      text += std::to_string(v);
      text += ',';
    }
  }
  text += '|';
  for (const std::string &w : with) {
    text += w;
    text += ',';
  }
  return text;
}

} // namespace moec
