// The planner's data and arithmetic: the registry against the committed config.json files,
// the memory model against the fixtures' real bytes, and the cost model's algebra.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "model/config.h"
#include "plan/cost_model.h"
#include "plan/inspect.h"
#include "plan/memory_model.h"
#include "plan/plan.h"
#include "plan/registry.h"

namespace dflash::plan {
namespace {

const std::string kRoot = DFLASH_SOURCE_DIR;

Registry Shipped() { return LoadRegistry(kRoot + "/data/pairs.json"); }

void ExpectSameShape(const ModelShape& registry, const ModelShape& config, const std::string& who) {
  SCOPED_TRACE(who);
  EXPECT_EQ(registry.architecture, config.architecture);
  EXPECT_EQ(registry.hidden, config.hidden);
  EXPECT_EQ(registry.intermediate, config.intermediate);
  EXPECT_EQ(registry.layers, config.layers);
  EXPECT_EQ(registry.heads, config.heads);
  EXPECT_EQ(registry.kv_heads, config.kv_heads);
  EXPECT_EQ(registry.head_dim, config.head_dim);
  EXPECT_EQ(registry.vocab, config.vocab);
  EXPECT_EQ(registry.tied_embeddings, config.tied_embeddings);
  EXPECT_EQ(registry.attention_bias, config.attention_bias);
  EXPECT_EQ(registry.full_attention_layers, config.full_attention_layers);
}

TEST(PlanRegistry, VerifiedShapesEqualTheCommittedConfigs) {
  const Registry r = Shipped();
  int checked = 0;
  for (const PairEntry& p : r.pairs) {
    for (const ModelRef* m : {&p.target, &p.draft}) {
      if (m->config.empty()) continue;
      const std::string path = kRoot + "/" + m->config;
      const ModelShape parsed = m->shape.is_draft() ? ShapeOf(DraftConfigFromJson(ReadJsonFile(path), path))
                                                    : ShapeOf(TargetConfigFromJson(ReadJsonFile(path), path));
      ExpectSameShape(m->shape, parsed, p.name + " " + m->id);
      ++checked;
    }
  }
  EXPECT_GE(checked, 2);  // Qwen3-4B and Qwen3-8B at least
}

// The shapes and the published parameter counts are separate numbers from separate sources;
// counting parameters from a verified shape must land on the published count.
TEST(PlanRegistry, VerifiedShapesGiveThePublishedParameterCounts) {
  for (const PairEntry& p : Shipped().pairs) {
    if (!p.target.verified) continue;
    ASSERT_GT(p.target.params_b, 0) << p.name;
    EXPECT_NEAR(CountParams(p.target.shape).total() / 1e9, p.target.params_b, 0.03 * p.target.params_b) << p.name;
  }
}

TEST(PlanRegistry, EveryPairIsConsistent) {
  const Registry r = Shipped();
  ASSERT_GE(r.pairs.size(), 10u);
  for (const PairEntry& p : r.pairs) {
    SCOPED_TRACE(p.name);
    EXPECT_EQ(p.draft.shape.hidden, p.target.shape.hidden);
    EXPECT_GE(p.draft.shape.block_size, 2);
    EXPECT_FALSE(p.formats.empty());
    EXPECT_FALSE(p.licence.empty());
    // Only dense Qwen3 targets with DFlashDraftModel drafts run today.
    EXPECT_EQ(p.runs_today, p.target.shape.architecture == "Qwen3ForCausalLM" && p.draft.shape.architecture == "DFlashDraftModel");
  }
  bool borrowed = false;
  EXPECT_DOUBLE_EQ(TaskAcceptance(r, *r.Find("qwen3-8b"), "math", &borrowed), 7.30);
  EXPECT_FALSE(borrowed);
  EXPECT_DOUBLE_EQ(TaskAcceptance(r, *r.Find("qwen3-4b"), "code", &borrowed), 5.84);
  EXPECT_TRUE(borrowed);
}

Json MinimalRegistry() {
  return Json::parse(R"({
    "schema": 1, "sources": {"s": "test"},
    "default_tau": {"math": 7, "code": 5, "chat": 3, "source": "s"},
    "agent": {"tokens_per_cycle": [2.3, 3.0], "context": 8400, "source": "s"},
    "pairs": [{"name": "p", "licence": "x", "runs_today": true, "formats": [{"format": "hf-bf16", "repo": "a/b"}],
      "tau": {"source": "s"},
      "target": {"id": "a/b", "verified": false, "source": "s", "shape": {"architecture": "Qwen3ForCausalLM",
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256}},
      "draft": {"id": "a/c", "verified": false, "source": "s", "shape": {"architecture": "DFlashDraftModel",
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "capture_layers": 2, "block_size": 16}}}]})");
}

void ExpectError(const Json& j, const std::string& fragment) {
  try {
    RegistryFromJson(j, "reg.json");
    ADD_FAILURE() << "accepted a registry that should fail with: " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("reg.json"), std::string::npos) << e.what();
  }
}

