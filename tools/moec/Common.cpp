//===- Common.cpp -----------------------------------------------------------===//
#include "Common.h"

#include "moec/contracts/Files.h"

#include <filesystem>
#include <unistd.h>

namespace moec::cli {

std::map<std::string, int64_t> parseAssignments(const std::vector<std::string> &items, const char *option) {
  std::map<std::string, int64_t> values;
  for (const std::string &item : items) {
    size_t eq = item.find('=');
    std::string name = item.substr(0, eq);
    std::string text = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (text == "true")
      text = "1";
    else if (text == "false")
      text = "0";
    size_t used = 0;
    int64_t value = 0;
    try {
      value = std::stoll(text, &used);
    } catch (const std::exception &) {
      used = 0;
    }
    if (name.empty() || text.empty() || used != text.size())
      throw CLI::ValidationError(option, "expected NAME=INTEGER, got '" + item + "'");
    if (!values.emplace(name, value).second)
      throw CLI::ValidationError(option, "'" + name + "' is given twice");
  }
  return values;
}

dsl::DType parseDType(const std::string &name) {
  auto t = dsl::parseDType(name);
  if (!t)
    throw CLI::ValidationError("--dtype", "unknown dtype '" + name + "' (f16, bf16, f32, i32, i8, bool)");
  return *t;
}

std::set<std::string> presentTensors(const dsl::OpDef &op, const std::vector<std::string> &names) {
  std::set<std::string> present;
  for (const std::string &name : names) {
    const dsl::TensorDecl *t = op.findTensor(name);
    if (!t || !t->optional)
      throw CLI::ValidationError("--with", "'" + name + "' is not an optional tensor of " + op.name);
    present.insert(name);
  }
  return present;
}

void ChipOptions::add(CLI::App &cmd) {
  cmd.add_option("--chip", chip, "Ascend chip: " + ascend::builtinChipNames())->capture_default_str();
  cmd.add_option("--chip-file", chipFile, "an Ascend chip description (JSON, as contracts/ascend/chips/*.json)");
}

ascend::Chip ChipOptions::load() const {
  try {
    return chipFile.empty() ? ascend::builtinChip(chip) : ascend::loadChipFile(chipFile);
  } catch (const std::exception &e) {
    throw CLI::ValidationError(chipFile.empty() ? "--chip" : "--chip-file", e.what());
  }
}

void TargetOptions::add(CLI::App &cmd, bool ascend) {
  cmd.add_option("--dtype", dtype, "element type of the op's type parameter: f16, bf16, f32")->capture_default_str();
  std::vector<std::string> targets = {"cpu", "ptx", "ptx-emu"};
  if (ascend) {
    targets.push_back("ascend");
    chip.add(cmd);
  }
  cmd.add_option("--target", target,
                 std::string("cpu, ptx, or ptx-emu (sm_90 PTX run on the PTX emulator)") +
                     (ascend ? ", or ascend (for --chip: tiling plans; moec run: the tiled kernels on the UB simulator)" : ""))
      ->check(CLI::IsMember(targets))
      ->capture_default_str();
  cmd.add_option("--arch", arch, "GPU arch for --target ptx: sm_80, sm_90, sm_100")->capture_default_str();
  addScheduleOptions(cmd, schedule);
}

void disableOptimizations(Schedule &schedule, const std::vector<std::string> &names) {
  for (const std::string &name : names) {
    uint32_t bit = optimizationByName(name);
    if (!bit)
      throw CLI::ValidationError("--disable", "'" + name + "' is not an optimization (" + optimizationNames() + ")");
    schedule.disabled |= bit;
  }
}

void enableOptimizations(Schedule &schedule, const std::vector<std::string> &names) {
  for (const std::string &name : names) {
    uint32_t bit = optimizationByName(name) & kOptInOptimizations;
    if (!bit)
      throw CLI::ValidationError("--enable", "'" + name + "' is not an opt-in optimization (" +
                                                 optimizationNames(kOptInOptimizations) +
                                                 "); the others are on unless --disable'd");
    schedule.enabled |= bit;
  }
}

void addScheduleOptions(CLI::App &cmd, Schedule &schedule) {
  cmd.add_option("--vector", schedule.vector, "schedule: vector width (0: compiler's choice)");
  cmd.add_option("--threads", schedule.threads,
                 "schedule: GPU threads along a row (0: choice); moec bench --target cpu: worker threads");
  cmd.add_option("--rows-per-block", schedule.rowsPerBlock, "schedule: GPU rows per block (0: choice)");
  cmd.add_option("--unroll", schedule.unroll, "schedule: reduction unroll (0: choice)");
  cmd.add_option_function<std::vector<std::string>>(
      "--disable", [&schedule](const std::vector<std::string> &names) { disableOptimizations(schedule, names); },
      "turn an optimization off: " + optimizationNames() + " (repeatable; results are the same, only speed changes)");
  cmd.add_option_function<std::vector<std::string>>(
      "--enable", [&schedule](const std::vector<std::string> &names) { enableOptimizations(schedule, names); },
      "turn an opt-in optimization on (" + optimizationNames(kOptInOptimizations) + ")" +
          " (repeatable; results are the same, only speed changes)");
}

Target TargetOptions::resolveTarget() const {
  if (target == "cpu")
    return Target::cpu();
  if (target == "ascend")
    return Target::ascend(chip.load());
  return Target::ptx(target == "ptx-emu" ? "sm_90" : arch);
}

void writeFile(const std::string &path, const std::string &text) {
  std::filesystem::path target(path);
  if (target.has_parent_path())
    std::filesystem::create_directories(target.parent_path());
  writeFileReplacing(path, {text});
}

} // namespace moec::cli
