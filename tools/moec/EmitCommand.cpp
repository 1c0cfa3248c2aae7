//===- EmitCommand.cpp - moec emit, moec emit-all ---------------------------===//
#include "Api.h"
#include "Commands.h"
#include "Common.h"

#include "moec/contracts/Files.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/ascend/Plan.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>

namespace moec::cli {

namespace {

const char *extension(Stage s) {
  switch (s) {
  case Stage::Ast: return "ast";
  case Stage::Gen: return "gen.mlir";
  case Stage::Moe: return "moe.mlir";
  case Stage::Loops: return "loops.mlir";
  case Stage::LLVM: return "ll";
  case Stage::PTX: return "ptx";
  case Stage::Asm: return "s";
  }
  return "txt";
}

/// The stages a target produces, in pipeline order. Ascend: the moe IR carries each kernel's
/// #moe.ascend_plan, and `loops` is the tiled kernels (per-core loop nests through UB buffers).
std::vector<Stage> stagesOf(const Target &target) {
  if (target.kind == TargetKind::Ascend)
    return {Stage::Ast, Stage::Gen, Stage::Moe, Stage::Loops};
  Stage code = target.kind == TargetKind::GPU ? Stage::PTX : Stage::Asm;
  return {Stage::Ast, Stage::Gen, Stage::Moe, Stage::Loops, Stage::LLVM, code};
}

/// Each kernel's Ascend tiling, as a JSON list.
std::string tilingsJson(const CompiledOp &compiled) {
  nlohmann::json tilings = nlohmann::json::array();
  for (const ascend::KernelTiling &t : compiled.ascend)
    tilings.push_back(ascend::tilingToJson(t));
  return tilings.dump(2) + "\n";
}

void writeDumps(const CompiledOp &compiled, const std::string &dir, const std::string &base) {
  for (const auto &[stage, text] : compiled.dumps)
    writeFile((std::filesystem::path(dir) / (base + "." + extension(stage))).string(), text);
}

} // namespace

std::string emitText(const EmitOptions &o) {
  std::unique_ptr<dsl::OpDef> op = loadOp(o.op);
  Specialization spec;
  spec.dtype = parseDType(o.target.dtype);
  spec.target = o.target.resolveTarget();
  spec.schedule = o.target.schedule;
  spec.statics = parseAssignments(o.dims, "--dim");
  for (const auto &[name, value] : parseAssignments(o.attrs, "--attr"))
    spec.statics[name] = value;
  spec.present = presentTensors(*op, o.with);

  std::vector<Stage> stages = stagesOf(spec.target);
  Stage wanted = stages.back();
  if (!o.emit.empty()) {
    auto s = parseStage(o.emit);
    if (!s || std::find(stages.begin(), stages.end(), *s) == stages.end())
    {
      std::string names;
      for (Stage stage : stages)
        names += std::string(names.empty() ? "" : ", ") + stageName(stage);
      throw CLI::ValidationError("--emit", "'" + o.emit + "' is not a stage of target " + spec.target.str() + " (" +
                                               names + ")");
    }
    wanted = *s;
  }
  CompileOptions options;
  options.dump.insert(wanted);
  options.stopAfterDumps = true; // the stages' text is all emit prints
  options.reuseGeneratedCode = false; // one compile a process: nothing to reuse, so no key to print
  if (!o.dumpDir.empty())
    options.dump.insert(stages.begin(), stages.end());
  CompiledOp compiled = compile(*op, spec, options);

  if (!o.dumpDir.empty())
    writeDumps(compiled, o.dumpDir, op->name);
  if (!o.dumpDir.empty() && spec.target.kind == TargetKind::Ascend) {
    writeFile((std::filesystem::path(o.dumpDir) / (op->name + ".tiling.json")).string(), tilingsJson(compiled));
    writeFile((std::filesystem::path(o.dumpDir) / (op->name + ".tiling.h")).string(),
              ascend::tilingHeader(op->name, spec.target.arch, compiled.ascend));
  }
  return compiled.dumps.at(wanted);
}

namespace {

void runEmit(const EmitOptions &o) {
  std::string text = emitText(o);
  if (o.output.empty())
    std::cout << text;
  else
    writeFile(o.output, text);
}

/// `moec emit-all`: every built-in op, every example specialization, every target.
struct EmitAllOptions {
  std::string examples = "ops/examples.json";
  std::string outDir = "out";
  std::vector<std::string> archs = {"sm_80", "sm_90", "sm_100"};
};

void runEmitAll(const EmitAllOptions &o) {
  nlohmann::json examples = nlohmann::json::parse(readRegularFile(o.examples));
  std::vector<Target> targets = {Target::cpu()};
  for (const std::string &arch : o.archs)
    targets.push_back(Target::ptx(arch));
  targets.push_back(Target::ascend(ascend::builtinChip("910b")));

  fmt::print("{:<42} {:<6} {:<52} {:<10} {:>10}  {}\n", "op", "dtype", "specialization", "target", "compile ms",
             "output");
  int count = 0;
  for (const BuiltinOp &builtin : builtinOps()) {
    std::unique_ptr<dsl::OpDef> op = loadOp(builtin.name);
    if (!examples.contains(op->name))
      throw std::runtime_error("'" + o.examples + "' has no example for op '" + op->name + "'");
    for (const nlohmann::json &ex : examples[op->name]) {
      Specialization spec;
      spec.dtype = parseDType(ex.at("dtype").get<std::string>());
      std::string label;
      for (const auto &[name, value] : ex.at("statics").items()) {
        spec.statics[name] = value.get<int64_t>();
        label += (label.empty() ? "" : ",") + name + "=" + std::to_string(value.get<int64_t>());
      }
      spec.present = presentTensors(*op, ex.value("with", std::vector<std::string>{}));
      for (const std::string &name : spec.present)
        label += ",+" + name;
      for (const Target &target : targets) {
        spec.target = target;
        bool isAscend = target.kind == TargetKind::Ascend;
        Stage code = isAscend ? Stage::Moe : stagesOf(target).back();
        CompileOptions options{{code}};
        options.reuseGeneratedCode = false; // the table's time is the whole compile's
        CompiledOp compiled = compile(*op, spec, options);
        std::string file = (std::filesystem::path(o.outDir) / op->name /
                            (std::string(dsl::dtypeName(spec.dtype)) + "." + label + "." + target.str() + "." +
                             (isAscend ? "tiling.json" : extension(code))))
                               .string();
        // Ascend: each kernel's tiling for the chip; the core split waits for a call's dims (moec plan).
        writeFile(file, isAscend ? tilingsJson(compiled) : compiled.dumps.at(code));
        if (isAscend) // and its TilingData structs, next to it
          writeFile(file.substr(0, file.size() - std::string("json").size()) + "h",
                    ascend::tilingHeader(op->name, target.arch, compiled.ascend));
        fmt::print("{:<42} {:<6} {:<52} {:<10} {:>10.1f}  {}\n", op->name, dsl::dtypeName(spec.dtype), label,
                   target.str(), compiled.times.total(), file);
        ++count;
      }
    }
  }
  fmt::print("{} kernels emitted into {}/\n", count, o.outDir);
}

} // namespace

void registerEmitCommand(CLI::App &app) {
  auto o = std::make_shared<EmitOptions>();
  CLI::App *cmd = app.add_subcommand("emit", "Compile an op and print one stage (PTX by default for ptx)");
  cmd->add_option("op", o->op, "built-in op name or path to a .moe file")->required();
  o->target.add(*cmd, /*ascend=*/true);
  cmd->add_option("--dim", o->dims, "NAME=VALUE for a static dim (repeatable)");
  cmd->add_option("--attr", o->attrs, "NAME=VALUE for a static attribute (repeatable)");
  cmd->add_option("--with", o->with, "an optional tensor the kernels are specialized to receive (repeatable)");
  cmd->add_option("--emit", o->emit,
                  "stage: ast, gen (genMoe's IR: what moec-opt --moe-pipeline replays), moe, loops, llvm, ptx (ptx "
                  "target), asm (cpu target); ascend: ast, gen, moe (with each "
                  "kernel's #moe.ascend_plan; --dump-dir adds <op>.tiling.json and the TilingData structs, "
                  "<op>.tiling.h), loops (the tiled kernels)");
  cmd->add_option("-o,--output", o->output, "write the stage here instead of stdout");
  cmd->add_option("--dump-dir", o->dumpDir, "also write every stage as DIR/<op>.<stage>");
  cmd->callback([o] { runEmit(*o); });
}

void registerEmitAllCommand(CLI::App &app) {
  auto o = std::make_shared<EmitAllOptions>();
  CLI::App *cmd = app.add_subcommand("emit-all", "Emit every built-in op for every target and print a table");
  cmd->add_option("--examples", o->examples, "JSON: op -> [{dtype, statics}]")->capture_default_str();
  cmd->add_option("--out-dir", o->outDir, "where the kernels go")->capture_default_str();
  cmd->add_option("--arch", o->archs, "GPU archs")->capture_default_str();
  cmd->callback([o] { runEmitAll(*o); });
}

} // namespace moec::cli