TEST(PlanRegistry, BadEntriesAreErrorsNamingTheField) {
  EXPECT_NO_THROW(RegistryFromJson(MinimalRegistry(), "reg.json"));
  Json j = MinimalRegistry();
  j["pairs"][0]["target"]["source"] = "nowhere";
  ExpectError(j, "source 'nowhere'");
  j = MinimalRegistry();
  j["pairs"][0]["runs_today"] = false;
  ExpectError(j, "why_not");
  j = MinimalRegistry();
  j["pairs"][0]["draft"]["shape"]["hidden_size"] = 32;
  ExpectError(j, "draft hidden_size 32");
  j = MinimalRegistry();
  j["pairs"][0]["target"]["shape"]["num_key_value_heads"] = 3;
  ExpectError(j, "num_key_value_heads 3");
  j = MinimalRegistry();
  j["pairs"][0]["target"]["shape"].erase("hidden_size");
  ExpectError(j, "'hidden_size' is missing");
  j = MinimalRegistry();
  j["pairs"][0]["target"]["verified"] = true;
  ExpectError(j, "'config'");
  j = MinimalRegistry();
  j["pairs"].push_back(j["pairs"][0]);
  ExpectError(j, "appears twice");
}

// Parameters counted from config.json times the stored bytes per weight equal the tensor
// bytes in the fixtures' safetensors files (read from their headers).
TEST(PlanMemory, TargetParametersMatchTheFixturesBytes) {
  for (const char* name : {"qwen3-tiny", "qwen3-tied-bf16", "qwen3-linear-sharded", "qwen3-yarn"}) {
    SCOPED_TRACE(name);
    const ModelFiles f = InspectTarget(kRoot + "/tests/fixtures/" + name);
    ASSERT_TRUE(f.loads) << f.why_not;
    ASSERT_EQ(f.dtype_bytes.size(), 1u);  // one dtype per fixture
    const double bytes_per_weight = f.dtype_bytes.count("F32") ? 4 : 2;  // the others are BF16 or F16
    EXPECT_EQ(static_cast<int64_t>(CountParams(ShapeOf(*f.target)).total() * bytes_per_weight), f.weight_bytes);
  }
}

TEST(PlanMemory, DraftParametersMatchTheFixturesBytes) {
  for (const char* name : {"dflash-tiny", "dflash-sliding"}) {
    SCOPED_TRACE(name);
    const ModelFiles f = InspectDraft(kRoot + "/tests/fixtures/" + name);
    ASSERT_TRUE(f.loads) << f.why_not;
    EXPECT_EQ(static_cast<int64_t>(CountParams(ShapeOf(*f.draft)).total() * 4), f.weight_bytes);
  }
}

