// GGUF block formats: dequantisation and quantisation bit-exact against the gguf package's
// goldens (tools/make_quant_goldens.py), and quantised MatMul against an f64 reference with a
// proven error bound, batch-invariant bit for bit, on every SIMD target this CPU runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "hwy/targets.h"
#include "io/json_file.h"
#include "io/quantize_store.h"
#include "ops/amx.h"
#include "ops/ops.h"
#include "ops/quant_blocks.h"
#include "ops/weight_pack.h"
#include "testing/kernel_scopes.h"

namespace dflash {
namespace {

const std::string kGoldens = std::string(DFLASH_SOURCE_DIR) + "/tests/goldens/quant/";

std::vector<uint8_t> ReadBytes(const std::string& name) {
  std::ifstream f(kGoldens + name, std::ios::binary);
  if (!f) throw Error("cannot open " + kGoldens + name);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::vector<float> ReadFloats(const std::string& name) {
  const std::vector<uint8_t> b = ReadBytes(name);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

struct GoldenCase {
  const char* name;
  DType dtype;
};
const GoldenCase kGoldenCases[] = {
    {"q8_0", DType::kQ8_0}, {"q4_0", DType::kQ4_0}, {"q4_k", DType::kQ4_K}, {"q6_k", DType::kQ6_K}};

TEST(QuantGoldens, DequantizeRowMatchesGgufBitForBit) {
  const Json manifest = ReadJsonFile(kGoldens + "manifest.json");
  const int64_t rows = manifest["rows"], cols = manifest["cols"];
  for (const GoldenCase& c : kGoldenCases) {
    const Json& e = manifest["types"][c.name];
    const std::vector<uint8_t> blocks = ReadBytes(e["blocks"]);
    const std::vector<float> want = ReadFloats(e["dequant"]);
    ASSERT_EQ(blocks.size(), rows * RowBytes(c.dtype, cols)) << c.name;
    const WeightRef w{blocks.data(), c.dtype, rows, cols, RowBytes(c.dtype, cols)};
    std::vector<float> got(cols);
    for (int64_t r = 0; r < rows; ++r) {
      ops::DequantizeRow(w, r, got.data());
      for (int64_t i = 0; i < cols; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[r * cols + i]))
            << c.name << " row " << r << " col " << i << ": " << got[i] << " vs " << want[r * cols + i];
      }
    }
  }
}

TEST(QuantGoldens, QuantizeRowMatchesGgufBitForBit) {
  const Json manifest = ReadJsonFile(kGoldens + "manifest.json");
  const int64_t rows = manifest["rows"], cols = manifest["cols"];
  for (const GoldenCase& c : {kGoldenCases[0], kGoldenCases[1]}) {
    const Json& e = manifest["types"][c.name];
    const std::vector<float> src = ReadFloats(e["source"]);
    const std::vector<uint8_t> want = ReadBytes(e["blocks"]);
    const size_t rb = RowBytes(c.dtype, cols);
    std::vector<uint8_t> got(rb);
    for (int64_t r = 0; r < rows; ++r) {
      ops::QuantizeRow(src.data() + r * cols, cols, c.dtype, got.data());
      for (size_t i = 0; i < rb; ++i) ASSERT_EQ(got[i], want[r * rb + i]) << c.name << " row " << r << " byte " << i;
    }
  }
  std::vector<uint8_t> out(64);
  EXPECT_THROW(ops::QuantizeRow(std::vector<float>(48).data(), 48, DType::kQ8_0, out.data()), Error);
  EXPECT_THROW(ops::QuantizeRow(std::vector<float>(256).data(), 256, DType::kQ6_K, out.data()), Error);
  EXPECT_THROW(ops::QuantizeRow(std::vector<float>(288).data(), 288, DType::kQ4_K, out.data()), Error);
}

// Q8_0 codes round halves away from zero, as the gguf package's np_roundf and libm's roundf:
// with max|x| = 127 the scale is exactly 1, so x itself is the value rounded.
TEST(Quantize, Q8_0RoundsHalvesAwayFromZero) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = (j % 2 ? -1.0f : 1.0f) * (static_cast<float>(j) * 3.5f + 0.5f);
  x[0] = 127.0f, x[1] = -126.5f, x[2] = 0.49999997f, x[3] = -0.49999997f, x[4] = 1.4999999f;
  std::vector<uint8_t> b(RowBytes(DType::kQ8_0, 32));
  ops::QuantizeRow(x.data(), 32, DType::kQ8_0, b.data());
  ASSERT_EQ(F16ToF32(static_cast<uint16_t>(b[0] | b[1] << 8)), 1.0f);
  for (int j = 0; j < 32; ++j)
    EXPECT_EQ(static_cast<int8_t>(b[2 + j]), static_cast<int>(std::roundf(x[j]))) << "x = " << x[j];
}

// Load-time Q4_K (our own min/max fit; the gguf package cannot write Q4_K): every element
// decodes within half its sub-block's stored step plus one dmin (the 6-bit min is rounded
// up, so the top of the range may fall short by less than dmin), the stored step is at most
// one d above the fitted one, and the typical error is a fraction of a step.
TEST(LoadTimeQuant, Q4_KRoundTripWithinSubBlockStep) {
  const int64_t cols = 1024;
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> x(cols), back(cols);
  std::vector<uint8_t> blocks(RowBytes(DType::kQ4_K, cols));
  for (int trial = 0; trial < 20; ++trial) {
    for (float& v : x) v = dist(rng);
    for (int64_t i = trial; i < cols; i += 61) x[i] *= 20.0f;  // outliers
    if (trial == 1) std::fill(x.begin(), x.begin() + 256, 0.0f);  // an all-zero super-block
    if (trial == 2) for (float& v : x) v = std::fabs(v);           // no negative values
    ops::QuantizeRow(x.data(), cols, DType::kQ4_K, blocks.data());
    const WeightRef w{blocks.data(), DType::kQ4_K, 1, cols, blocks.size()};
    ops::DequantizeRow(w, 0, back.data());
    double sq = 0, steps = 0;
    for (int64_t sb = 0; sb < cols / 256; ++sb) {
      const uint8_t* blk = blocks.data() + sb * 144;
      uint16_t hd, hm;
      std::memcpy(&hd, blk, 2);
      std::memcpy(&hm, blk + 2, 2);
      for (int j = 0; j < 8; ++j) {
        float lo = 0, hi = 0;
        for (int i = 0; i < 32; ++i) {
          lo = std::min(lo, x[256 * sb + 32 * j + i]);
          hi = std::max(hi, x[256 * sb + 32 * j + i]);
        }
        int sc, mn;
        quant::Q4KScaleMin(blk + quant::kQ4_KScales, j, &sc, &mn);
        const double d = F16ToF32(hd), dmin = F16ToF32(hm), step = d * sc;
        // The stored step is the fitted one rounded up to a whole d (f16 slack 1e-3).
        ASSERT_LE(step, (hi - lo) / 15.0 + d * 1.001 + 1e-9) << "trial " << trial << " sub-block " << j;
        const double bound = step / 2 * 1.001 + dmin * 1.001 + 1e-7;
        for (int i = 0; i < 32; ++i) {
          const int64_t k = 256 * sb + 32 * j + i;
          const double err = std::fabs(double(back[k]) - x[k]);
          ASSERT_LE(err, bound) << "trial " << trial << " element " << k << " d " << F16ToF32(hd);
          sq += err * err;
          steps += step;
        }
      }
    }
    if (steps > 0) {
      EXPECT_LT(std::sqrt(sq / cols), 0.5 * steps / cols) << "trial " << trial;
    }
  }
}

// Random valid blocks: random bytes with finite, moderate f16 scales.
std::vector<uint8_t> RandomBlocks(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(rows * RowBytes(t, cols));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  std::normal_distribution<float> scale(0.0f, 0.01f);
  auto put = [&](uint8_t* p) {
    const uint16_t h = F32ToF16(scale(rng));
    std::memcpy(p, &h, 2);
  };
  for (size_t off = 0; off < bytes.size(); off += BlockBytes(t)) {
    uint8_t* blk = bytes.data() + off;
    switch (t) {
      case DType::kQ4_K: put(blk + 2); [[fallthrough]];
      case DType::kQ8_0:
      case DType::kQ4_0: put(blk); break;
      case DType::kQ6_K: put(blk + 208); break;
      default: break;
    }
  }
  return bytes;
}

// A random weight as MatMul takes it: block formats packed (ops/weight_pack.h).
struct KernelWeight {
  KernelWeight(const std::vector<uint8_t>& rows_bytes, DType t, int64_t N, int64_t K) {
    ref = WeightRef{rows_bytes.data(), t, N, K, RowBytes(t, K)};
    if (!ops::HasPackedLayout(t)) return;
    packed.resize(ops::PackedBytes(t, N, K));
    ThreadPool pool(2);
    ref = ops::PackWeight(ref, packed.data(), pool);
  }
  std::vector<uint8_t> packed;
  WeightRef ref;
};

// Every SIMD target compiled in and supported here (AVX3_DL's VNNI path and the portable one).
std::vector<int64_t> Targets() { return hwy::SupportedAndGeneratedTargets(); }

struct TargetScope {
  explicit TargetScope(int64_t t) { hwy::SetSupportedTargetsForTest(t); }
  ~TargetScope() { hwy::SetSupportedTargetsForTest(0); }
};

// Allows or forbids the AMX tile path for the scope (both paths must give the same bits).
class QuantMatMulTest : public ::testing::TestWithParam<DType> {};

// Error bound: W is exact (DequantizeRow), x is rounded per 32-block to d_b * q with
// |x - d_b q| <= d_b / 2, d_b = max|x_b| / 127; so |y - x·W| <= sum_b d_b/2 * sum_b |W| (1%
// slack for the f32 rounding of d_b itself), plus f32 rounding of the scaled block sums,
// bounded like MatMulTest's by 4 * K * eps * sum |W| (|x| + d_b/2).
TEST_P(QuantMatMulTest, WithinActivationRoundingBoundAndBatchInvariant) {
  const DType t = GetParam();
  const int64_t step = BlockElems(t);
  ThreadPool pool(2);
  // 3 x 32: an odd block count (half a pair). 640 or 768: 20 or 24 activation blocks, one whole
  // 16-block task of the activation quantiser and part of another.
  for (int64_t K : {step, 3 * step, int64_t{1024}, step == 32 ? int64_t{640} : int64_t{768}}) {
    for (int64_t N : {1, 6, 37}) {
      const std::vector<uint8_t> bytes = RandomBlocks(t, N, K, static_cast<uint32_t>(K * 7 + N));
      const KernelWeight kw(bytes, t, N, K);
      const WeightRef& w = kw.ref;
      std::vector<float> wf(N * K);
      for (int64_t n = 0; n < N; ++n) ops::DequantizeRow(w, n, wf.data() + n * K);
      const int64_t M = 21;
      std::mt19937 rng(static_cast<uint32_t>(K + N));
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> x(M * K), bias(N);
      for (float& v : x) v = dist(rng);
      for (int i = 0; i < K; i += 97) x[i] *= 30.0f;  // outliers: coarse blocks
      for (float& v : bias) v = dist(rng);
      for (int64_t target : Targets()) for (bool amx : {true, false}) {
        if (amx && !ops::AmxSupported()) continue;
        TargetScope scope(target);
        testing::AmxScope amx_scope(amx);
        const std::string tname = std::string(hwy::TargetName(target)) + (amx ? "+AMX" : "");
        std::vector<float> y_all(M * N);
        ops::MatMul(x.data(), M, w, bias.data(), y_all.data(), pool);
        for (int64_t m = 0; m < M; ++m) {
          for (int64_t n = 0; n < N; ++n) {
            double ref = bias[n], act = 0, mag = std::fabs(bias[n]);
            for (int64_t b = 0; b < K / 32; ++b) {
              double amax = 0, wsum = 0;
              for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(double(x[m * K + 32 * b + j])));
              const double half_d = amax / 127 / 2;
              for (int j = 0; j < 32; ++j) {
                const int64_t k = 32 * b + j;
                ref += double(x[m * K + k]) * wf[n * K + k];
                wsum += std::fabs(wf[n * K + k]);
                mag += std::fabs(wf[n * K + k]) * (std::fabs(x[m * K + k]) + half_d);
              }
              act += half_d * wsum;
            }
            const double bound = act * 1.01 + 4 * K * 1.2e-7 * mag + 1e-30;
            const double err = std::fabs(y_all[m * N + n] - ref);
            ASSERT_LE(err, bound) << tname << " K=" << K << " N=" << N << " m=" << m << " n=" << n;
          }
        }
        // Same rows in every sub-batch: the same bits.
        for (int64_t rows : {1, 2, 3, 4, 5, 16}) {
          std::vector<float> y(rows * N);
          for (int64_t m0 = 0; m0 + rows <= M; m0 += rows) {
            ops::MatMul(x.data() + m0 * K, rows, w, bias.data(), y.data(), pool);
            for (int64_t i = 0; i < rows * N; ++i)
              ASSERT_EQ(y[i], y_all[m0 * N + i]) << tname << " rows=" << rows << " m0=" << m0 << " K=" << K;
          }
        }
      }
    }
  }
}

