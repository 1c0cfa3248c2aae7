//===- GeneratedCode.cpp - Code generated once per LLVM module text -------===//
#include "Targets/GeneratedCode.h"

#include "llvm/Support/raw_ostream.h"

#include <deque>
#include <mutex>
#include <unordered_map>

namespace moec {

namespace {
/// Code by key, and the keys in insertion order (the map's own, which its nodes keep in place), evicted
/// oldest first.
struct Store {
  std::mutex mutex;
  std::unordered_map<std::string, GeneratedCode> code;
  std::deque<const std::string *> order;
  size_t bytes = 0;
};

Store &store() {
  static Store s;
  return s;
}
} // namespace

std::string generatedCodeKey(const llvm::Module &module, const llvm::TargetMachine &tm, int optLevel,
                             llvm::StringRef kind, const std::vector<std::string> &kernels) {
  std::string key;
  llvm::raw_string_ostream os(key);
  os << kind << '\n'
     << tm.getTargetTriple().str() << '\n'
     << tm.getTargetCPU() << '\n'
     << tm.getTargetFeatureString() << '\n'
     << "O" << optLevel << " codegen " << int(tm.getOptLevel()) << '\n';
  for (const std::string &kernel : kernels)
    os << kernel << '\n';
  module.print(os, nullptr);
  return key;
}

std::optional<GeneratedCode> findGeneratedCode(const std::string &key) {
  Store &s = store();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.code.find(key);
  if (it == s.code.end())
    return std::nullopt;
  return it->second;
}

void keepGeneratedCode(std::string key, GeneratedCode generated) {
  Store &s = store();
  size_t size = key.size() + generated.code.size() + generated.optimizedIr.size();
  if (size > kGeneratedCodeBytes)
    return;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (auto kept = s.code.find(key); kept != s.code.end()) {
    // Another compile generated it too: the same code. Its IR is added where the entry has none (and the
    // bound leaves room: the entry stays without it otherwise).
    if (kept->second.optimizedIr.empty() && !generated.optimizedIr.empty() &&
        s.bytes + generated.optimizedIr.size() <= kGeneratedCodeBytes) {
      s.bytes += generated.optimizedIr.size();
      kept->second.optimizedIr = std::move(generated.optimizedIr);
    }
    return;
  }
  while (s.bytes + size > kGeneratedCodeBytes && !s.order.empty()) {
    auto oldest = s.code.find(*s.order.front());
    s.bytes -= oldest->first.size() + oldest->second.code.size() + oldest->second.optimizedIr.size();
    s.code.erase(oldest);
    s.order.pop_front();
  }
  s.bytes += size;
  s.order.push_back(&s.code.emplace(std::move(key), std::move(generated)).first->first);
}

} // namespace moec
