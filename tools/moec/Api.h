//===- Api.h - What `moec list`, `moec emit` and `moec plan` compute, as functions -*- C++ -*-===//
//
// The subcommands parse their options into these structs and call these functions; the Python module
// (python/src) fills the same structs from keyword arguments, so both give the same text and the same
// errors. Errors: CLI::ValidationError names the option at fault (an argument error), dsl::DslError a bad
// .moe, CompileError a specialization the op does not allow or IR the pipeline rejects.
//===----------------------------------------------------------------------===//
#pragma once

#include "Common.h"

#include "moec/runtime/ascend/Plan.h"

#include <string>
#include <vector>

namespace moec::cli {

/// One op as `moec list` prints it: signature, dims, attrs and tensors, without a trailing newline.
std::string describeOp(const dsl::OpDef &op);

/// `moec emit`'s options.
struct EmitOptions {
  std::string op;
  TargetOptions target;
  std::vector<std::string> dims, attrs, with; // NAME=VALUE, NAME=VALUE, optional tensor names
  std::string emit;                           // the stage; empty: the target's last
  std::string output;                         // `-o`: the command writes the stage here (emitText ignores it)
  std::string dumpDir;                        // every stage, as DIR/<op>.<stage>
};

/// Compiles `o.op` as `moec emit` does, writes the --dump-dir files, and returns the stage's text.
std::string emitText(const EmitOptions &o);

/// `moec plan`'s options.
struct PlanOptions {
  std::string op;
  std::string target = "ascend";
  ChipOptions chip;
  std::string dtype = "f32";
  std::vector<std::string> dims, attrs, with, liveRows;
  std::string json, header, config; // json, header: where the command writes them (makePlan ignores them)
};

/// The Ascend tiling plan `moec plan` prints (ascend::planTable), writes as JSON (ascend::planToJson) and as
/// a header (ascend::planHeader).
ascend::Plan makePlan(const PlanOptions &o);

} // namespace moec::cli
