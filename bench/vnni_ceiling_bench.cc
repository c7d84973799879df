// How fast the 16-row quantised MatMul's inner loop can be on this CPU, whatever its tuning:
// the AVX3_DL kernel's loop shape (ops/matmul_quant.cc: per 32-element sub-block, 8 weight code
// vectors unpacked once, then for each of 16 activation rows 8 vpdpbusd against broadcast
// activation codes) on one hot Q4_K-sized group, with and without the f32 work that follows
// each row's integer sum. It bounds what any change to scales or quantisation can win:
//   F32Ops:0   no scale work at all (one integer XOR per sum keeps the sums alive)
//   F32Ops:2   two f32 operations per row and sub-block (convert, FMA): what activation scales
//              per 256 elements (llama.cpp's Q8_K) would leave, with the min term moved to integer
//              work per super-block, which is not counted (so an upper bound)
//   F32Ops:4   Q4_K's four as the kernel does them (scale product, convert, FMA, min term)
// Reported as G multiply-adds per second of one thread, against the int8 peak that `dflash bench
// --verify-cost --profile` probes (register operands only, all threads):
//   build/bin/dflash_microbench --benchmark_filter=VnniCeiling
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>

namespace dflash {
namespace {

// GCC 12 warns that the undefined pass-through operand of _mm512_cvtepi32_ps and the reduce
// intrinsics is uninitialised when they are inlined into a function with its own target
// attribute; the operand is unused (no mask).
#pragma GCC diagnostic ignored "-Wuninitialized"
#define DFLASH_VNNI_ATTR __attribute__((target("avx512f,avx512bw,avx512vnni")))

constexpr int kRows = 16, kSubBlocks = 32, kCodeVectors = 8;  // 4 super-blocks of 256

// Weights: 8 code vectors per sub-block (16 columns x 4 bytes each); activations block-major as
// the kernel reads them: sub-block s of row r at 32 * (kRows * s + r).
struct HotGroup {
  alignas(64) uint8_t codes[kSubBlocks / 2][kCodeVectors][64];  // two nibbles per byte
  alignas(64) int8_t x[kSubBlocks * kRows * 32];
  alignas(64) float dx[kSubBlocks][kRows], bsum[kSubBlocks][kRows];
  alignas(64) float scale[kSubBlocks][16], min[kSubBlocks][16];
};

HotGroup& Group() {
  static HotGroup* g = [] {
    auto* h = new HotGroup;
    std::memset(h, 1, sizeof(*h));
    for (int s = 0; s < kSubBlocks; ++s)
      for (int i = 0; i < 16; ++i) h->dx[s][i] = h->bsum[s][i] = h->scale[s][i] = h->min[s][i] = 0.01f;
    return h;
  }();
  return *g;
}

// acc += codes . (4 activation codes broadcast), the broadcast in the instruction's memory operand,
// as ops/matmul_quant.cc's kernel issues it.
DFLASH_VNNI_ATTR inline void DotBroadcast(__m512i& acc, __m512i codes, const int8_t* x) {
  asm("vpdpbusd %[x]%{1to16%}, %[w], %[acc]" : [acc] "+v"(acc) : [w] "v"(codes), [x] "m"(*reinterpret_cast<const int8_t(*)[4]>(x)));
}

// One pass over the group for 16 rows with kF32Ops f32 operations after each row's integer sum
// of a sub-block. Returns the sums so the compiler keeps them.
template <int kF32Ops>
DFLASH_VNNI_ATTR __attribute__((noinline)) float GroupPass(const HotGroup& g) {
  __m512 acc[kRows];
  __m512i keep = _mm512_setzero_si512();
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
  for (int s = 0; s < kSubBlocks; ++s) {
    __m512i codes[kCodeVectors];
    for (int i = 0; i < kCodeVectors; ++i) {
      const __m512i t = _mm512_load_si512(g.codes[s / 2][i]);
      codes[i] = _mm512_and_si512(s % 2 ? _mm512_srli_epi16(t, 4) : t, _mm512_set1_epi8(0x0F));
    }
    const __m512 wscale = _mm512_load_ps(g.scale[s]), wmin = _mm512_load_ps(g.min[s]);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const int8_t* x = g.x + 32 * (kRows * s + r);
      __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int q = 0; q < kCodeVectors; ++q) DotBroadcast(sum, codes[q], x + 4 * q);
      if (kF32Ops == 4) {
        const __m512 sc = _mm512_mul_ps(wscale, _mm512_set1_ps(g.dx[s][r]));
        acc[r] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(sum), acc[r]);
        acc[r] = _mm512_fnmadd_ps(wmin, _mm512_set1_ps(g.bsum[s][r]), acc[r]);
      } else if (kF32Ops == 2) {
        acc[r] = _mm512_fmadd_ps(wscale, _mm512_cvtepi32_ps(sum), acc[r]);
      } else {
        keep = _mm512_xor_si512(keep, sum);
      }
    }
  }
  __m512 total = _mm512_cvtepi32_ps(keep);
  for (int r = 0; r < kRows; ++r) total = _mm512_add_ps(total, acc[r]);
  return _mm512_reduce_add_ps(total);
}

template <class Pass>
void Run(benchmark::State& state, const Pass& pass, double macs_per_pass) {
  if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bw")) {
    state.SkipWithError("this CPU has no AVX512_VNNI");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(pass());
  state.counters["GMAC/s"] = benchmark::Counter(macs_per_pass * static_cast<double>(state.iterations()) * 1e-9,
                                                benchmark::Counter::kIsRate);
}

constexpr double kGroupMacs = double{kSubBlocks} * 32 * 16 * kRows;  // sub-blocks x k x columns x rows

void BM_VnniCeiling_Loop(benchmark::State& state) {
  switch (state.range(0)) {
    case 0: return Run(state, [] { return GroupPass<0>(Group()); }, kGroupMacs);
    case 2: return Run(state, [] { return GroupPass<2>(Group()); }, kGroupMacs);
    default: return Run(state, [] { return GroupPass<4>(Group()); }, kGroupMacs);
  }
}
BENCHMARK(BM_VnniCeiling_Loop)->Arg(0)->Arg(2)->Arg(4)->ArgName("F32Ops");

}  // namespace
}  // namespace dflash
#endif  // __x86_64__