// The tile path against the VNNI one, bit for bit, for every row count up to two tiles and a
// tail, column counts that end in a partial group, and several blocks; rows of an M-row call
// also match the same rows computed one at a time (batch invariance on the tile path).
TEST_P(QuantMatMulTest, AmxPathMatchesVnniBitForBit) {
  if (!ops::AmxSupported()) GTEST_SKIP() << "this CPU or kernel has no AMX-INT8 tiles";
  const DType t = GetParam();
  ThreadPool pool(2);
  const int64_t K = 4 * BlockElems(t) + (BlockElems(t) == 32 ? 32 : 0);  // Q8_0: 5 blocks
  for (int64_t N : {16, 37}) {
    const std::vector<uint8_t> bytes = RandomBlocks(t, N, K, static_cast<uint32_t>(N));
    const KernelWeight kw(bytes, t, N, K);
    const WeightRef& w = kw.ref;
    const int64_t max_m = 33;
    std::mt19937 rng(static_cast<uint32_t>(K));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(max_m * K);
    for (float& v : x) v = dist(rng);
    std::vector<float> single(max_m * N);
    {
      testing::AmxScope off(false);
      for (int64_t m = 0; m < max_m; ++m) ops::MatMul(x.data() + m * K, 1, w, nullptr, single.data() + m * N, pool);
    }
    for (int64_t M = 1; M <= max_m; ++M) {
      std::vector<float> vnni(M * N), tiles(M * N);
      {
        testing::AmxScope off(false);
        ops::MatMul(x.data(), M, w, nullptr, vnni.data(), pool);
      }
      ops::MatMul(x.data(), M, w, nullptr, tiles.data(), pool);
      for (int64_t i = 0; i < M * N; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(tiles[i]), std::bit_cast<uint32_t>(vnni[i]))
            << DTypeName(t) << " N=" << N << " M=" << M << " row " << i / N << " col " << i % N;
        ASSERT_EQ(std::bit_cast<uint32_t>(tiles[i]), std::bit_cast<uint32_t>(single[i]))
            << DTypeName(t) << " N=" << N << " M=" << M << " row " << i / N << " col " << i % N << " vs M=1";
      }
    }
  }
}

