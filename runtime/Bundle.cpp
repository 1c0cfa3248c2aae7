//===- Bundle.cpp - Ahead-of-time kernels, loaded without a compiler ------===//
#include "moec/runtime/Bundle.h"

#include "moec/dsl/Parser.h"
#include "moec/runtime/CudaDriver.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>

namespace moec {

namespace {

constexpr int kFormat = 1;

/// A bundle.json field with a value that the JSON types allow but the bundle does not.
struct BadField : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string readFile(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read '" + path.string() + "'");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A file name inside the bundle directory, as bundle.json must give it: no directories, nothing that
/// leaves the bundle (an absolute path, "..").
std::string bundleFileName(const nlohmann::json &j, const char *what) {
  std::string name = j.get<std::string>();
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos)
    throw BadField(std::string(what) + " '" + name + "' is not a file name in the bundle directory");
  return name;
}

void writeFile(const std::filesystem::path &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush())
    throw std::runtime_error("cannot write '" + path.string() + "'");
}

nlohmann::json toJson(const KernelMeta &k) {
  return {{"name", k.name},
          {"output", k.output},
          {"rowsPerBlock", k.schedule.rowsPerBlock},
          {"threads", k.schedule.threads},
          {"vector", k.schedule.vector},
          {"unroll", k.schedule.unroll},
          {"pointPerWarp", k.pointPerWarp}};
}

/// An integer field in [lo, hi]. (A float would convert to int64_t with undefined behaviour when out of range.)
int64_t intField(const nlohmann::json &j, const char *key, int64_t lo, int64_t hi) {
  const nlohmann::json &v = j.at(key);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(hi)) ||
      v.get<int64_t>() < lo || v.get<int64_t>() > hi)
    throw BadField("'" + std::string(key) + "' is " + v.dump() + ", expected an integer in [" +
                             std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v.get<int64_t>();
}

KernelMeta kernelFromJson(const nlohmann::json &j) {
  // A launch divides by rowsPerBlock and threads; CUDA allows 1024 threads per block.
  return {j.at("name"),
          j.at("output"),
          {intField(j, "rowsPerBlock", 1, 1024), intField(j, "threads", 1, 1024), intField(j, "vector", 1, 1024),
           intField(j, "unroll", 1, 1024)},
          j.at("pointPerWarp")};
}

std::string describe(const Bundle::Entry &e) {
  std::string s = e.op + " " + dsl::dtypeName(e.dtype) + " " + e.target;
  for (const auto &[k, v] : e.statics)
    s += " " + k + "=" + std::to_string(v);
  for (const std::string &p : e.present)
    s += " +" + p;
  return s;
}

} // namespace

void splitRequest(const dsl::OpDef &op, const KernelRequest &request, std::map<std::string, int64_t> &statics,
                  std::map<std::string, int64_t> &runtimeAttrs) {
  statics = request.dims;
  for (const auto &[name, value] : request.attrs) {
    const dsl::AttrDecl *a = op.findAttr(name);
    if (!a)
      throw ArgumentError(op.name + ": unknown attribute '" + name + "'");
    (a->isStatic ? statics : runtimeAttrs)[a->name] = value;
  }
  for (const dsl::AttrDecl &a : op.attrs)
    if (a.isStatic && a.defaultValue && !statics.count(a.name))
      statics[a.name] = *a.defaultValue;
}

void Bundle::write(const std::filesystem::path &dir, const std::vector<Entry> &entries,
                   const std::vector<std::string> &ptx, const std::map<std::string, std::string> &sources,
                   const std::string &compiler) {
  std::filesystem::create_directories(dir);
  nlohmann::json index = {{"format", kFormat}, {"compiler", compiler}, {"ops", nlohmann::json::object()},
                          {"entries", nlohmann::json::array()}};
  for (const auto &[name, text] : sources) {
    writeFile(dir / (name + ".moe"), text);
    index["ops"][name] = name + ".moe";
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry &e = entries[i];
    writeFile(dir / e.codeFile, ptx[i]);
    nlohmann::json kernels = nlohmann::json::array();
    for (const KernelMeta &k : e.kernels)
      kernels.push_back(toJson(k));
    index["entries"].push_back({{"op", e.op},
                                {"dtype", dsl::dtypeName(e.dtype)},
                                {"statics", e.statics},
                                {"present", e.present},
                                {"target", e.target},
                                {"code", e.codeFile},
                                {"kernels", kernels}});
  }
  writeFile(dir / "bundle.json", index.dump(2) + "\n");
}

