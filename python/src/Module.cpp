//===- Module.cpp - moec._moec: the Python module's compiled part ------------===//
//
// The C++ API under Python: Runtime::get (compiled on first use, cached in memory and on disk), kernel
// launches on DLPack tensors, and what `moec list`, `moec emit` and `moec plan` compute (tools/moec/Api.h,
// the same functions the commands call). python/moec/__init__.py wraps it: it picks the array library
// that allocates outputs and the CUDA stream.
//
// Errors: moec.ArgumentError (a ValueError) for what the caller got wrong: ArgumentError, a request the op
// does not allow, a bad option value; moec.DslError (a ValueError) for a bad .moe; moec.CompileError (a
// RuntimeError) for a pipeline failure; other failures (a CUDA driver error, a file) are RuntimeErrors.
// Messages are the runtime's.
//===----------------------------------------------------------------------===//
#include "Api.h"
#include "DLPack.h"
#include "PyKernel.h"

#include "moec/compiler/Pipeline.h"
#include "moec/jit/Runtime.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/Binding.h"
#include "moec/runtime/Bundle.h" // splitRequest
#include "moec/runtime/CudaDriver.h"
#include "moec/tune/ConfigSpace.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <filesystem>
#include <memory>
#include <mutex>

namespace py = pybind11;