TEST(QuantMatMul, AmxSwitchTurnsTheTilePathOff) {
  testing::AmxScope off(false);
  EXPECT_FALSE(ops::AmxActive());
  ops::SetAmxAllowed(true);
  EXPECT_EQ(ops::AmxActive(), ops::AmxSupported());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, QuantMatMulTest,
                         ::testing::Values(DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

// The activation rounding error is random, so a kernel that is right is far better than the
// worst-case bound: its error relative to |y| is around 1/127/sqrt(32)-ish. A wrong scale or
// code layout would give errors of the order of |y| itself.
TEST(QuantMatMul, TypicalErrorIsSmall) {
  ThreadPool pool(1);
  const int64_t K = 1024, N = 64, M = 4;
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    const std::vector<uint8_t> bytes = RandomBlocks(t, N, K, 5);
    const KernelWeight kw(bytes, t, N, K);
    const WeightRef& w = kw.ref;
    std::vector<float> wf(K), x(M * K), y(M * N);
    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (float& v : x) v = dist(rng);
    for (int64_t target : Targets()) {
      TargetScope scope(target);
      ops::MatMul(x.data(), M, w, nullptr, y.data(), pool);
      double err2 = 0, ref2 = 0;
      for (int64_t n = 0; n < N; ++n) {
        ops::DequantizeRow(w, n, wf.data());
        for (int64_t m = 0; m < M; ++m) {
          double ref = 0;
          for (int64_t k = 0; k < K; ++k) ref += double(x[m * K + k]) * wf[k];
          err2 += (y[m * N + n] - ref) * (y[m * N + n] - ref);
          ref2 += ref * ref;
        }
      }
      EXPECT_LT(std::sqrt(err2 / ref2), 0.02) << DTypeName(t) << " on " << hwy::TargetName(target);
    }
  }
}

TEST(QuantMatMul, ThreadCountDoesNotChangeBits) {
  const std::vector<uint8_t> bytes = RandomBlocks(DType::kQ4_K, 300, 512, 8);
  const KernelWeight kw(bytes, DType::kQ4_K, 300, 512);
  const WeightRef& w = kw.ref;
  std::vector<float> x(5 * 512);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  std::vector<float> y1(5 * 300), y3(5 * 300);
  ThreadPool one(1), three(3);
  ops::MatMul(x.data(), 5, w, nullptr, y1.data(), one);
  ops::MatMul(x.data(), 5, w, nullptr, y3.data(), three);
  EXPECT_EQ(y1, y3);
}

// q, k, v (and gate, up) go through MatMulShared: one quantisation of x and one pool pass,
// whose every output must be bit-identical to its own MatMul, for weights that share the code
// offset (Q8_0 with itself; Q4_K, which has none, with Q6_K) and for those that do not.
TEST(QuantMatMul, SharedMatchesSeparateBitForBit) {
  const int64_t K = 512;
  const std::vector<std::vector<DType>> groups = {{DType::kQ8_0, DType::kQ8_0, DType::kQ8_0},
                                                  {DType::kQ4_K, DType::kQ6_K},
                                                  {DType::kQ4_K, DType::kQ6_K, DType::kQ8_0, DType::kQ4_0}};
  ThreadPool pool(2);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const std::vector<DType>& group : groups) {
    for (const int64_t M : {1, 5, 16}) {
      std::vector<float> x(M * K);
      for (float& v : x) v = dist(rng);
      std::vector<std::vector<uint8_t>> bytes;
      std::vector<std::unique_ptr<KernelWeight>> weights;
      std::vector<std::vector<float>> bias, shared, separate;
      for (size_t i = 0; i < group.size(); ++i) {
        const int64_t N = 48 + 80 * static_cast<int64_t>(i);
        bytes.push_back(RandomBlocks(group[i], N, K, static_cast<uint32_t>(17 * i + M)));
        weights.push_back(std::make_unique<KernelWeight>(bytes.back(), group[i], N, K));
        bias.emplace_back(N);
        for (float& b : bias.back()) b = dist(rng);
        shared.emplace_back(M * N, -1.0f);
        separate.emplace_back(M * N, -2.0f);
      }
      std::vector<ops::MatMulOutput> outputs;
      for (size_t i = 0; i < group.size(); ++i) {
        const float* b = i % 2 ? bias[i].data() : nullptr;  // with and without a bias
        outputs.push_back({&weights[i]->ref, b, shared[i].data()});
        ops::MatMul(x.data(), M, weights[i]->ref, b, separate[i].data(), pool);
      }
      ops::MatMulShared(x.data(), M, outputs, pool);
      for (size_t i = 0; i < group.size(); ++i) {
        EXPECT_EQ(shared[i], separate[i]) << DTypeName(group[i]) << " output " << i << " of " << group.size()
                                          << ", " << M << " rows";
      }
    }
  }
  const std::vector<uint8_t> narrow = RandomBlocks(DType::kQ8_0, 16, 256, 1), wide = RandomBlocks(DType::kQ8_0, 16, 512, 2);
  const KernelWeight wn(narrow, DType::kQ8_0, 16, 256), ww(wide, DType::kQ8_0, 16, 512);
  std::vector<float> x(512), y(16);
  const ops::MatMulOutput mismatched[] = {{&ww.ref, nullptr, y.data()}, {&wn.ref, nullptr, y.data()}};
  EXPECT_THROW(ops::MatMulShared(x.data(), 1, mismatched, pool), Error);
}

