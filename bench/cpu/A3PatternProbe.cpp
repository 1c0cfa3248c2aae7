//===- A3PatternProbe.cpp - the memory ceiling of A3-with-probs' access pattern --------------------===//
//
// `moec bench`'s read bound (ReadBaseline) tells how fast an op's reads alone can go; for A3 with
// routing_map, permuted_tokens and probs it says 1.25-1.3 of a memcpy, but the op also writes as many
// bytes as it reads, to scattered rows. This probe runs that op's traffic with no arithmetic to speak of,
// hand-written, on `moec bench`'s own inputs (unpermuteGradNonPad: K random experts a token, rows laid out
// expert-major): for each slot, read the token's row, read the slot's permuted row, stream the token row
// into the slot's output row (non-temporal, as moec's kernels do) and fold the two rows into an f32 sum.
// It alternates with moec bench's baseline (MemcpyBaseline, half the case's minimum traffic, on the same
// shared pool: $MOEC_THREADS threads, else one per hardware thread) and prints the median, over 9 runs, of
// memcpy time over probe time: what a plain loop with this access pattern reaches on the machine, to set
// beside moec's kernel (`moec bench moe_token_unpermute_with_routing_map_grad --with routing_map --with
// permuted_tokens --with probs ...`).
//
//   moec-a3-pattern-probe H E K TOKENS [sequential] [interleaved] [arithmetic]
//
// `sequential` puts slot s at row s instead: the same traffic without the scatter. `interleaved` runs a
// token's slots 4 at a time, one load of the token's row for the 4 (as moec's interleaved dot products run
// 4 points, but those load the token row once each). `arithmetic` (AVX512-BF16 hosts) adds the kernel's
// arithmetic, written by hand as moec's passes lay it out: both rows widened in pairs (a shift and an and),
// the token row scaled by the slot's prob, the special-class test, vcvtne2ps2bf16 and a vpermw, and the dot
// product as f32 multiplies and adds. Against the plain probe it tells how much of the kernel's gap to the
// traffic's ceiling the arithmetic itself costs.
//===----------------------------------------------------------------------===//
#include "moec/cases/CpuBaseline.h"

#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>