namespace moec::python {
namespace {

/// An argument error found here rather than by the runtime: a request the op does not allow, reported
/// with the runtime's own message.
[[noreturn]] void argumentError(const std::string &message) { throw ArgumentError(message); }

DType parseType(const std::string &name) {
  std::optional<DType> t = dsl::parseDType(name);
  if (!t)
    argumentError("unknown dtype '" + name + "' (f16, bf16, f32, i32, i8, bool)");
  return *t;
}

Schedule parseSchedule(const std::optional<std::string> &text) {
  if (!text)
    return {};
  try {
    return tune::parseConfig(*text);
  } catch (const std::invalid_argument &e) {
    argumentError(std::string("schedule '") + *text + "': " + e.what());
  }
}

/// "cpu", "cuda" (or "ptx": the GPU, PTX for `arch`, default the device's) or "ascend-sim" (the tiled
/// Ascend kernels run on the UB simulator, for `chip`); empty: the runtime's default, CUDA if a device is
/// found, else the CPU (named, so that it shares its Runtime with a request that names it).
Target resolveTarget(const std::string &target, const std::string &arch, const std::string &chip) {
  if (target.empty())
    return CudaDriver::instance().available() ? resolveTarget("cuda", arch, chip) : Target::cpu();
  if (target == "cpu")
    return Target::cpu();
  if (target == "cuda" || target == "ptx") {
    const CudaDriver &driver = CudaDriver::instance();
    if (!arch.empty())
      return Target::ptx(arch);
    // Without a device the Runtime reports why ("target ... needs a GPU: ..."); the arch is then moot.
    return Target::ptx(driver.available() ? driver.archName(0) : "sm_90");
  }
  if (target == "ascend-sim") {
    try {
      return Target::ascendSimulator(ascend::builtinChip(chip));
    } catch (const std::exception &e) {
      argumentError(std::string("chip: ") + e.what());
    }
  }
  argumentError("unknown target '" + target + "' (cpu, cuda, ascend-sim; None: CUDA if a device is found, else cpu)");
}

/// One Runtime per target, made on first use and shared by every thread. Deliberately never destroyed: the
/// kernels they loaded may still be referenced by Python objects while the interpreter shuts down.
Runtime &runtimeFor(const Target &target) {
  static std::mutex mutex;
  static auto *runtimes = new std::map<std::string, std::unique_ptr<Runtime>>();
  std::string key = target.str();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = runtimes->find(key);
  if (it == runtimes->end()) {
    Runtime::Options options;
    options.target = target;
    it = runtimes->emplace(key, std::make_unique<Runtime>(options)).first;
  }
  return *it->second;
}

/// Loads `op` as Runtime::get does; an unknown name (neither a built-in op nor a file) is the caller's error,
/// a file that fails to read is not.
std::unique_ptr<dsl::OpDef> loadOpChecked(const std::string &op) {
  try {
    return loadOp(op);
  } catch (const dsl::DslError &) {
    throw;
  } catch (const std::runtime_error &e) {
    if (!findBuiltinOp(op) && !std::filesystem::is_regular_file(op))
      argumentError(e.what());
    throw;
  }
}

/// Why Runtime::get threw CompileError: a request the op does not allow (an argument error) or a failure of
/// the pipeline. The request is resolved again the way the runtime resolves it before compiling.
[[noreturn]] void rethrowCompileError(const CompileError &error, const std::string &op,
                                      const KernelRequest &request, const Target &target) {
  std::unique_ptr<dsl::OpDef> def = loadOpChecked(op);
  Specialization spec{request.dtype, {}, target, request.schedule, request.with};
  std::map<std::string, int64_t> runtimeAttrs;
  splitRequest(*def, request, spec.statics, runtimeAttrs);
  try {
    (void)resolve(*def, spec);
  } catch (const CompileError &e) {
    argumentError(e.what());
  }
  throw error;
}

PyKernel get(const std::string &op, const std::string &dtype, const std::map<std::string, int64_t> &dims,
             const std::map<std::string, int64_t> &attrs, const std::vector<std::string> &with,
             const std::string &target, const std::string &arch, const std::string &chip,
             const std::optional<std::string> &schedule) {
  KernelRequest request;
  request.dtype = parseType(dtype);
  request.dims = dims;
  request.attrs = attrs;
  request.with.insert(with.begin(), with.end());
  request.schedule = parseSchedule(schedule);
  Target resolved = resolveTarget(target, arch, chip);

  py::gil_scoped_release release; // compiling takes milliseconds to seconds; other threads run meanwhile
  Runtime &runtime = runtimeFor(resolved);
  try {
    Kernel kernel = runtime.get(op, request);
    std::map<std::string, int64_t> runtimeAttrs, statics;
    splitRequest(*kernel.specialization().op, request, statics, runtimeAttrs);
    return PyKernel(op, runtime.target().str(), std::move(kernel), std::move(runtimeAttrs));
  } catch (const CompileError &e) {
    rethrowCompileError(e, op, request, runtime.target());
  } catch (const dsl::DslError &) {
    throw;
  } catch (const ArgumentError &) {
    throw;
  } catch (const std::runtime_error &) {
    loadOpChecked(op); // the op could not be loaded: say whose error it is
    throw;
  }
}

std::vector<std::string> assignments(const std::map<std::string, int64_t> &values) {
  std::vector<std::string> items;
  for (const auto &[name, value] : values)
    items.push_back(name + "=" + std::to_string(value));
  return items;
}

std::string emit(const std::string &op, const std::optional<std::string> &stage, const std::string &target,
                 const std::string &arch, const std::string &chip, const std::optional<std::string> &chipFile,
                 const std::string &dtype, const std::map<std::string, int64_t> &dims,
                 const std::map<std::string, int64_t> &attrs, const std::vector<std::string> &with,
                 const std::optional<std::string> &schedule, const std::optional<std::string> &dumpDir) {
  cli::EmitOptions o;
  o.op = op;
  o.emit = stage.value_or("");
  o.target.target = target;
  o.target.arch = arch;
  o.target.chip.chip = chip;
  o.target.chip.chipFile = chipFile.value_or("");
  o.target.dtype = dtype;
  o.target.schedule = parseSchedule(schedule);
  o.dims = assignments(dims);
  o.attrs = assignments(attrs);
  o.with = with;
  o.dumpDir = dumpDir.value_or("");
  if (target != "cpu" && target != "ptx" && target != "ptx-emu" && target != "ascend")
    argumentError("unknown target '" + target + "' (cpu, ptx, ptx-emu, ascend)");
  py::gil_scoped_release release;
  return cli::emitText(o);
}

py::tuple plan(const std::string &op, const std::string &chip, const std::optional<std::string> &chipFile,
               const std::string &dtype, const std::map<std::string, int64_t> &dims,
               const std::map<std::string, int64_t> &attrs, const std::vector<std::string> &with,
               const std::map<std::string, int64_t> &liveRows, const std::optional<std::string> &config) {
  cli::PlanOptions o;
  o.op = op;
  o.chip.chip = chip;
  o.chip.chipFile = chipFile.value_or("");
  o.dtype = dtype;
  o.dims = assignments(dims);
  o.attrs = assignments(attrs);
  o.with = with;
  o.liveRows = assignments(liveRows);
  o.config = config.value_or("");
  std::string table, json, header;
  {
    py::gil_scoped_release release;
    ascend::Plan p = cli::makePlan(o);
    table = ascend::planTable(p);
    json = ascend::planToJson(p).dump(2) + "\n";
    header = ascend::planHeader(p);
  }
  return py::make_tuple(table, json, header);
}

py::dict listOps() {
  py::dict ops;
  for (const BuiltinOp &b : builtinOps())
    ops[py::str(b.name)] = cli::describeOp(*loadOp(b.name));
  return ops;
}

py::dict view(py::handle obj) {
  Borrowed b = borrow(obj, "moec.view", "tensor", DType::BF16, py::none());
  py::dict d;
  d["data"] = reinterpret_cast<uintptr_t>(b.view.data);
  d["dtype"] = dsl::dtypeName(b.view.dtype);
  d["shape"] = py::tuple(py::cast(b.view.shape));
  d["strides"] = b.view.strides.empty() ? py::object(py::none()) : py::object(py::tuple(py::cast(b.view.strides)));
  d["device"] = b.view.device == Device::Cuda ? "cuda" : "host";
  return d;
}

// The module's exception types (ArgumentError and DslError are ValueErrors, CompileError a RuntimeError).
py::exception<ArgumentError> *argumentErrorType;
py::exception<dsl::DslError> *dslErrorType;
py::exception<CompileError> *compileErrorType;

void translate(std::exception_ptr p) {
  try {
    if (p)
      std::rethrow_exception(p);
  } catch (const ArgumentError &e) {
    PyErr_SetString(argumentErrorType->ptr(), e.what());
  } catch (const CLI::ValidationError &e) { // an option of emit/plan: the command's message
    PyErr_SetString(argumentErrorType->ptr(), e.what());
  } catch (const std::invalid_argument &e) { // a missing or bad value (AscendPlanner, config text)
    PyErr_SetString(argumentErrorType->ptr(), e.what());
  } catch (const dsl::DslError &e) {
    PyErr_SetString(dslErrorType->ptr(), e.what());
  } catch (const CompileError &e) {
    PyErr_SetString(compileErrorType->ptr(), e.what());
  } // anything else: pybind11's translators (std::runtime_error: RuntimeError)
}

} // namespace
} // namespace moec::python