TEST(PlanMemory, KvCacheAndRecurrentState) {
  ModelShape s;
  s.layers = s.full_attention_layers = 36;
  s.kv_heads = 8;
  s.head_dim = 128;
  // Qwen3-8B: 36 layers x 8 kv heads x 128 x K and V x 2 bytes = 144 KiB per position.
  EXPECT_EQ(KvCacheBytes(s, 1024, 2), int64_t{144} * 1024 * 1024);
  s.sliding_layers = 18;
  s.sliding_window = 128;
  EXPECT_EQ(KvCacheBytes(s, 1024, 2), int64_t{2} * 8 * 128 * 2 * (18 * 1024 + 18 * 128));
  EXPECT_EQ(RecurrentStateBytes(s), 0);
  s.sliding_layers = s.sliding_window = 0;
  s.full_attention_layers = 9;
  s.linear = LinearAttentionShape{16, 32, 128, 128, 4};
  // 27 linear layers x (32 heads x 128 x 128 state + (2 x 16 x 128 + 32 x 128) x 3 conv) x 4 bytes
  EXPECT_EQ(RecurrentStateBytes(s), int64_t{27} * (32 * 128 * 128 + (2 * 16 * 128 + 32 * 128) * 3) * 4);
  EXPECT_EQ(KvCacheBytes(s, 1024, 2), int64_t{9} * 2 * 8 * 128 * 2 * 1024);
}

TEST(PlanCost, AcceptanceInvertsExpectedTokens) {
  for (double tau : {1.0, 2.65, 3.71, 7.3, 15.9}) {
    const double a = PerDepthAcceptance(tau, 16);
    EXPECT_NEAR(ExpectedTokens(a, 16), tau, 1e-9) << tau;
  }
  EXPECT_EQ(PerDepthAcceptance(20, 16), 1.0);
  EXPECT_THROW(PerDepthAcceptance(0.5, 16), Error);
}

TEST(PlanCost, PredictFollowsThePolicy) {
  // A cheap draft and verify: DFlash at the full block commits tau tokens per (draft + verify).
  const Prediction fast = Predict(StepCosts{10, 1, 0.01, {}}, GeometricCurve(7.3, 16), 16);
  EXPECT_DOUBLE_EQ(fast.plain_tok_s, 100);
  EXPECT_NEAR(fast.full_block_tok_s, 1e3 * 7.3 / (1 + 10 * (1 + 0.01 * 15)), 1e-6);
  EXPECT_GE(fast.adaptive_tok_s, fast.full_block_tok_s);
  EXPECT_GT(fast.best_rows, 8);
  // A draft that costs more than tau steps can never pay: the policy decodes plainly.
  const Prediction slow = Predict(StepCosts{10, 80, 0.3, {}}, GeometricCurve(3.71, 16), 16);
  EXPECT_EQ(slow.best_rows, 1);
  EXPECT_DOUBLE_EQ(slow.adaptive_tok_s, slow.plain_tok_s);
  EXPECT_LT(slow.full_block_tok_s, slow.plain_tok_s);
}

TEST(PlanCost, PerDepthCurveSetsTheVerifyLength) {
  // The draft agrees for 4 drafts, then never: verifying more than 5 rows only costs.
  const std::vector<double> curve{1, 1, 1, 1, 0, 0.5};
  EXPECT_DOUBLE_EQ(ExpectedTokens(curve, 16), 5);
  EXPECT_DOUBLE_EQ(ExpectedTokens(curve, 3), 3);
  const Prediction p = Predict(StepCosts{10, 2, 0.05, {}}, curve, 16);
  EXPECT_EQ(p.best_rows, 5);
  EXPECT_NEAR(p.adaptive_tok_s, 1e3 * 5 / (2 + 10 * (1 + 0.05 * 4)), 1e-9);
  EXPECT_DOUBLE_EQ(p.tau, 5);
  EXPECT_THROW(Predict(StepCosts{0, 2, 0.05, {}}, curve, 16), Error);
}

