//===- BundleCommand.cpp - moec bundle: PTX + metadata for ahead-of-time use ===//
#include "Commands.h"
#include "Common.h"

#include "moec/jit/Runtime.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/Bundle.h"
#include "moec/runtime/DiskCache.h"

#include <fmt/core.h>

#include <sstream>

namespace moec::cli {

namespace {

struct BundleOptions {
  std::vector<std::string> ops, dtypes, shapes, with;
  std::string arch = "sm_90";
  std::string outDir;
  Schedule schedule; // every specialization's (0: the compiler's choice)
};

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);)
    if (!part.empty())
      parts.push_back(part);
  return parts;
}

/// The values of a --shapes set that are static dims or attributes of `op`.
std::map<std::string, int64_t> staticsFor(const dsl::OpDef &op, const std::map<std::string, int64_t> &shape) {
  std::map<std::string, int64_t> statics;
  for (const auto &[name, value] : shape) {
    const dsl::DimDecl *d = op.findDim(name);
    const dsl::AttrDecl *a = op.findAttr(name);
    if ((d && d->isStatic) || (a && a->isStatic))
      statics[a ? a->name : name] = value;
  }
  return statics;
}

void runBundle(const BundleOptions &o) {
  std::vector<Bundle::Entry> entries;
  std::vector<std::string> ptx;
  std::map<std::string, std::string> sources;
  std::vector<std::string> opNames = o.ops;
  if (opNames.empty())
    for (const BuiltinOp &b : builtinOps())
      opNames.push_back(b.name);
  for (const std::string &name : opNames) {
    const BuiltinOp *builtin = findBuiltinOp(name);
    if (!builtin)
      throw CLI::ValidationError("--ops", "'" + name + "' is not a built-in op");
    std::unique_ptr<dsl::OpDef> op = loadOp(name);
    for (const std::string &dtypeName : o.dtypes) {
      for (const std::string &shapeText : o.shapes) {
        Specialization spec;
        spec.dtype = parseDType(dtypeName);
        spec.target = Target::ptx(o.arch);
        spec.schedule = o.schedule;
        spec.statics = staticsFor(*op, parseAssignments(split(shapeText, ','), "--shapes"));
        for (const std::string &w : o.with)
          if (const dsl::TensorDecl *t = op->findTensor(w); t && t->optional)
            spec.present.insert(w);
        std::string label = fmt::format("{} {} [{}]", name, dtypeName, shapeText);
        ResolvedSpecialization resolved;
        CompiledOp compiled;
        try {
          resolved = resolve(*op, spec);
          compiled = compile(*op, resolved);
        } catch (const CompileError &e) {
          fmt::print("skipped {}: {}\n", label, e.what());
          continue;
        }
        Bundle::Entry e{name, resolved.dtype, resolved.statics, resolved.present, resolved.target.str(), "", {}};
        e.kernels = kernelMetas(compiled);
        e.workspace = compiled.workspace;
        e.codeFile = name + "." + dtypeName + "." + contentHash(compiled.ptx).substr(0, 12) + ".ptx";
        entries.push_back(e);
        ptx.push_back(compiled.ptx);
        sources[name] = builtin->source;
        fmt::print("bundled {} -> {} ({} kernels, {:.1f} ms{})\n", label, e.codeFile, e.kernels.size(),
                   compiled.times.total(), compiled.times.reusedCode ? ", the PTX of an earlier compile" : "");
      }
    }
  }
  if (entries.empty())
    throw std::runtime_error("nothing to bundle: no op, dtype and shape combination compiled");
  Bundle::write(o.outDir, entries, ptx, sources, "moec");
  fmt::print("{} specializations written to {}/bundle.json\n", entries.size(), o.outDir);
}

} // namespace

void registerBundleCommand(CLI::App &app) {
  auto o = std::make_shared<BundleOptions>();
  CLI::App *cmd = app.add_subcommand("bundle", "Emit PTX and metadata for a set of specializations (AOT)");
  cmd->add_option("--ops", o->ops, "built-in ops (default: all)")->delimiter(',');
  cmd->add_option("--dtypes", o->dtypes, "element types, e.g. bf16,f16")->delimiter(',')->required();
  cmd->add_option("--shapes", o->shapes,
                  "static values, one set per option or ';'-separated: 'H=7168,top_k=8;H=4096,E=8,K=2'; names "
                  "an op does not have are ignored")
      ->delimiter(';')
      ->required();
  cmd->add_option("--with", o->with, "optional tensors the kernels take, where an op has them")->delimiter(',');
  cmd->add_option("--arch", o->arch, "GPU arch")->capture_default_str();
  cmd->add_option("-o,--out-dir", o->outDir, "the bundle directory")->required();
  addScheduleOptions(*cmd, o->schedule);
  cmd->callback([o] { runBundle(*o); });
}

} // namespace moec::cli
