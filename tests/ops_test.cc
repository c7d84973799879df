// Kernels against a double-precision reference, and batch invariance bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/ops.h"
#include "testing/kernel_scopes.h"

namespace dflash {
namespace {

std::vector<float> RandomVector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A weight matrix stored as `dtype`, plus its exact f32 values for the reference.
struct TestWeights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
  WeightRef ref;
};

TestWeights MakeWeights(DType dtype, int64_t rows, int64_t cols, uint32_t seed) {
  TestWeights t;
  t.values = RandomVector(rows * cols, seed, 0.1f);
  const size_t elem = dtype == DType::kF32 ? 4 : 2;
  t.bytes.resize(rows * cols * elem);
  for (int64_t i = 0; i < rows * cols; ++i) {
    if (dtype == DType::kF32) {
      __builtin_memcpy(&t.bytes[i * 4], &t.values[i], 4);
      continue;
    }
    const uint16_t h = dtype == DType::kBF16 ? F32ToBF16(t.values[i]) : F32ToF16(t.values[i]);
    t.values[i] = dtype == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
    __builtin_memcpy(&t.bytes[i * 2], &h, 2);
  }
  t.ref = {t.bytes.data(), dtype, rows, cols, static_cast<size_t>(cols) * elem};
  return t;
}

class MatMulTest : public ::testing::TestWithParam<DType> {};

// Tolerance: f32 products summed in a different order than the double reference; the error of
// a K-term sum is bounded by about K * eps * sum|x*w|, which we use with a 4x margin.
TEST_P(MatMulTest, MatchesReferenceAndIsBatchInvariant) {
  ThreadPool pool(2);
  for (int64_t K : {16, 64, 200, 1024}) {  // 200: a tail shorter than one vector
    for (int64_t N : {1, 5, 67}) {
      const TestWeights w = MakeWeights(GetParam(), N, K, static_cast<uint32_t>(K * 31 + N));
      const int64_t M = 37;
      const std::vector<float> x = RandomVector(M * K, 7);
      const std::vector<float> bias = RandomVector(N, 9);
      std::vector<float> y_all(M * N);
      ops::MatMul(x.data(), M, w.ref, bias.data(), y_all.data(), pool);
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
          double ref = bias[n], mag = std::fabs(bias[n]);
          for (int64_t k = 0; k < K; ++k) {
            ref += double(x[m * K + k]) * w.values[n * K + k];
            mag += std::fabs(double(x[m * K + k]) * w.values[n * K + k]);
          }
          ASSERT_NEAR(y_all[m * N + n], ref, 4 * K * 1.2e-7 * mag + 1e-30) << "m=" << m << " n=" << n;
        }
      }
      // The same rows computed in every sub-batch size give the same bits.
      for (int64_t rows : {1, 2, 3, 4, 5, 16, 17}) {
        std::vector<float> y(rows * N);
        for (int64_t m0 = 0; m0 + rows <= M; m0 += rows) {
          ops::MatMul(x.data() + m0 * K, rows, w.ref, bias.data(), y.data(), pool);
          for (int64_t i = 0; i < rows * N; ++i)
            ASSERT_EQ(y[i], y_all[m0 * N + i]) << "rows=" << rows << " m0=" << m0 << " K=" << K;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MatMulTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

// BF16 weights that allow bf16 activations: x is rounded to bf16 (|x - bf16(x)| <= 2^-9 |x|)
// and products summed in f32, so |y - x·W| <= sum|x W| (2^-9 + 4 K eps). On a CPU with
// AVX512_BF16 the native path must actually run (differ from the exact one somewhere).
TEST(MatMul, Bf16ActivationsWithinRoundingBoundAndBatchInvariant) {
  ThreadPool pool(2);
  bool any_difference = false;
  for (int64_t K : {16, 70, 1024}) {  // 70: a masked tail
    const int64_t N = 37, M = 21;
    TestWeights w = MakeWeights(DType::kBF16, N, K, static_cast<uint32_t>(K));
    WeightRef fast = w.ref;
    fast.bf16_activations = true;
    const std::vector<float> x = RandomVector(M * K, 17);
    const std::vector<float> bias = RandomVector(N, 18);
    std::vector<float> y_all(M * N), y_exact(M * N);
    ops::MatMul(x.data(), M, fast, bias.data(), y_all.data(), pool);
    ops::MatMul(x.data(), M, w.ref, bias.data(), y_exact.data(), pool);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        double ref = bias[n], mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          ref += double(x[m * K + k]) * w.values[n * K + k];
          mag += std::fabs(double(x[m * K + k]) * w.values[n * K + k]);
        }
        ASSERT_NEAR(y_all[m * N + n], ref, mag * (std::ldexp(1.0, -9) + 4 * K * 1.2e-7) + 1e-6)
            << "K=" << K << " m=" << m << " n=" << n;
        any_difference |= y_all[m * N + n] != y_exact[m * N + n];
      }
    }
    for (int64_t rows : {1, 3, 4, 16}) {
      std::vector<float> y(rows * N);
      for (int64_t m0 = 0; m0 + rows <= M; m0 += rows) {
        ops::MatMul(x.data() + m0 * K, rows, fast, bias.data(), y.data(), pool);
        for (int64_t i = 0; i < rows * N; ++i) ASSERT_EQ(y[i], y_all[m0 * N + i]) << "rows=" << rows << " K=" << K;
      }
    }
  }
  if (__builtin_cpu_supports("avx512bf16") && std::string(ops::SimdTargetName()) == "AVX3_DL") {
    EXPECT_TRUE(any_difference) << "the AVX512_BF16 path did not run";
  }
}

TEST(MatMul, ThreadCountDoesNotChangeBits) {
  const TestWeights w = MakeWeights(DType::kBF16, 300, 256, 3);
  const std::vector<float> x = RandomVector(5 * 256, 4);
  std::vector<float> y1(5 * 300), y3(5 * 300);
  ThreadPool one(1), three(3);
  ops::MatMul(x.data(), 5, w.ref, nullptr, y1.data(), one);
  ops::MatMul(x.data(), 5, w.ref, nullptr, y3.data(), three);
  EXPECT_EQ(y1, y3);
}

TEST(Elementwise, RmsNormSiluMulAddMatchReference) {
  const int64_t rows = 3, dim = 100;
  const std::vector<float> x = RandomVector(rows * dim, 1), w = RandomVector(dim, 2);
  std::vector<float> y(rows * dim);
  ops::RmsNorm(x.data(), rows, dim, w.data(), 1e-6f, y.data());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
    for (int64_t i = 0; i < dim; ++i)
      ASSERT_NEAR(y[r * dim + i], x[r * dim + i] * inv * w[i], 1e-5 * std::fabs(x[r * dim + i] * inv * w[i]) + 1e-7);
  }
  const std::vector<float> g = RandomVector(dim, 5, 4.0f), u = RandomVector(dim, 6);
  std::vector<float> s(dim);
  ops::SiluMul(g.data(), u.data(), dim, s.data());
  for (int64_t i = 0; i < dim; ++i) {
    const double ref = g[i] / (1.0 + std::exp(-double(g[i]))) * u[i];
    ASSERT_NEAR(s[i], ref, 1e-5 * std::fabs(ref) + 1e-7) << g[i];
  }
  std::vector<float> acc = x;
  ops::AddInPlace(acc.data(), y.data(), rows * dim);
  for (int64_t i = 0; i < rows * dim; ++i) ASSERT_EQ(acc[i], x[i] + y[i]);
}