std::unique_ptr<Bundle> Bundle::open(const std::filesystem::path &dir, const CudaDriver &driver) {
  std::unique_ptr<Bundle> b(new Bundle(dir, driver));
  std::filesystem::path indexPath = dir / "bundle.json";
  try {
    nlohmann::json index = nlohmann::json::parse(readFile(indexPath));
    if (index.at("format") != kFormat)
      throw std::runtime_error("unsupported bundle format " + index.at("format").dump());
    for (const auto &[name, file] : index.at("ops").items()) {
      std::filesystem::path source = dir / bundleFileName(file, "op source");
      b->ops[name] = dsl::loadOpText(source.string(), readFile(source));
    }
    for (const nlohmann::json &j : index.at("entries")) {
      Entry e;
      e.op = j.at("op");
      auto dtype = dsl::parseDType(j.at("dtype"));
      if (!dtype || !b->ops.count(e.op))
        throw std::runtime_error("entry for '" + e.op + "' has an unknown dtype or op");
      e.dtype = *dtype;
      for (const auto &[name, value] : j.at("statics").items())
        e.statics[name] = intField(j.at("statics"), name.c_str(), INT64_MIN, INT64_MAX);
      e.present = j.at("present").get<std::set<std::string>>();
      e.target = j.at("target");
      e.codeFile = bundleFileName(j.at("code"), "code file");
      for (const nlohmann::json &k : j.at("kernels"))
        e.kernels.push_back(kernelFromJson(k));
      b->list.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception &error) {
    throw std::runtime_error("'" + indexPath.string() + "' is malformed: " + error.what());
  } catch (const BadField &error) {
    throw std::runtime_error("'" + indexPath.string() + "' is malformed: " + error.what());
  }
  return b;
}

Bundle::Bundle(std::filesystem::path dir, const CudaDriver &driver) : dir(std::move(dir)), driver(driver) {}

Bundle::~Bundle() = default;

Kernel Bundle::get(size_t index, const std::map<std::string, int64_t> &runtimeAttrs) {
  const Entry &e = list.at(index);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(index);
  if (it == loaded.end()) {
    if (!driver.available())
      throw ArgumentError("bundle kernels run on a GPU: " + driver.unavailableReason());
    if (!context)
      context = std::make_shared<const CudaContext>(driver, 0);
    auto l = std::make_shared<LoadedOp>();
    l->op = ops.at(e.op);
    l->dtype = e.dtype;
    l->statics = e.statics;
    l->present = e.present;
    l->kernels = e.kernels;
    l->driver = &driver;
    l->cuda = std::make_shared<CudaModule>(driver, readFile(dir / e.codeFile), context);
    for (const KernelMeta &k : e.kernels)
      l->functions.push_back(l->cuda->function(k.name));
    l->plan();
    it = loaded.emplace(index, std::move(l)).first;
  }
  return Kernel(it->second, runtimeAttrs);
}

Kernel Bundle::get(const std::string &opName, const KernelRequest &request) {
  auto op = ops.find(opName);
  if (op == ops.end())
    throw ArgumentError("the bundle in '" + dir.string() + "' has no op '" + opName + "'");
  std::map<std::string, int64_t> statics, runtimeAttrs;
  splitRequest(*op->second, request, statics, runtimeAttrs);
  std::set<std::string> present = request.with;
  dsl::Bindings known = dsl::specializationBindings(*op->second, present, statics);
  for (const dsl::TensorDecl &t : op->second->tensors)
    if (t.optional && t.isOutput && dsl::decide(*t.when, known).value_or(false))
      present.insert(t.name);

  std::string available;
  for (size_t i = 0; i < list.size(); ++i) {
    const Entry &e = list[i];
    if (e.op != opName)
      continue;
    if (e.dtype != request.dtype || e.statics != statics || e.present != present) {
      available += "\n  " + describe(e);
      continue;
    }
    return get(i, runtimeAttrs);
  }
  throw ArgumentError(opName + ": the bundle has no " + dsl::dtypeName(request.dtype) +
                      " specialization for these static values and optional tensors; it has:" +
                      (available.empty() ? std::string(" none") : available));
}

} // namespace moec