namespace {

using namespace moec;
using Line = int32_t __attribute__((vector_size(64)));
using LineF = float __attribute__((vector_size(64)));
constexpr int64_t kLine = sizeof(Line), kPrefetchBytes = 768, kInterleaved = 4;

/// A token's slots [0, n) over the whole row with the kernel's arithmetic (see the file comment); returns
/// the dot products' sum, to keep it used. The special-class test only counts its lanes: the probe's products
/// are never NaN or subnormal. Only scalars cross the call: the caller may be built without AVX-512.
template <int64_t n>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16"))) float
arithmeticSlots(const char *token, const char *const *in, char *const *to, const float *prob, int64_t rowBytes) {
  const __m512i high = _mm512_set1_epi32(int32_t(0xffff0000u));
  alignas(64) int16_t order[32]; // paired order back to natural: word 2i is the even lane i, 2i + 1 the odd
  for (int i = 0; i < 16; ++i)
    order[2 * i] = int16_t(i), order[2 * i + 1] = int16_t(16 + i);
  const __m512i natural = _mm512_load_si512(order);
  __m512 sumEven = _mm512_setzero_ps(), sumOdd = _mm512_setzero_ps();
  int64_t specials = 0;
  for (int64_t j = 0; j < rowBytes; j += kLine) {
    __m512i a = _mm512_load_si512(token + j);
    __m512 aEven = _mm512_castsi512_ps(_mm512_slli_epi32(a, 16));
    __m512 aOdd = _mm512_castsi512_ps(_mm512_and_si512(a, high));
    for (int64_t s = 0; s < n; ++s) {
      __builtin_prefetch(in[s] + std::min(j + kPrefetchBytes, rowBytes - kLine));
      __m512i b = _mm512_load_si512(in[s] + j);
      __m512 scale = _mm512_set1_ps(prob[s]);
      __m512 even = _mm512_mul_ps(aEven, scale), odd = _mm512_mul_ps(aOdd, scale);
      specials += __builtin_popcount(_mm512_fpclass_ps_mask(even, 0xa1) | _mm512_fpclass_ps_mask(odd, 0xa1));
      __m512i bits = (__m512i)_mm512_cvtne2ps_pbh(odd, even);
      _mm512_stream_si512(reinterpret_cast<__m512i *>(to[s] + j), _mm512_permutexvar_epi16(natural, bits));
      sumEven = _mm512_add_ps(sumEven, _mm512_mul_ps(aEven, _mm512_castsi512_ps(_mm512_slli_epi32(b, 16))));
      sumOdd = _mm512_add_ps(sumOdd, _mm512_mul_ps(aOdd, _mm512_castsi512_ps(_mm512_and_si512(b, high))));
    }
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(sumEven, sumOdd)) + float(specials);
}

double secondsOf(const std::function<void()> &run) {
  auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s H E K TOKENS [sequential] [interleaved] [arithmetic]\n", argv[0]);
    return 2;
  }
  const int64_t h = std::atoll(argv[1]), experts = std::atoll(argv[2]), k = std::atoll(argv[3]),
                tokens = std::atoll(argv[4]);
  bool sequential = false, interleaved = false, arithmetic = false;
  for (int i = 5; i < argc; ++i) {
    std::string option = argv[i];
    sequential |= option == "sequential";
    interleaved |= option == "interleaved";
    arithmetic |= option == "arithmetic";
    if (option != "sequential" && option != "interleaved" && option != "arithmetic") {
      std::fprintf(stderr, "unknown option '%s' (sequential, interleaved, arithmetic)\n", argv[i]);
      return 2;
    }
  }
  if (arithmetic && !(__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512bf16"))) {
    std::fprintf(stderr, "arithmetic: this host has no AVX512-BF16 (the kernel's rounding instruction)\n");
    return 2;
  }
  // Bounded so that no size below overflows.
  if (h <= 0 || h % 32 != 0 || h > (1 << 20) || experts <= 0 || experts > (1 << 16) || k <= 0 || k > experts ||
      tokens <= 0 || tokens > (1 << 24)) {
    std::fprintf(stderr, "need H a multiple of 32 in [32, 2^20], 0 < K <= E <= 2^16, TOKENS in [1, 2^24]\n");
    return 2;
  }
  std::mt19937 rng(1);
  gpucheck::Case c = gpucheck::unpermuteGradNonPad(dsl::DType::BF16, tokens, experts, k, h, /*probs=*/true, rng,
                                                   /*reference=*/false);
  int32_t *rowOf = gpucheck::ints(c.inputs.at("out_index"));
  if (sequential)
    std::iota(rowOf, rowOf + tokens * k, 0);
  const char *tokenRows = static_cast<const char *>(c.inputs.at("unpermuted_tokens_grad").raw());
  const char *permuted = static_cast<const char *>(c.inputs.at("permuted_tokens").raw());
  char *out = static_cast<char *>(c.expected.at("permuted_tokens_grad").raw());
  const int64_t rowBytes = h * 2;

  std::atomic<float> sink{0};
  auto probe = [&] {
    ThreadPool::shared().parallelFor(tokens, 1, [&](int64_t begin, int64_t end) {
      LineF sum{};
      float arithmeticSum = 0;
      for (int64_t t = begin; t < end; ++t) {
        const char *token = tokenRows + t * rowBytes;
        // Slots [i, i + n) together: each line of the token's row loaded once for the n of them.
        auto slots = [&]<int64_t n>(int64_t i) {
          const char *in[n];
          char *to[n];
          float prob[n];
          for (int64_t s = 0; s < n; ++s) {
            const int64_t row = rowOf[t * k + i + s];
            in[s] = permuted + row * rowBytes, to[s] = out + row * rowBytes;
            prob[s] = 0.125f * float(1 + (i + s) % 7); // a normal float to scale by (the cost is the same)
          }
          if (arithmetic) {
            arithmeticSum += arithmeticSlots<n>(token, in, to, prob, rowBytes);
            return;
          }
          for (int64_t j = 0; j < rowBytes; j += kLine) {
            // HostTensor data starts 64-byte aligned, and a row is a multiple of 64 bytes (H % 32 == 0).
            Line a = *reinterpret_cast<const Line *>(token + j);
            for (int64_t s = 0; s < n; ++s) {
              __builtin_prefetch(in[s] + std::min(j + kPrefetchBytes, rowBytes - kLine));
              Line b = *reinterpret_cast<const Line *>(in[s] + j);
              __builtin_nontemporal_store(a, reinterpret_cast<Line *>(to[s] + j));
              sum += (LineF)(a & b); // an f32 chain, as the kernel's dot product
            }
          }
        };
        int64_t i = 0;
        for (; interleaved && i + kInterleaved <= k; i += kInterleaved)
          slots.template operator()<kInterleaved>(i);
        for (; i < k; ++i)
          slots.template operator()<1>(i);
      }
      float kept = sum[0] + arithmeticSum; // keeps the loads
      sink.store(sink.load(std::memory_order_relaxed) + kept, std::memory_order_relaxed);
    });
  };
  gpucheck::MemcpyBaseline memcpy(c);
  std::vector<double> ratios;
  for (int run = 0; run < 9; ++run) {
    double probed = secondsOf(probe);
    ratios.push_back(secondsOf([&] { memcpy(); }) / probed);
  }
  std::sort(ratios.begin(), ratios.end());
  std::printf("A3 with probs' pattern (H %lld, top-%lld of %lld, %lld tokens, %u threads%s%s%s): %.2fx memcpy "
              "(median of 9; %.2f-%.2f)\n",
              (long long)h, (long long)k, (long long)experts, (long long)tokens, ThreadPool::shared().size(),
              sequential ? ", sequential rows" : "", interleaved ? ", 4 slots at a time" : "",
              arithmetic ? ", with the kernel's arithmetic" : "", ratios[4], ratios.front(), ratios.back());
  return sink.load() == 12345.f ? 3 : 0; // never: the sum must look used
}
