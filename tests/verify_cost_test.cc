// The verify-cost and roofline measurements: the synthetic KV fill they stand on, and their
// shape and bookkeeping (timings themselves are not checked: tests are not benchmarks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "bench/compute_peak.h"
#include "bench/roofline.h"
#include "bench/verify_cost.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/qwen3.h"
#include "ops/ops.h"
#include "testing/random_model.h"

namespace dflash {
namespace {

using testing::MakeRandomTarget;

TargetOptions SmallCache(DType kv_type) {
  TargetOptions o;
  o.kv_capacity = 300;
  o.max_rows = 32;
  o.kv_type = kv_type;
  return o;
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A filled cache is a cache like any other: passes run on top of it, finite, and cropping it
// works; lengths outside the cache and an unbound cache are errors that say so.
TEST(VerifyCost, SyntheticKvFillsTheBoundCache) {
  ThreadPool pool(2);
  auto rt = MakeRandomTarget(97, 32, 2, 3);
  for (DType kv : {DType::kF32, DType::kF16, DType::kBF16}) {
    Qwen3Model model(rt->config, rt->weights.store, SmallCache(kv), pool);
    model.FillSyntheticKv(257);
    EXPECT_EQ(model.kv_length(), 257);
    const int32_t block[4] = {1, 2, 3, 4};
    model.Forward(block, /*all_logits=*/true);
    EXPECT_EQ(model.kv_length(), 261);
    for (int r = 0; r < 4; ++r) {
      for (int v = 0; v < 97; ++v) ASSERT_TRUE(std::isfinite(model.Logits(r)[v])) << DTypeName(kv) << " row " << r;
    }
    model.Truncate(10);
    EXPECT_EQ(model.kv_length(), 10);
    EXPECT_NE(ErrorOf([&] { model.FillSyntheticKv(301); }).find("synthetic KV length 301"), std::string::npos);
    EXPECT_NE(ErrorOf([&] { model.FillSyntheticKv(-1); }).find("outside [0, 300]"), std::string::npos);
  }
  TargetOptions unbound = SmallCache(DType::kF16);
  unbound.own_cache = false;
  Qwen3Model model(rt->config, rt->weights.store, unbound, pool);
  EXPECT_NE(ErrorOf([&] { model.FillSyntheticKv(5); }).find("without a KV cache bound"), std::string::npos);
}

// One point per (context, rows), rows = 1 always included as the reference, contexts and rows
// ascending, and the cache left empty; a curve that does not fit the cache names --ctx.
TEST(VerifyCost, CurveCoversEveryPointAndLeavesTheCacheEmpty) {
  ThreadPool pool(2);
  auto rt = MakeRandomTarget(97, 32, 2, 4);
  Qwen3Model model(rt->config, rt->weights.store, SmallCache(DType::kF16), pool);
  const std::vector<VerifyCostPoint> pts = MeasureVerifyCost(model, {200, 64}, {16, 4}, 2);
  ASSERT_EQ(pts.size(), 6u);
  const int want_ctx[6] = {64, 64, 64, 200, 200, 200}, want_rows[6] = {1, 4, 16, 1, 4, 16};
  for (size_t i = 0; i < pts.size(); ++i) {
    EXPECT_EQ(pts[i].context, want_ctx[i]);
    EXPECT_EQ(pts[i].rows, want_rows[i]);
    EXPECT_GT(pts[i].ms, 0.0);
    EXPECT_LE(pts[i].ms_min, pts[i].ms);
    EXPECT_GE(pts[i].ms_max, pts[i].ms);
  }
  EXPECT_EQ(pts[0].ratio, 1.0);
  EXPECT_EQ(pts[3].ratio, 1.0);
  EXPECT_EQ(model.kv_length(), 0);
  EXPECT_NE(ErrorOf([&] { MeasureVerifyCost(model, {290}, {16}, 1); }).find("raise --ctx"), std::string::npos);
}

// A profiled curve splits each pass into stages that together are the pass (the clock covers
// all of Forward but its argument checks) and every matrix stage costs something; an
// unprofiled curve reports no stages.
TEST(VerifyCost, ProfileSplitsEachPassIntoItsStages) {
  ThreadPool pool(2);
  auto rt = MakeRandomTarget(97, 32, 2, 6);
  Qwen3Model model(rt->config, rt->weights.store, SmallCache(DType::kF16), pool);
  const std::vector<VerifyCostPoint> pts = MeasureVerifyCost(model, {100}, {8}, 3, {}, /*profile=*/true);
  ASSERT_EQ(pts.size(), 2u);
  for (const VerifyCostPoint& p : pts) {
    double total = 0;
    for (double ms : p.stages.ms) {
      EXPECT_GE(ms, 0.0);
      total += ms;
    }
    for (PassStage s : {PassStage::kQkv, PassStage::kAttention, PassStage::kOProj, PassStage::kGateUp,
                        PassStage::kDown, PassStage::kLmHead}) {
      EXPECT_GT(p.stages[s], 0.0) << PassStageName(s) << " rows " << p.rows;
    }
    EXPECT_LE(total, p.ms_max) << "rows " << p.rows;
    EXPECT_GE(total, 0.8 * p.ms_min) << "rows " << p.rows;
  }
  for (const VerifyCostPoint& p : MeasureVerifyCost(model, {100}, {8}, 1)) {
    for (double ms : p.stages.ms) EXPECT_EQ(ms, 0.0);
  }
}

// Multiply-adds of a pass, counted by hand for a 2-layer config: every row's matrices and LM
// head, and per layer 2 * heads * head_dim per key each row attends to (a window caps them).
TEST(VerifyCost, PassMacsCountMatricesAndEachRowsKeys) {
  DecoderConfig c;
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 2;
  c.num_layers = 2;
  c.vocab_size = 10;
  c.layer_window = {0, 3};
  const PassMacs m = CountPassMacs(c, /*context=*/5, /*rows=*/2);
  const double layer = 8 * (8 + 2 * 4) + 8 * 8 + 3 * 12 * 8;  // q, k, v; o; gate, up, down
  EXPECT_EQ(m.matmul, 2 * (2 * layer + 10 * 8));
  // Rows attend to 6 and 7 keys; the windowed layer to 3 each.
  EXPECT_EQ(m.attention, 2.0 * 4 * 2 * ((6 + 7) + (3 + 3)));
  // A hybrid's linear-attention layer attends to no keys.
  c.layer_linear = {true, false};
  EXPECT_EQ(CountPassMacs(c, 5, 2).attention, 2.0 * 4 * 2 * (3 + 3));
}

// The compute probe reports positive rates, int8 only where the SIMD target has dot products.
TEST(ComputePeak, RatesArePositiveAndPassesAreChecked) {
  ThreadPool pool(2);
  const ComputePeak p = MeasureComputePeak(pool, 1);
  EXPECT_GT(p.f32_gmacs, 0.0);
  EXPECT_GE(p.int8_gmacs, 0.0);
  EXPECT_GE(p.bf16_gmacs, 0.0);
  if (ops::Bf16DotActive()) {
    EXPECT_GT(p.bf16_gmacs, 0.0);
  }
  if (std::string(ops::SimdTargetName()) == "AVX3_DL") {
    EXPECT_GT(p.int8_gmacs, 0.0);
  }
  EXPECT_NE(ErrorOf([&] { MeasureComputePeak(pool, 0); }).find("passes must be at least 1"), std::string::npos);
}

// The roofline is the higher of the two bandwidth probes, and each context's decode point is
// its one-row pass against it.
TEST(Roofline, DecodeIsMeasuredAgainstTheHigherProbe) {
  ThreadPool pool(2);
  auto rt = MakeRandomTarget(97, 32, 2, 5);
  Qwen3Model model(rt->config, rt->weights.store, SmallCache(DType::kF16), pool);
  RooflineOptions opt;
  opt.contexts = {128, 32};
  opt.rows = {1, 8};
  opt.repeats = 1;
  opt.bandwidth_bytes = int64_t{8} << 20;
  opt.prefill_tokens = 40;
  const RooflineResult r = MeasureRoofline(model, pool, opt);
  EXPECT_GT(r.bandwidth.median_gbs, 0.0);
  EXPECT_GT(r.bandwidth_after.median_gbs, 0.0);
  EXPECT_EQ(r.roofline_gbs, std::max(r.bandwidth.median_gbs, r.bandwidth_after.median_gbs));
  EXPECT_GT(r.prefill_tok_s, 0.0);
  ASSERT_EQ(r.decode.size(), 2u);
  EXPECT_EQ(r.decode[0].context, 32);
  EXPECT_EQ(r.decode[1].context, 128);
  for (const DecodePoint& d : r.decode) {
    EXPECT_EQ(d.bytes, model.DecodeBytes(d.context));
    EXPECT_DOUBLE_EQ(d.roofline_pct, 100.0 * d.gbs / r.roofline_gbs);
  }
  EXPECT_EQ(r.verify.size(), 4u);
  EXPECT_EQ(model.kv_length(), 0);
}

}  // namespace
}  // namespace dflash
