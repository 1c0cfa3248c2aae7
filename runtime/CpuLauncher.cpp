//===- CpuLauncher.cpp --------------------------------------------------------===//
#include "moec/runtime/CpuLauncher.h"

namespace moec {

void launchCpu(PackedKernelFn kernel, const std::vector<void *> &tensors, const std::vector<int64_t> &scalars,
               int64_t rows, ThreadPool &pool, int64_t minRows) {
  pool.parallelFor(rows, minRows, [&](int64_t begin, int64_t end) {
    std::vector<void *> values(tensors); // each chunk passes its own row range
    std::vector<int64_t> ints(scalars);
    ints.push_back(begin);
    ints.push_back(end);
    std::vector<void *> args;
    args.reserve(values.size() + ints.size());
    for (void *&p : values)
      args.push_back(&p);
    for (int64_t &i : ints)
      args.push_back(&i);
    kernel(args.data());
  });
}

} // namespace moec
