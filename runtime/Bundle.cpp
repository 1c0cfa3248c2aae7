//===- Bundle.cpp - Ahead-of-time kernels, loaded without a compiler ------===//
#include "moec/runtime/Bundle.h"

#include "moec/contracts/Files.h"
#include "moec/contracts/NearestName.h"
#include "moec/dsl/Parser.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/KernelJson.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace moec {

namespace {

// 2: kernels take a status buffer for their bounds checks; 3: and a workspace; 4: a row group is at most
// kRowGroupMembers members (a block each); 5: kernels may run runs of points (pointRuns), which a reader of
// format 4 would launch a warp per point; 6: a run of points is 8 points (kPointRunLength), not 32, and
// a group of rows 16 members (kRowGroupMembers), not 32.
constexpr int kFormat = 6;

/// Only regular files: a FIFO in a bundle would block the read forever.
std::string readFile(const std::filesystem::path &path) { return readRegularFile(path.string()); }

void writeFile(const std::filesystem::path &path, const std::string &text) {
  writeFileReplacing(path.string(), {text});
}

/// `name`, a file the bundle names in `field`, as a path inside `dir`: a relative name with no "..", which
/// resolves (symlinks followed) to somewhere inside the bundle, so a bundle cannot make us read
/// /etc/passwd or ../../secret.
std::filesystem::path fileInBundle(const std::filesystem::path &dir, const std::string &name,
                                   const std::string &where, const std::string &field) {
  std::filesystem::path rel(name);
  auto fail = [&](const std::string &why) {
    throw std::runtime_error(where + ": '" + field + "': '" + name + "' " + why);
  };
  if (name.empty() || rel.is_absolute() || name.find('\0') != std::string::npos)
    fail("must be a relative file name inside the bundle directory");
  for (const auto &part : rel)
    if (part == "..")
      fail("must not contain '..'");
  std::error_code ec;
  std::filesystem::path root = std::filesystem::weakly_canonical(dir, ec);
  std::filesystem::path resolved = std::filesystem::weakly_canonical(dir / rel, ec);
  auto [rootEnd, _] = std::mismatch(root.begin(), root.end(), resolved.begin(), resolved.end());
  if (ec || rootEnd != root.end() || resolved == root)
    fail("resolves to '" + resolved.string() + "', outside the bundle directory '" + root.string() + "'");
  return dir / rel;
}

/// Static values: each a static dim (in [1, 2^31)) or static attribute (a bool one 0 or 1; others in
/// [-2^31, 2^31), since -1 is a common "not given" default) of `op`, passing the op's own `require`s.
std::map<std::string, int64_t> staticsFromJson(const nlohmann::json &j, const dsl::OpDef &op,
                                               const std::string &where) {
  if (!j.is_object())
    throw std::runtime_error(where + ": 'statics' must be an object, got " + j.dump());
  std::map<std::string, int64_t> statics;
  for (const auto &[name, value] : j.items()) {
    const dsl::DimDecl *dim = op.findDim(name);
    const dsl::AttrDecl *attr = op.findAttr(name);
    if (!(dim && dim->isStatic) && !(attr && attr->isStatic))
      throw std::runtime_error(where + ": 'statics': '" + name + "' is not a static dim or attribute of " + op.name);
    constexpr int64_t kLimit = int64_t(1) << 31;
    int64_t min = dim ? 1 : attr->isBool ? 0 : -kLimit, max = attr && attr->isBool ? 1 : kLimit - 1;
    statics[name] = integerField(j, name, min, max, where + ": 'statics'");
  }
  // The op's own `require`s that the static values alone decide.
  dsl::Bindings known = dsl::specializationBindings(op, {}, statics);
  for (const dsl::Require &r : op.requires_)
    if (dsl::decide(*r.cond, known) == false)
      throw std::runtime_error(where + ": 'statics' fail the op's check: " + r.message);
  return statics;
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
      throw ArgumentError(op.name + ": unknown attribute '" + name + "'" + didYouMean(name, op.attrNames(false)));
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
      kernels.push_back(kernelMetaToJson(k));
    index["entries"].push_back({{"op", e.op},
                                {"dtype", dsl::dtypeName(e.dtype)},
                                {"statics", e.statics},
                                {"present", e.present},
                                {"target", e.target},
                                {"code", e.codeFile},
                                {"kernels", kernels},
                                {"workspace", e.workspace}});
  }
  writeFile(dir / "bundle.json", index.dump(2) + "\n");
}

std::unique_ptr<Bundle> Bundle::open(const std::filesystem::path &dir, const CudaDriver &driver) {
  std::unique_ptr<Bundle> b(new Bundle(dir, driver));
  std::filesystem::path indexPath = dir / "bundle.json";
  std::string file = "'" + indexPath.string() + "'";
  try {
    nlohmann::json index = nlohmann::json::parse(readFile(indexPath));
    if (index.at("format") != kFormat)
      throw std::runtime_error(file + ": unsupported bundle format " + index.at("format").dump());
    for (const auto &[name, source] : index.at("ops").items()) {
      std::filesystem::path path = fileInBundle(dir, source.get<std::string>(), file, "ops." + name);
      b->ops[name] = dsl::loadOpText(path.string(), readFile(path));
    }
    size_t i = 0;
    for (const nlohmann::json &j : index.at("entries")) {
      std::string where = file + ": entries[" + std::to_string(i++) + "]";
      Entry e;
      e.op = j.at("op");
      auto dtype = dsl::parseDType(j.at("dtype"));
      if (!dtype || !b->ops.count(e.op))
        throw std::runtime_error(where + ": entry for '" + e.op + "' has an unknown dtype or op");
      e.dtype = *dtype;
      e.statics = staticsFromJson(j.at("statics"), *b->ops.at(e.op), where);
      e.present = j.at("present").get<std::set<std::string>>();
      e.target = j.at("target");
      e.codeFile = j.at("code");
      fileInBundle(dir, e.codeFile, where, "code");
      size_t k = 0;
      for (const nlohmann::json &kernel : j.at("kernels"))
        e.kernels.push_back(
            kernelMetaFromJson(kernel, TargetKind::GPU, where + ": kernels[" + std::to_string(k++) + "]"));
      e.workspace = workspaceFromJson(j, where);
      b->list.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception &error) {
    throw std::runtime_error(file + " is malformed: " + error.what());
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
      context = std::make_shared<const CudaContext>(driver, kCudaDevice);
    auto l = std::make_shared<LoadedOp>();
    l->op = ops.at(e.op);
    l->dtype = e.dtype;
    l->statics = e.statics;
    l->present = e.present;
    l->kernels = e.kernels;
    l->workspace = e.workspace;
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