TEST(QuantMatMul, RejectsPartialBlocks) {
  std::vector<uint8_t> bytes(1000);
  std::vector<float> x(48), y(1);
  ThreadPool pool(1);
  const WeightRef bad{bytes.data(), DType::kQ8_0, 1, 48, 34};
  EXPECT_THROW(ops::MatMul(x.data(), 1, bad, nullptr, y.data(), pool), Error);
}

TEST(QuantMatMul, RejectsUnpackedWeights) {
  std::vector<uint8_t> bytes(RowBytes(DType::kQ6_K, 256));
  std::vector<float> x(256), y(1);
  ThreadPool pool(1);
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    const WeightRef rows{bytes.data(), t, 1, 256, RowBytes(t, 256)};
    try {
      ops::MatMul(x.data(), 1, rows, nullptr, y.data(), pool);
      ADD_FAILURE() << DTypeName(t) << " in row layout was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("packed first"), std::string::npos) << e.what();
    }
  }
}

// The packed layout holds the row layout's blocks and nothing else (Q6_K's with its codes
// widened to bytes): unpacking every row gives them back, DequantizeRow reads both layouts to
// the same bits, and the padding of a partial last group is zeros (Q8_0: code 0, stored as 0x80).
TEST(WeightPack, RoundTripsEveryRowAndDequantizesAlike) {
  ThreadPool pool(2);
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    for (int64_t N : {1, 16, 37}) {
      for (int64_t K : {BlockElems(t), 3 * BlockElems(t), int64_t{1024}}) {
        const std::vector<uint8_t> bytes = RandomBlocks(t, N, K, static_cast<uint32_t>(N + K));
        const WeightRef rows{bytes.data(), t, N, K, RowBytes(t, K)};
        std::vector<uint8_t> packed(ops::PackedBytes(t, N, K));
        const int64_t packed_row = t == DType::kQ6_K ? K / 256 * 274 : static_cast<int64_t>(RowBytes(t, K));
        ASSERT_EQ(ops::PackedRowBytes(t, K), packed_row);
        ASSERT_EQ(packed.size(), static_cast<size_t>((N + 15) / 16 * 16 * packed_row));
        const WeightRef w = ops::PackWeight(rows, packed.data(), pool);
        ASSERT_EQ(w.layout, WeightLayout::kGroups16);
        std::vector<uint8_t> row(RowBytes(t, K));
        std::vector<float> a(K), b(K);
        for (int64_t n = 0; n < N; ++n) {
          ops::UnpackRow(w, n, row.data());
          ASSERT_EQ(0, std::memcmp(row.data(), rows.Row(n), row.size())) << DTypeName(t) << " N=" << N << " K=" << K << " row " << n;
          ops::DequantizeRow(rows, n, a.data());
          ops::DequantizeRow(w, n, b.data());
          for (int64_t k = 0; k < K; ++k) ASSERT_EQ(std::bit_cast<uint32_t>(a[k]), std::bit_cast<uint32_t>(b[k]));
        }
        // Bytes that came from no row are the padding rows'.
        size_t from_rows = N * packed_row, zero_or_code0 = 0;
        for (uint8_t v : packed) zero_or_code0 += (v == 0 || (t == DType::kQ8_0 && v == 0x80));
        EXPECT_GE(zero_or_code0, packed.size() - from_rows) << DTypeName(t) << " N=" << N;
        EXPECT_THROW(ops::PackWeight(w, packed.data(), pool), Error);
        EXPECT_THROW(ops::UnpackRow(rows, 0, row.data()), Error);
        EXPECT_THROW(ops::UnpackRow(w, N, row.data()), Error);
      }
    }
  }
  std::vector<uint8_t> out(64);
  const std::vector<float> f(32);
  EXPECT_THROW(ops::PackWeight(WeightRef{reinterpret_cast<const uint8_t*>(f.data()), DType::kF32, 1, 32, 128}, out.data(), pool), Error);
}