// Reference attention in double precision for one (row, head); abs_mean (if given) gets the
// softmax-weighted mean of |v| per element, what bounds the error of perturbed weights.
std::vector<double> ReferenceAttention(const float* q, const float* k, const float* v, int64_t kv_stride,
                                       int hd, int kvh, int b, int e, float scale,
                                       std::vector<double>* abs_mean = nullptr) {
  std::vector<double> scores;
  double mx = -INFINITY;
  for (int t = b; t < e; ++t) {
    double d = 0;
    for (int i = 0; i < hd; ++i) d += double(q[i]) * k[t * kv_stride + kvh * hd + i];
    scores.push_back(d * scale);
    mx = std::max(mx, d * scale);
  }
  double sum = 0;
  for (double& s : scores) sum += (s = std::exp(s - mx));
  std::vector<double> out(hd, 0.0);
  if (abs_mean) abs_mean->assign(hd, 0.0);
  for (int t = b; t < e; ++t) {
    for (int i = 0; i < hd; ++i) {
      const double w = scores[t - b] / sum, x = v[t * kv_stride + kvh * hd + i];
      out[i] += w * x;
      if (abs_mean) (*abs_mean)[i] += w * std::fabs(x);
    }
  }
  return out;
}

// K/V rows stored as a cache of `type` stores them, and the f32 values attention must see.
struct StoredKv {
  std::vector<uint8_t> k, v;
  std::vector<float> k_seen, v_seen;
};

