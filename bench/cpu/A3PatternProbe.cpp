//===- A3PatternProbe.cpp - the memory ceiling of A3-with-probs' access pattern --------------------===//
//
// `moec bench`'s read bound (ReadBaseline) tells how fast an op's reads alone can go; for A3 with
// routing_map, permuted_tokens and probs it says 1.25-1.3 of a memcpy, but the op also writes as many
// bytes as it reads, to scattered rows. This probe runs that op's traffic with no arithmetic to speak of,
// hand-written: for each token, for each of its K slots, read the token's row, read the slot's permuted
// row, stream the token row into the slot's output row (non-temporal, as moec's kernels do) and fold the
// two rows into an f32 sum; the slots' rows are laid out expert-major as `moec bench` lays them out (K distinct
// random experts a token, each expert's rows in token order). It prints the median, over 9 runs, of the
// same-run memcpy of half the traffic (read + written, as moec bench's baseline) over the probe's time:
// what a plain hand-written loop with this access pattern reaches on the machine, to set beside moec's
// kernel (`moec bench moe_token_unpermute_with_routing_map_grad --with routing_map --with permuted_tokens
// --with probs ...`).
//
//   moec-a3-pattern-probe H E K TOKENS THREADS [sequential]
//
// `sequential` puts slot s at row s instead: the same traffic without the scatter.
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using Line = int32_t __attribute__((vector_size(64)));
using LineF = float __attribute__((vector_size(64)));
constexpr size_t kLine = sizeof(Line), kPrefetchBytes = 768;

struct Buffer {
  explicit Buffer(size_t bytes) : data(static_cast<char *>(std::aligned_alloc(kLine, bytes))) {
    if (!data) {
      std::fprintf(stderr, "cannot allocate %zu bytes\n", bytes);
      std::exit(1);
    }
    std::memset(data, 1, bytes); // touch every page before timing
  }
  ~Buffer() { std::free(data); }
  char *data;
};

/// Slot t*K + k's row: expert-major, each expert's rows in token order.
std::vector<size_t> expertMajorRows(int64_t tokens, int64_t experts, int64_t k) {
  std::mt19937 rng(1);
  std::vector<std::vector<size_t>> slotsOf(experts);
  std::vector<int64_t> order(experts), chosen;
  std::iota(order.begin(), order.end(), 0);
  for (int64_t t = 0; t < tokens; ++t) {
    std::shuffle(order.begin(), order.end(), rng);
    chosen.assign(order.begin(), order.begin() + k);
    std::sort(chosen.begin(), chosen.end());
    for (int64_t i = 0; i < k; ++i)
      slotsOf[chosen[i]].push_back(size_t(t * k + i));
  }
  std::vector<size_t> rowOf(size_t(tokens * k));
  size_t row = 0;
  for (const auto &slots : slotsOf)
    for (size_t slot : slots)
      rowOf[slot] = row++;
  return rowOf;
}

template <typename Body> void onThreads(int threads, int64_t n, Body body) {
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i)
    workers.emplace_back(body, i, n * i / threads, n * (i + 1) / threads);
  for (std::thread &w : workers)
    w.join();
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s H E K TOKENS THREADS [sequential]\n", argv[0]);
    return 2;
  }
  const int64_t h = std::atoll(argv[1]), experts = std::atoll(argv[2]), k = std::atoll(argv[3]),
                tokens = std::atoll(argv[4]);
  const int threads = std::atoi(argv[5]);
  const bool sequential = argc > 6 && std::string(argv[6]) == "sequential";
  // Bounded so that no size below overflows (the largest buffer is under 2^63 bytes).
  if (h <= 0 || h % 32 != 0 || h > (1 << 20) || experts <= 0 || experts > (1 << 16) || k <= 0 || k > experts ||
      tokens <= 0 || tokens > (1 << 24) || threads <= 0 || threads > 1024) {
    std::fprintf(stderr, "need H a multiple of 32 in [32, 2^20], 0 < K <= E <= 2^16, TOKENS in [1, 2^24], "
                         "THREADS in [1, 1024]\n");
    return 2;
  }
  const size_t rowBytes = size_t(h) * 2, slots = size_t(tokens * k); // bf16 rows
  std::vector<size_t> rowOf = expertMajorRows(tokens, experts, k);
  if (sequential)
    std::iota(rowOf.begin(), rowOf.end(), size_t(0));
  Buffer tokenRows(size_t(tokens) * rowBytes), permuted(slots * rowBytes), out(slots * rowBytes);
  const size_t half = (size_t(tokens) * rowBytes + 2 * slots * rowBytes) / 2;
  Buffer src(half), dst(half);

  std::vector<LineF> sums(static_cast<size_t>(threads)); // a line each: no false sharing
  auto probe = [&](int worker, int64_t begin, int64_t end) {
    LineF sum{};
    for (int64_t t = begin; t < end; ++t) {
      const char *token = tokenRows.data + size_t(t) * rowBytes;
      for (int64_t i = 0; i < k; ++i) {
        const size_t row = rowOf[size_t(t * k + i)];
        const char *in = permuted.data + row * rowBytes;
        char *to = out.data + row * rowBytes;
        for (size_t j = 0; j < rowBytes; j += kLine) {
          __builtin_prefetch(in + std::min(j + kPrefetchBytes, rowBytes - kLine));
          Line a = *reinterpret_cast<const Line *>(token + j), b = *reinterpret_cast<const Line *>(in + j);
          __builtin_nontemporal_store(a, reinterpret_cast<Line *>(to + j));
          sum += (LineF)(a & b); // an f32 chain, as the kernel's dot product
        }
      }
    }
    sums[size_t(worker)] += sum; // keeps the loads
  };
  std::vector<double> ratios;
  for (int run = 0; run < 9; ++run) {
    auto start = std::chrono::steady_clock::now();
    onThreads(threads, tokens, probe);
    auto probed = std::chrono::steady_clock::now();
    onThreads(threads, int64_t(half / kLine), [&](int, int64_t begin, int64_t end) {
      std::memcpy(dst.data + begin * kLine, src.data + begin * kLine, size_t(end - begin) * kLine);
    });
    auto copied = std::chrono::steady_clock::now();
    ratios.push_back(std::chrono::duration<double>(copied - probed).count() /
                     std::chrono::duration<double>(probed - start).count());
  }
  std::sort(ratios.begin(), ratios.end());
  std::printf("A3 with probs' pattern (H %lld, top-%lld of %lld, %lld tokens, %d threads%s): %.2fx memcpy "
              "(median of 9; %.2f-%.2f)\n",
              (long long)h, (long long)k, (long long)experts, (long long)tokens, threads,
              sequential ? ", sequential rows" : "", ratios[4], ratios.front(), ratios.back());
  return sums[0][0] == 12345.f ? 3 : 0; // never: the sums must look used
}