// PackMatrices packs the store's block-quantised matrices once, 64-byte aligned, and leaves
// other tensors alone.
TEST(WeightPack, PackMatricesPacksQuantisedMatricesOnce) {
  ThreadPool pool(2);
  const std::vector<uint8_t> q8 = RandomBlocks(DType::kQ8_0, 20, 64, 2);
  const std::vector<uint8_t> q6 = RandomBlocks(DType::kQ6_K, 3, 256, 3);
  const std::vector<uint8_t> norm(4 * 64);
  TensorStore store("<test>");
  const auto add = [&](const std::string& name, DType dtype, std::vector<int64_t> shape, const std::vector<uint8_t>& bytes) {
    Tensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.data = bytes.data();
    t.nbytes = bytes.size();
    store.Add(std::move(t));
  };
  add("q8", DType::kQ8_0, {20, 64}, q8);
  add("q6", DType::kQ6_K, {3, 256}, q6);
  add("norm", DType::kF32, {64}, norm);
  EXPECT_EQ(PackMatrices(store, pool), 2);
  EXPECT_EQ(PackMatrices(store, pool), 0);
  const Tensor& t = *store.Find("q8");
  EXPECT_EQ(t.layout, WeightLayout::kGroups16);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);
  EXPECT_EQ(store.Find("q6")->layout, WeightLayout::kGroups16);
  EXPECT_EQ(store.Find("norm")->layout, WeightLayout::kRows);
  std::vector<uint8_t> row(RowBytes(DType::kQ8_0, 64));
  ops::UnpackRow(AsWeight(t), 19, row.data());
  EXPECT_EQ(0, std::memcmp(row.data(), q8.data() + 19 * row.size(), row.size()));
}

