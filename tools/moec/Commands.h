//===- Commands.h - moec subcommands -----------------------------*- C++ -*-===//
#pragma once

#include <CLI/CLI.hpp>

namespace moec::cli {

void registerListCommand(CLI::App &app);
void registerEmitCommand(CLI::App &app);
void registerEmitAllCommand(CLI::App &app);
void registerRunCommand(CLI::App &app);
void registerCacheCommand(CLI::App &app);
void registerBundleCommand(CLI::App &app);
void registerBenchCommand(CLI::App &app);
void registerPlanCommand(CLI::App &app);
void registerTuneCommand(CLI::App &app);

} // namespace moec::cli
