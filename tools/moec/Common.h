//===- Common.h - Shared by the moec subcommands -----------------*- C++ -*-===//
#pragma once

#include "moec/compiler/Pipeline.h"

#include <CLI/CLI.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace moec::cli {

/// NAME=VALUE options (--dim, --attr) as a map; throws CLI::ValidationError naming the bad entry.
std::map<std::string, int64_t> parseAssignments(const std::vector<std::string> &items, const char *option);

/// The --dtype value; throws CLI::ValidationError for an unknown name.
dsl::DType parseDType(const std::string &name);

/// --chip / --chip-file: the Ascend chip a plan is for.
struct ChipOptions {
  std::string chip = "910b";
  std::string chipFile;

  void add(CLI::App &cmd);
  /// The built-in chip, or the file's; throws CLI::ValidationError naming the option.
  ascend::Chip load() const;
};

/// --vector, --threads, --rows-per-block, --unroll, --disable and --enable, into `schedule`.
void addScheduleOptions(CLI::App &cmd, Schedule &schedule);

/// --disable NAME... and --enable NAME... into `schedule`; throw CLI::ValidationError for a name that is not
/// an optimization (not an opt-in one, for --enable).
void disableOptimizations(Schedule &schedule, const std::vector<std::string> &names);
void enableOptimizations(Schedule &schedule, const std::vector<std::string> &names);

/// Options every compiling subcommand shares: dtype, target, arch, schedule.
struct TargetOptions {
  std::string dtype = "f32";
  std::string target = "cpu";
  std::string arch = "sm_90";
  Schedule schedule;
  ChipOptions chip; // --target ascend, where the command offers it

  /// `ascend`: the command also takes --target ascend (with --chip / --chip-file).
  void add(CLI::App &cmd, bool ascend = false);
  /// cpu, or ptx for --arch (ptx-emu: sm_90 PTX, to run on the PTX emulator), or ascend for the chip.
  Target resolveTarget() const;
  bool emulated() const { return target == "ptx-emu"; }
};

/// The optional tensors named by --with; throws CLI::ValidationError for a name that is not one.
std::set<std::string> presentTensors(const dsl::OpDef &op, const std::vector<std::string> &names);

/// Writes `text` to `path` atomically (temp file + rename); throws std::runtime_error.
void writeFile(const std::string &path, const std::string &text);

} // namespace moec::cli