TEST(PlanCost, LoopWorkCountsPerStepAndPerRowRead) {
  // A plain step pays one pick and one append; a cycle one append and a pick per draft and per
  // target row read (E[k] of them: the accepted drafts and the token after them).
  StepCosts c{10, 2, 0.05, 0.1, 0.5};
  EXPECT_DOUBLE_EQ(PlainStepMs(c), 10.6);
  const std::vector<double> curve{1, 1, 1, 1, 0, 0.5};
  EXPECT_DOUBLE_EQ(CycleMs(c, 5, 5), 2 + 10 * (1 + 0.05 * 4) + 0.5 + 0.1 * (4 + 5));
  const Prediction p = Predict(c, curve, 16);
  EXPECT_DOUBLE_EQ(p.plain_tok_s, 1e3 / 10.6);
  EXPECT_EQ(p.best_rows, 5);
  EXPECT_NEAR(p.adaptive_tok_s, 1e3 * 5 / CycleMs(c, 5, 5), 1e-9);
  // Zero loop terms (the adaptive policy's costs, timed around the loop) leave the model as it was.
  EXPECT_DOUBLE_EQ(PlainStepMs(StepCosts{10, 2, 0.05}), 10);
  EXPECT_THROW(Predict(StepCosts{10, 2, 0.05, -1, 0}, curve, 16), Error);
}

// The run-memory estimate, for the shipped pair's files as `bench --report` sets it beside the
// measured peak RSS: as stored the weights are the files; quantised at load the quantised copy
// plus the largest stored matrix (mapped while read, then dropped).
TEST(PlanMemory, RunEstimateAsStoredAndQuantised) {
  const ModelFiles t = InspectTarget(kRoot + "/models/dflash-pair/target");
  const ModelFiles d = InspectDraft(kRoot + "/models/dflash-pair/draft");
  ASSERT_TRUE(t.loads && d.loads);
  const ModelShape ts = ShapeOf(*t.target), ds = ShapeOf(*d.draft);
  const MemoryNeed stored = EstimateRunMemory(ts, &ds, t.weight_bytes, d.weight_bytes, "", 1024, 2);
  EXPECT_EQ(stored.target_weights, t.weight_bytes);
  EXPECT_EQ(stored.draft_weights, d.weight_bytes);
  EXPECT_EQ(stored.load_files, 0);
  EXPECT_EQ(stored.kv_cache, KvCacheBytes(ts, 1024, 2));
  const MemoryNeed q8 = EstimateRunMemory(ts, &ds, t.weight_bytes, d.weight_bytes, "q8_0", 1024, 2);
  EXPECT_NEAR(double(q8.load_files), double(ts.vocab) * ts.hidden * t.weight_bytes / CountParams(ts).total(), 1);
  EXPECT_NEAR(double(q8.target_weights), CountParams(ts).total() * 34 / 32, 1);  // 32 int8 + an f16 scale
  EXPECT_EQ(q8.total() - stored.total(),
            q8.target_weights + q8.draft_weights + q8.load_files - t.weight_bytes - d.weight_bytes);
  const MemoryNeed alone = EstimateRunMemory(ts, nullptr, t.weight_bytes, d.weight_bytes, "", 1024, 2);
  EXPECT_EQ(alone.draft_weights + alone.draft_cache, 0);
}

TEST(PlanChoice, LargestRunnablePairThatFits) {
  const Registry r = Shipped();
  PlanRequest req;
  req.cpu = "test";
  req.threads = req.hardware_threads = 2;
  req.rates = MachineRates{40, 60, 240};
  req.memory_gb = 64;
  Plan big = MakePlan(r, req);
  ASSERT_GE(big.choice, 0);
  EXPECT_EQ(big.candidates[big.choice].pair->name, "qwen3-8b");
  EXPECT_EQ(big.candidates[big.choice].format, "q8_0");
  req.memory_gb = 8;  // 8B q8_0 needs ~10 GiB; 4B q8_0 ~5.4 GiB fits in 8 - 1.5
  Plan small = MakePlan(r, req);
  ASSERT_GE(small.choice, 0);
  EXPECT_EQ(small.candidates[small.choice].pair->name + "/" + small.candidates[small.choice].format, "qwen3-8b/q4_k");
  req.memory_gb = 2;
  EXPECT_EQ(MakePlan(r, req).choice, -1);
  req.pair = "nope";
  EXPECT_THROW(MakePlan(r, req), Error);
}

}  // namespace
}  // namespace dflash::plan
