//===- FuzzTuning.cpp - libFuzzer: the tuning file reader and config text ---===//
//
// Every input becomes the tuning file of one key in a fresh tuning folder; load(), list() and read() must
// return (a file, or nothing with a warning), never throw past their contract or crash. A file load()
// accepts must print back to JSON that reads as the same file, and every config it names must parse or be
// refused with std::invalid_argument (what Runtime::get does with it). The input is also parsed as config
// text directly.
//
// MOEC_FUZZ_WRITE_SEED=PATH writes a valid tuning file for this harness's key to PATH and exits.
//===----------------------------------------------------------------------===//
#include "moec/tune/ConfigSpace.h"
#include "moec/tune/TuningDb.h"

#include "FuzzUtil.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>

using namespace moec;
namespace fs = std::filesystem;

namespace {

tune::TuningKey key() {
  tune::TuningKey k;
  k.op = "moe_init_routing_v2_grad";
  k.target = "cpu-fuzz";
  k.dtype = "bf16";
  k.statics = {{"H", 7168}, {"top_k", 8}};
  k.present = {};
  return k;
}

void parseConfigOrRefuse(const std::string &text) {
  try {
    Schedule s = tune::parseConfig(text);
    (void)tune::configText(s);
  } catch (const std::invalid_argument &) {
  }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  if (const char *seed = std::getenv("MOEC_FUZZ_WRITE_SEED")) {
    tune::TuningFile f;
    f.key = key();
    f.record(64, "vector=16,threads=1,rows=16,unroll=8", 12.5);
    f.record(64, "heuristic", 13.0);
    f.record(4096, "vector=8,threads=1,rows=128,unroll=4,off=streaming-stores", 812.25);
    fuzz::writeFile(seed, tune::toJson(f));
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 64 * 1024)
    return -1;
  static const fs::path dir = fuzz::scratchDir() / "tuning";
  static const tune::TuningKey k = key();
  static const tune::TuningDb db(dir, [](const std::string &) {});
  fs::create_directories(dir);
  std::string text(reinterpret_cast<const char *>(data), size);
  fuzz::writeFile(dir / k.fileName(), text);
  parseConfigOrRefuse(text);
  (void)db.list();
  try {
    (void)tune::TuningDb::read(dir / k.fileName());
  } catch (const std::runtime_error &) {
  }
  std::optional<tune::TuningFile> file = db.load(k);
  if (!file)
    return 0;
  if (!(tune::fromJson(tune::toJson(*file)) == *file)) {
    std::fprintf(stderr, "fuzz-tuning: an accepted file does not print back to itself\n");
    std::abort();
  }
  for (const auto &[bucket, result] : file->buckets) {
    parseConfigOrRefuse(result.best);
    for (const auto &[config, us] : result.timings)
      parseConfigOrRefuse(config);
  }
  return 0;
}
