//===- FuzzBundle.cpp - libFuzzer: the bundle reader -----------------------===//
//
// Every input becomes the bundle.json of a bundle directory that also holds the built-in ops' sources
// (<op>.moe) and a PTX file (kernel.ptx). Bundle::open must return a bundle or throw std::runtime_error
// (ArgumentError and DslError are runtime_errors too). An opened bundle's entries are then loaded on a
// fake CUDA driver (every call succeeds), by index and by request, as a program would.
//===----------------------------------------------------------------------===//
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/Bundle.h"
#include "moec/runtime/CudaDriver.h"
#include "FakeCudaDriver.h"

#include "FuzzUtil.h"

#include <cstring>

using namespace moec;
namespace fs = std::filesystem;

namespace {

CudaDriverTable fakeDriver() { return moec::fake::fakeCudaDriverTable(); }

const fs::path &bundleDir() {
  static const fs::path dir = [] {
    fs::path d = fuzz::scratchDir() / "bundle";
    fs::create_directories(d);
    for (const BuiltinOp &op : builtinOps())
      fuzz::writeFile(d / (std::string(op.name) + ".moe"), op.source);
    fuzz::writeFile(d / "kernel.ptx", std::string("// fake PTX\n.version 8.0\n.target sm_90\n"));
    return d;
  }();
  return dir;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 64 * 1024)
    return -1;
  static const std::unique_ptr<CudaDriver> driver = CudaDriver::fromTable(fakeDriver());
  const fs::path &dir = bundleDir();
  fuzz::writeFile(dir / "bundle.json", data, size);
  std::unique_ptr<Bundle> bundle;
  try {
    bundle = Bundle::open(dir, *driver);
  } catch (const std::runtime_error &) {
    return 0;
  }
  for (size_t i = 0; i < bundle->entries().size() && i < 8; ++i) {
    const Bundle::Entry &e = bundle->entries()[i];
    try {
      (void)bundle->get(i);
    } catch (const std::runtime_error &) {
    }
    KernelRequest request;
    request.dtype = e.dtype;
    request.attrs = e.statics;
    request.with = e.present;
    try {
      (void)bundle->get(e.op, request);
    } catch (const std::runtime_error &) {
    }
  }
  return 0;
}
