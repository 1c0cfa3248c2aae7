//===- main.cpp - The moec command line -------------------------------------===//
//
//   moec list
//   moec emit OP --target ptx|cpu [--arch sm_90] --dtype T [--dim N=V]... [--attr N=V]...
//                [--emit ast|moe|loops|llvm|ptx|asm] [-o FILE] [--dump-dir DIR]
//   moec emit-all --examples ops/examples.json --out-dir out
//   moec run OP --target cpu --dtype T [--attr N=V]... --in NAME=FILE.npy... --out-dir DIR
//   moec cache list|clear|stats [--dir DIR]
//   moec bundle --ops A,B --dtypes bf16 --shapes 'H=7168,top_k=8;...' [--with T] --arch sm_90 -o DIR
//===----------------------------------------------------------------------===//
#include "Commands.h"

#include <iostream>

int main(int argc, char **argv) {
  CLI::App app{"moec: a compiler for MoE token-routing kernels"};
  app.require_subcommand(1);
  moec::cli::registerListCommand(app);
  moec::cli::registerEmitCommand(app);
  moec::cli::registerEmitAllCommand(app);
  moec::cli::registerRunCommand(app);
  moec::cli::registerCacheCommand(app);
  moec::cli::registerBundleCommand(app);
  moec::cli::registerBenchCommand(app);
  moec::cli::registerPlanCommand(app);
  moec::cli::registerTuneCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  } catch (const std::exception &e) {
    std::string text = e.what();
    // Front-end diagnostics already read "file:line:col: error: ...".
    if (text.find(": error: ") == std::string::npos)
      text = "moec: error: " + text;
    std::cerr << text << (text.back() == '\n' ? "" : "\n");
    return 1;
  }
  return 0;
}