StoredKv StoreRows(const std::vector<float>& k, const std::vector<float>& v, DType type) {
  const size_t elem = type == DType::kF32 ? 4 : 2;
  StoredKv s;
  s.k.resize(k.size() * elem);
  s.v.resize(v.size() * elem);
  ops::StoreKv(k.data(), static_cast<int64_t>(k.size()), type, s.k.data());
  ops::StoreKv(v.data(), static_cast<int64_t>(v.size()), type, s.v.data());
  const auto widen = [&](const std::vector<uint8_t>& bytes, size_t n) {
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      if (type == DType::kF32) {
        std::memcpy(&out[i], bytes.data() + 4 * i, 4);
        continue;
      }
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      out[i] = type == DType::kF16 ? F16ToF32(h) : BF16ToF32(h);
    }
    return out;
  };
  s.k_seen = widen(s.k, k.size());
  s.v_seen = widen(s.v, v.size());
  return s;
}

TEST(Attention, StoreKvRoundsEachElementToNearestEven) {
  std::vector<float> x = RandomVector(37, 21, 3.0f);  // 37: a vector body and a scalar tail
  x[0] = 65504.0f;  // largest f16
  x[1] = 1e-6f;     // f16 subnormal
  x[2] = -0.0f;
  x[3] = 1.0f + 1.0f / 2048;  // halfway between two f16 values: ties to even (1.0)
  std::vector<uint16_t> h(x.size());
  ops::StoreKv(x.data(), static_cast<int64_t>(x.size()), DType::kF16, h.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(h[i], F32ToF16(x[i])) << i << ": " << x[i];
  EXPECT_EQ(F16ToF32(h[3]), 1.0f);
  ops::StoreKv(x.data(), static_cast<int64_t>(x.size()), DType::kBF16, h.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(h[i], F32ToBF16(x[i])) << i << ": " << x[i];
  std::vector<float> special = x;  // bf16 only: f16's NaN payloads are the hardware's
  special[4] = std::numeric_limits<float>::quiet_NaN();
  special[5] = -std::numeric_limits<float>::infinity();
  special[6] = std::bit_cast<float>(0x7F800001u);  // a signalling NaN whose payload rounds away
  special[7] = std::bit_cast<float>(0x3F7FFFFFu);  // rounds up into the next binade
  special[8] = std::numeric_limits<float>::max();  // rounds up to infinity
  ops::StoreKv(special.data(), static_cast<int64_t>(special.size()), DType::kBF16, h.data());
  for (size_t i = 0; i < special.size(); ++i) ASSERT_EQ(h[i], F32ToBF16(special[i])) << i << ": " << special[i];
  std::vector<float> f(x.size());
  ops::StoreKv(x.data(), static_cast<int64_t>(x.size()), DType::kF32, f.data());
  EXPECT_EQ(0, std::memcmp(f.data(), x.data(), x.size() * sizeof(float)));
  EXPECT_THROW(ops::StoreKv(x.data(), 4, DType::kQ8_0, h.data()), Error);
}

// Per cache type and three head shapes (head_dims with a tail after the last full vector, and
// Qwen3's 16/8/128): the double-precision reference on the values the cache holds, the same
// bits from a head-major cache and from the target's tiled layout, and bit equality of every
// row whether it is computed alone or in a block of 1..17 rows. bf16 runs twice where the CPU
// has bf16 dot products: on the f32 path and on the dot path. The dot path rounds the query
// (the reference does too) and the softmax weights to bf16: each weight p_j(1 + e_j), |e_j| <=
// 2^-9, normalised by the sum of the rounded weights, moves by a factor within e^(+-2^-8), so
// an output element moves by at most (e^(2^-8 + d) - 1) * sum_j w_j |v_j| (ReferenceAttention's
// abs_mean), d = 1e-4 covering the f32 sums of the scores; plus the f32 paths' 2e-5.
TEST(Attention, MatchesReferenceAndIsBatchInvariant) {
  ThreadPool pool(2);
  const bool has_dot = [] {
    const testing::Bf16DotScope allow(true);
    return ops::Bf16DotActive();
  }();
  if (!has_dot) std::printf("note: this CPU has no bf16 dot products; their attention path is not run\n");
  // With AMX-BF16 the dot path's head_dim 64 and 128 run on tiles, head_dim 40 on vdpbf16ps.
  if (has_dot && !ops::AmxBf16Supported()) std::printf("note: no AMX-BF16; attention's tile path is not run\n");
  // Groups of 2 (heads scored in pairs) and 3 (one at a time); head_dim 40 pads to whole vectors.
  for (const ops::AttentionShape shape : {ops::AttentionShape{4, 2, 40, 1.0f / std::sqrt(40.0f)},
                                          ops::AttentionShape{16, 8, 128, 1.0f / std::sqrt(128.0f)},
                                          ops::AttentionShape{6, 2, 64, 1.0f / std::sqrt(64.0f)}}) {
    for (const auto& [type, dot] : {std::pair{DType::kF32, false}, std::pair{DType::kF16, false},
                                    std::pair{DType::kBF16, false}, std::pair{DType::kBF16, true}}) {
      if (dot && !has_dot) continue;
      const testing::Bf16DotScope scope(dot);
      SCOPED_TRACE(std::string(DTypeName(type)) + (dot ? " dot" : "") + " head_dim " + std::to_string(shape.head_dim));
      const int T = 151, M = 21;  // odd: a pair of positions half past what is stored
      const int group = shape.n_heads / shape.n_kv_heads;
      const int64_t q_dim = shape.n_heads * shape.head_dim, kv_dim = shape.n_kv_heads * shape.head_dim;
      const std::vector<float> q = RandomVector(M * q_dim, 11), k = RandomVector(T * kv_dim, 12),
                               v = RandomVector(T * kv_dim, 13);
      const StoredKv kv = StoreRows(k, v, type);
      const ops::KvView view{kv.k.data(), kv.v.data(), kv_dim, type};
      // Mixed masks: causal rows, a bidirectional block, a sliding window, a single key, all T
      // keys, and a row with no keys at all (all zeros out).
      std::vector<int32_t> kb(M), ke(M);
      for (int m = 0; m < M; ++m) {
        kb[m] = m % 4 == 1 ? std::max(0, 100 + m - 8) : 0;
        ke[m] = m % 4 == 3 ? 130 : 100 + m + 1;
      }
      kb[0] = 40, ke[0] = 41;
      kb[M - 1] = 7, ke[M - 1] = 7;
      kb[M - 2] = 0, ke[M - 2] = T;
      std::vector<float> out(M * q_dim);
      ops::Attention(q.data(), M, q_dim, shape, view, kb.data(), ke.data(), out.data(), q_dim, pool);
      std::vector<float> q_seen = q;
      if (dot)
        for (float& x : q_seen) x = BF16ToF32(F32ToBF16(x));
      const double weight_error = dot ? std::exp(std::ldexp(1.0, -8) + 1e-4) - 1.0 : 0.0;
      for (int m = 0; m < M; ++m) {
        for (int h = 0; h < shape.n_heads; ++h) {
          std::vector<double> abs_mean;
          const auto ref = ReferenceAttention(q_seen.data() + m * q_dim + h * shape.head_dim, kv.k_seen.data(),
                                              kv.v_seen.data(), kv_dim, shape.head_dim, h / group, kb[m], ke[m],
                                              shape.scale, &abs_mean);
          for (int i = 0; i < shape.head_dim; ++i) {
            const double want = kb[m] < ke[m] ? ref[i] : 0.0;
            ASSERT_NEAR(out[m * q_dim + h * shape.head_dim + i], want, 2e-5 + weight_error * abs_mean[i])
                << "m=" << m << " h=" << h;
          }
        }
      }
      {  // A head-major cache (each KV head's positions contiguous) holds the same values.
        std::vector<float> kh(k.size()), vh(v.size());
        for (int t = 0; t < T; ++t) {
          for (int64_t c = 0; c < kv_dim; ++c) {
            const int64_t h = c / shape.head_dim, i = c % shape.head_dim;
            kh[(h * T + t) * shape.head_dim + i] = k[t * kv_dim + c];
            vh[(h * T + t) * shape.head_dim + i] = v[t * kv_dim + c];
          }
        }
        const StoredKv kvh = StoreRows(kh, vh, type);
        const ops::KvView head_major{kvh.k.data(), kvh.v.data(), shape.head_dim, type,
                                     static_cast<int64_t>(T) * shape.head_dim};
        std::vector<float> out_hm(M * q_dim);
        ops::Attention(q.data(), M, q_dim, shape, head_major, kb.data(), ke.data(), out_hm.data(), q_dim, pool);
        ASSERT_EQ(0, std::memcmp(out_hm.data(), out.data(), out.size() * sizeof(float))) << "head-major layout";
        // And with tiled keys, as the target's cache holds them: positions padded to whole
        // tiles, one row and blocks of rows reading them in place or widened.
        const int64_t positions = (T + ops::kKvTile - 1) / ops::kKvTile * ops::kKvTile;
        const size_t elem = type == DType::kF32 ? 4 : 2;
        std::vector<uint8_t> kt(shape.n_kv_heads * positions * shape.head_dim * elem, 0xFF),
            vt(kt.size(), 0xFF);  // NaN where nothing is stored: never read as a number
        for (int h = 0; h < shape.n_kv_heads; ++h) {
          for (int t = 0; t < T; ++t) {
            const int64_t head = h * positions * shape.head_dim * elem;
            ops::StoreKeyTiled(kh.data() + (h * T + t) * shape.head_dim, shape.head_dim, type, t, kt.data() + head);
            ops::StoreValueTiled(vh.data() + (h * T + t) * shape.head_dim, shape.head_dim, type, t, vt.data() + head);
          }
        }
        const ops::KvView tiled{kt.data(), vt.data(), shape.head_dim, type, positions * shape.head_dim,
                                /*keys_tiled=*/true};
        std::vector<float> out_tiled(M * q_dim);
        ops::Attention(q.data(), M, q_dim, shape, tiled, kb.data(), ke.data(), out_tiled.data(), q_dim, pool);
        ASSERT_EQ(0, std::memcmp(out_tiled.data(), out.data(), out.size() * sizeof(float))) << "tiled keys";
        for (int m = 0; m < M; ++m) {
          ops::Attention(q.data() + m * q_dim, 1, q_dim, shape, tiled, &kb[m], &ke[m], out_tiled.data(), q_dim, pool);
          ASSERT_EQ(0, std::memcmp(out_tiled.data(), out.data() + m * q_dim, q_dim * sizeof(float)))
              << "tiled keys, row " << m << " alone";
        }
        const ops::KvView misaligned{kt.data(), vt.data(), shape.head_dim, type, T * shape.head_dim, true};
        const ops::KvView position_major{kt.data(), vt.data(), kv_dim, type, positions * shape.head_dim, true};
        EXPECT_THROW(ops::Attention(q.data(), M, q_dim, shape, position_major, kb.data(), ke.data(),
                                    out_tiled.data(), q_dim, pool),
                     Error);
        EXPECT_THROW(ops::Attention(q.data(), M, q_dim, shape, misaligned, kb.data(), ke.data(), out_tiled.data(),
                                    q_dim, pool),
                     Error);
      }
      std::vector<float> alone(M * q_dim);
      for (int m = 0; m < M; ++m) {
        ops::Attention(q.data() + m * q_dim, 1, q_dim, shape, view, &kb[m], &ke[m], alone.data() + m * q_dim,
                       q_dim, pool);
        ASSERT_EQ(0, std::memcmp(alone.data() + m * q_dim, out.data() + m * q_dim, q_dim * sizeof(float)))
            << "row " << m;
      }
      for (int R = 2; R <= 17; ++R) {  // a verify block of R rows starting at row 3
        std::vector<float> block(R * q_dim);
        ops::Attention(q.data() + 3 * q_dim, R, q_dim, shape, view, &kb[3], &ke[3], block.data(), q_dim, pool);
        ASSERT_EQ(0, std::memcmp(block.data(), alone.data() + 3 * q_dim, R * q_dim * sizeof(float))) << "R=" << R;
      }
    }
  }
  // The f32 overload reads the same rows as an f32 view.
  const ops::AttentionShape shape{4, 2, 40, 0.1f};
  const std::vector<float> q = RandomVector(160, 1), k = RandomVector(10 * 80, 2), v = RandomVector(10 * 80, 3);
  const int32_t b = 0, e = 10;
  std::vector<float> a(160), c(160);
  ops::Attention(q.data(), 1, 160, shape, k.data(), v.data(), 80, &b, &e, a.data(), 160, pool);
  ops::Attention(q.data(), 1, 160, shape, ops::KvView{k.data(), v.data(), 80, DType::kF32}, &b, &e, c.data(), 160,
                 pool);
  EXPECT_EQ(a, c);
  EXPECT_THROW(ops::Attention(q.data(), 1, 160, shape, ops::KvView{k.data(), v.data(), 80, DType::kI32}, &b, &e,
                              c.data(), 160, pool),
               Error);
}

TEST(Dequantize, PlainTypesRoundTrip) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    const TestWeights w = MakeWeights(t, 3, 33, 21);
    std::vector<float> row(33);
    ops::DequantizeRow(w.ref, 2, row.data());
    for (int i = 0; i < 33; ++i) ASSERT_EQ(row[i], w.values[2 * 33 + i]) << DTypeName(t);
  }
}

}  // namespace
}  // namespace dflash