TEST(LoadTimeQuant, QuantizesBf16MatricesAndRejectsBadInput) {
  ThreadPool pool(2);
  const int64_t rows = 130, cols = 96;
  std::vector<uint16_t> bf16(rows * cols);
  std::mt19937 rng(4);
  std::normal_distribution<float> dist(0.0f, 0.1f);
  for (uint16_t& h : bf16) h = F32ToBF16(dist(rng));
  TensorStore store("<test>");
  const auto add = [&](const std::string& name, std::vector<int64_t> shape, const void* data) {
    Tensor t;
    t.name = name;
    t.dtype = DType::kBF16;
    t.shape = std::move(shape);
    t.data = static_cast<const uint8_t*>(data);
    t.nbytes = t.numel() * 2;
    store.Add(std::move(t));
  };
  add("m", {rows, cols}, bf16.data());
  add("norm", {cols}, bf16.data());
  EXPECT_EQ(QuantizeMatrices(store, DType::kQ4_0, pool), 1);
  const Tensor& m = *store.Find("m");
  EXPECT_EQ(m.dtype, DType::kQ4_0);
  EXPECT_EQ(store.Find("norm")->dtype, DType::kBF16);
  std::vector<float> row(cols);
  std::vector<uint8_t> want(RowBytes(DType::kQ4_0, cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < cols; ++i) row[i] = BF16ToF32(bf16[r * cols + i]);
    ops::QuantizeRow(row.data(), cols, DType::kQ4_0, want.data());
    ASSERT_EQ(0, std::memcmp(m.data + r * want.size(), want.data(), want.size())) << "row " << r;
  }
  add("odd", {2, 48}, bf16.data());
  EXPECT_THROW(QuantizeMatrices(store, DType::kQ8_0, pool), Error);
  EXPECT_EQ(ParseWeightQuant("none", "--x"), std::nullopt);
  EXPECT_EQ(ParseWeightQuant("q8_0", "--x"), DType::kQ8_0);
  EXPECT_EQ(ParseWeightQuant("q4_k", "--x"), DType::kQ4_K);
  EXPECT_THROW(ParseWeightQuant("q6_k", "--x"), Error);
}

}  // namespace
}  // namespace dflash