PYBIND11_MODULE(_moec, m) {
  using namespace moec::python;
  m.doc() = "moec's compiled part; use the moec package";

  // Never destroyed: a translator may run while the interpreter shuts down.
  argumentErrorType = new py::exception<moec::ArgumentError>(m, "ArgumentError", PyExc_ValueError);
  dslErrorType = new py::exception<moec::dsl::DslError>(m, "DslError", PyExc_ValueError);
  compileErrorType = new py::exception<moec::CompileError>(m, "CompileError", PyExc_RuntimeError);
  py::register_exception_translator(&translate);

  py::class_<PyKernel>(m, "Kernel")
      .def_property_readonly("op", &PyKernel::op)
      .def_property_readonly("target", &PyKernel::target)
      .def_property_readonly("dtype", [](const PyKernel &k) { return moec::dsl::dtypeName(k.specialization().dtype); })
      .def_property_readonly("statics", [](const PyKernel &k) { return k.specialization().statics; })
      .def_property_readonly("attrs", &PyKernel::runtimeAttrs)
      .def_property_readonly("inputs", &PyKernel::inputNames)
      .def_property_readonly("outputs", &PyKernel::outputNames)
      .def_property_readonly("dtypes", &PyKernel::dtypes)
      .def_property_readonly("on_gpu", [](const PyKernel &k) { return k.specialization().onGpu(); })
      .def_property_readonly("signature",
                             [](const PyKernel &k) { return moec::cli::describeOp(*k.specialization().op); })
      .def("run", &PyKernel::run, py::arg("inputs"), py::arg("out"), py::arg("stream"), py::arg("dlpack_stream"),
           py::arg("allocate"));

  m.def("get", &get, py::arg("op"), py::arg("dtype"), py::arg("dims"), py::arg("attrs"), py::arg("with_"),
        py::arg("target"), py::arg("arch"), py::arg("chip"), py::arg("schedule"));
  m.def("emit", &emit, py::arg("op"), py::arg("stage"), py::arg("target"), py::arg("arch"), py::arg("chip"),
        py::arg("chip_file"), py::arg("dtype"), py::arg("dims"), py::arg("attrs"), py::arg("with_"),
        py::arg("schedule"), py::arg("dump_dir"));
  m.def("plan", &plan, py::arg("op"), py::arg("chip"), py::arg("chip_file"), py::arg("dtype"), py::arg("dims"),
        py::arg("attrs"), py::arg("with_"), py::arg("live_rows"), py::arg("config"));
  m.def("list_ops", &listOps);
  m.def("signature", [](const std::string &op) { return moec::cli::describeOp(*loadOpChecked(op)); }, py::arg("op"));
  m.def("view", &view, py::arg("obj"));
  m.def("cuda_available", [] { return moec::CudaDriver::instance().available(); });
}
