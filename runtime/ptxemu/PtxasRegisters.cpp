//===- PtxasRegisters.cpp - Register counts from ptxas, for the profile ---===//
//
// The latency bound needs the warps an SM holds, and those depend on the registers ptxas allocates, which
// the PTX does not say. Where ptxas is installed (MOEC_PTXAS, else the CUDA toolkit's), it compiles the
// module once with -v and the counts are read from its report. Profiling only: launches never need it.
//===----------------------------------------------------------------------===//
#include "moec/runtime/ptxemu/Emulator.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>

namespace moec::ptxemu {

namespace {

std::string ptxasPath() {
  if (const char *env = std::getenv("MOEC_PTXAS"); env && *env)
    return env;
#ifdef MOEC_PTXAS_PATH
  return MOEC_PTXAS_PATH;
#else
  return "/usr/local/cuda/bin/ptxas";
#endif
}

/// A PTX target is a name like sm_90 or sm_90a: anything else never reaches a command line.
bool plainTarget(const std::string &t) { return std::regex_match(t, std::regex("sm_[0-9]{2,3}[af]?")); }

} // namespace

std::map<std::string, unsigned> ptxasRegisters(std::string_view ptx, const std::string &target) {
  std::map<std::string, unsigned> registers;
  std::string ptxas = ptxasPath();
  // The path goes into a shell command in single quotes: one with a quote of its own is not run.
  if (!plainTarget(target) || ptxas.find('\'') != std::string::npos || access(ptxas.c_str(), X_OK) != 0)
    return registers;
  char path[] = "/tmp/moec-ptxemu-XXXXXX";
  int fd = mkstemp(path); // a file of our own, removed below
  if (fd < 0)
    return registers;
  close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(ptx.data(), std::streamsize(ptx.size()));
  }
  std::string command = "'" + ptxas + "' -arch=" + target + " -v '" + path + "' -o /dev/null 2>&1";
  if (FILE *report = popen(command.c_str(), "r")) {
    static const std::regex entry("Compiling entry function '([^']+)'"), used("Used ([0-9]+) registers");
    std::string kernel;
    char line[1024];
    std::cmatch m;
    while (std::fgets(line, sizeof line, report)) {
      if (std::regex_search(line, m, entry))
        kernel = m[1];
      else if (!kernel.empty() && std::regex_search(line, m, used))
        registers[kernel] = unsigned(std::strtoul(m[1].str().c_str(), nullptr, 10));
    }
    pclose(report);
  }
  unlink(path);
  return registers;
}

} // namespace moec::ptxemu
