//===- PyKernel.cpp ---------------------------------------------------------===//
#include "PyKernel.h"

#include "DLPack.h"

#include "moec/runtime/Binding.h"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace moec::python {

PyKernel::PyKernel(std::string op, std::string target, Kernel k, std::map<std::string, int64_t> runtimeAttrs)
    : opName(std::move(op)), targetName(std::move(target)), kernel(std::move(k)), attrs(std::move(runtimeAttrs)) {
  const LoadedOp &l = kernel.specialization();
  for (const dsl::TensorDecl &t : l.op->tensors) {
    bool taken = !t.optional || l.present.count(t.name);
    if (taken)
      (t.isOutput ? outs : ins).push_back(&t);
  }
}

std::vector<std::string> PyKernel::inputNames() const {
  std::vector<std::string> names;
  for (const dsl::TensorDecl *t : ins)
    names.push_back(t->name);
  return names;
}

std::vector<std::string> PyKernel::outputNames() const {
  std::vector<std::string> names;
  for (const dsl::TensorDecl *t : outs)
    names.push_back(t->name);
  return names;
}

std::map<std::string, std::string> PyKernel::dtypes() const {
  std::map<std::string, std::string> types;
  const LoadedOp &l = kernel.specialization();
  for (const auto *list : {&ins, &outs})
    for (const dsl::TensorDecl *t : *list)
      types[t->name] = dsl::dtypeName(t->elem.resolve(l.dtype));
  return types;
}

std::map<std::string, std::vector<int64_t>>
PyKernel::outputShapes(const std::map<std::string, TensorView> &inputs) const {
  // As Kernel::launch binds a call: the runtime attributes requested, plus the static ones compiled in.
  const LoadedOp &l = kernel.specialization();
  std::map<std::string, int64_t> all = attrs;
  for (const auto &[name, value] : l.statics)
    if (l.op->findAttr(name))
      all[name] = value;
  return bindCall(*l.op, l.dtype, all, inputs).outputShapes;
}

py::list PyKernel::run(const py::sequence &inputs, const py::object &out, uintptr_t stream,
                       const py::object &dlpackStream, const py::object &allocate) const {
  const LoadedOp &l = kernel.specialization();
  auto fail = [&](const std::string &message) { throw ArgumentError(opName + ": " + message); };
  auto listed = [](const std::vector<const dsl::TensorDecl *> &tensors) {
    std::string names;
    for (const dsl::TensorDecl *t : tensors)
      names += (names.empty() ? "" : ", ") + t->name;
    return names;
  };
  if (py::len(inputs) != ins.size())
    fail("expected " + std::to_string(ins.size()) + " inputs (" + listed(ins) + "), got " +
         std::to_string(py::len(inputs)));

  std::vector<Borrowed> held; // the capsules stay alive until the kernels are done
  std::map<std::string, TensorView> tensors;
  auto take = [&](py::handle obj, const dsl::TensorDecl &t) {
    held.push_back(borrow(obj, opName, t.name, t.elem.resolve(l.dtype), dlpackStream));
    tensors[t.name] = held.back().view;
  };
  for (size_t i = 0; i < ins.size(); ++i)
    take(inputs[i], *ins[i]);

  py::list results;
  if (out.is_none()) {
    std::map<std::string, std::vector<int64_t>> shapes;
    {
      py::gil_scoped_release release;
      shapes = outputShapes(tensors);
    }
    for (const dsl::TensorDecl *t : outs) {
      auto shape = shapes.find(t->name);
      if (shape == shapes.end())
        continue; // an optional output this call does not produce
      py::tuple pair = allocate(t->name, dsl::dtypeName(t->elem.resolve(l.dtype)), py::cast(shape->second));
      results.append(pair[0]);
      take(pair[1], *t);
    }
  } else {
    py::sequence given = py::reinterpret_borrow<py::sequence>(out);
    if (py::len(given) != outs.size())
      fail("expected " + std::to_string(outs.size()) + " outputs in out= (" + listed(outs) + "), got " +
           std::to_string(py::len(given)));
    for (size_t i = 0; i < outs.size(); ++i)
      take(given[i], *outs[i]);
  }
  {
    py::gil_scoped_release release;
    kernel.launch(tensors, reinterpret_cast<void *>(stream));
  }
  return results;
}

} // namespace moec::python
