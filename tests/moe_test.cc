// Mixture-of-experts targets (Qwen3MoeForCausalLM, and the Qwen3.5 hybrid MoE with its gated
// shared expert): the grouped expert kernel is batch-invariant bit for bit, the MoE block and the
// whole model match transformers (tools/make_moe_fixtures.py made the fixtures and goldens, in
// both of transformers' expert layouts), DFlash stays lossless on a MoE target, bad expert files
// fail with errors naming the tensor, and the cost model charges a verify its distinct experts.
//
// Tolerances. As for the dense goldens (golden_test.cc): both sides compute in f32 on the same
// stored weights, so only summation order differs; a MoE layer adds a softmax over a handful
// of router logits and a weighted sum of top_k expert outputs, each a few roundings more. The
// tests print the largest differences; measured: the block 3.6e-7, logits 1.2e-6 (Qwen3 MoE) and
// 2.0e-5 (Qwen3.5 MoE: its Gated DeltaNet layers add their own rounding, as in qwen35_test.cc),
// hidden states 1.8e-6 and 2.3e-5. The dense check's 2e-4 stays 10x above them and far below what a wrong
// routing does (an expert swapped for another moves its rows' outputs by
// ~1e-1). Router choices and greedy tokens must match exactly: the fixture script keeps every
// top-k choice at least 1e-4 in probability clear of the next expert.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/json_file.h"
#include "io/quantize_store.h"
#include "io/safetensors.h"
#include "model/load.h"
#include "model/moe.h"
#include "model/qwen3.h"
#include "ops/moe.h"
#include "plan/cost_model.h"
#include "spec/policy.h"
#include "ops/ops.h"
#include "spec/engine.h"
#include "spec/generate.h"
#include "testing/cycling_drafter.h"
#include "testing/goldens.h"
#include "testing/random_model.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = testing::kFixturesDir;
const fs::path kGoldens = testing::kGoldensDir / "moe";
constexpr float kTolerance = 2e-4f;

const Json& Manifest() {
  static const Json m = ReadJsonFile((kGoldens / "manifest.json").string());
  return m;
}

using testing::Golden;
using testing::MaxAbsDiff;

// ---------------------------------------------------------------------------------------------
// The grouped kernel.

struct RandomExperts {
  testing::RandomWeights weights;
  std::vector<ops::ExpertWeights> experts;
};

// E experts of width I over hidden H, f32, then quantised (and packed) to `dtype` unless f32.
std::unique_ptr<RandomExperts> MakeExperts(int E, int64_t H, int64_t I, DType dtype, ThreadPool& pool, uint32_t seed) {
  auto r = std::make_unique<RandomExperts>();
  std::mt19937 rng(seed);
  for (int e = 0; e < E; ++e) {
    const std::string p = "e" + std::to_string(e);
    r->weights.Add(p + ".gate", {I, H}, rng, 0.2f);
    r->weights.Add(p + ".up", {I, H}, rng, 0.2f);
    r->weights.Add(p + ".down", {H, I}, rng, 0.2f);
  }
  if (dtype != DType::kF32) QuantizeMatrices(r->weights.store, dtype, pool);
  PackMatrices(r->weights.store, pool);
  const TensorStore& s = r->weights.store;
  for (int e = 0; e < E; ++e) {
    const std::string p = "e" + std::to_string(e);
    r->experts.push_back({AsWeight(*s.Find(p + ".gate")), AsWeight(*s.Find(p + ".up")), AsWeight(*s.Find(p + ".down"))});
  }
  return r;
}

// For routings where 1..16 rows share few or many experts: every row of a grouped pass is
// bitwise the same row computed alone, and the pass reports the experts its rows chose.
TEST(MoeKernel, EachRowEqualsItsOneRowComputationBitForBit) {
  ThreadPool pool(2);
  struct Case {
    DType dtype;
    int E, k;
    int64_t H, I;
  };
  // Q4_K needs rows of whole 256-element super-blocks.
  for (const Case& c : {Case{DType::kF32, 4, 2, 64, 32}, Case{DType::kF32, 16, 4, 64, 32}, Case{DType::kQ8_0, 8, 2, 64, 64},
                        Case{DType::kQ8_0, 8, 8, 64, 32}, Case{DType::kQ4_K, 6, 3, 256, 256}, Case{DType::kF32, 3, 1, 32, 32}}) {
    SCOPED_TRACE(std::string(DTypeName(c.dtype)) + " E=" + std::to_string(c.E) + " k=" + std::to_string(c.k));
    auto ex = MakeExperts(c.E, c.H, c.I, c.dtype, pool, 7 + c.E);
    ops::ExpertScratch batch(16, c.k, c.E, c.H, c.I), single(1, c.k, c.E, c.H, c.I);
    std::mt19937 rng(c.E * 100 + c.k);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> unit(0.05f, 1.0f);
    for (int M = 1; M <= 16; ++M) {
      std::vector<float> x(M * c.H), y(M * c.H), alone(c.H), weights(M * c.k);
      std::vector<int32_t> ids(M * c.k);
      for (float& v : x) v = normal(rng);
      std::set<int32_t> distinct;
      for (int m = 0; m < M; ++m) {
        std::vector<int32_t> perm(c.E);
        for (int e = 0; e < c.E; ++e) perm[e] = e;
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int j = 0; j < c.k; ++j) {
          ids[m * c.k + j] = perm[j];
          weights[m * c.k + j] = unit(rng);
          distinct.insert(perm[j]);
        }
      }
      const int touched = ops::MixExperts(x.data(), M, ex->experts, ids.data(), weights.data(), batch, y.data(), pool);
      EXPECT_EQ(touched, static_cast<int>(distinct.size())) << "rows " << M;
      for (int m = 0; m < M; ++m) {
        ops::MixExperts(x.data() + m * c.H, 1, ex->experts, ids.data() + m * c.k, weights.data() + m * c.k, single,
                        alone.data(), pool);
        EXPECT_EQ(0, std::memcmp(alone.data(), y.data() + m * c.H, c.H * sizeof(float))) << "row " << m << " of " << M;
      }
    }
  }
}

// The kernel against the block written out: each chosen expert's SwiGLU MLP with MatMul, summed
// in choice order. Same kernels, same order: equal bit for bit.
TEST(MoeKernel, EqualsExpertsComputedOneByOne) {
  ThreadPool pool(2);
  const int E = 5, k = 2, M = 3;
  const int64_t H = 32, I = 32;
  auto ex = MakeExperts(E, H, I, DType::kF32, pool, 3);
  ops::ExpertScratch scratch(M, k, E, H, I);
  const std::vector<int32_t> ids = {4, 1, 1, 0, 2, 4};
  const std::vector<float> weights = {0.7f, 0.3f, 0.5f, 0.25f, 0.9f, 0.1f};
  std::vector<float> x(M * H), y(M * H);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  EXPECT_EQ(ops::MixExperts(x.data(), M, ex->experts, ids.data(), weights.data(), scratch, y.data(), pool), 4);
  std::vector<float> gate(I), up(I), out(H), want(H);
  for (int m = 0; m < M; ++m) {
    for (int j = 0; j < k; ++j) {
      const ops::ExpertWeights& w = ex->experts[ids[m * k + j]];
      ops::MatMul(x.data() + m * H, 1, w.gate, nullptr, gate.data(), pool);
      ops::MatMul(x.data() + m * H, 1, w.up, nullptr, up.data(), pool);
      ops::SiluMul(gate.data(), up.data(), I, gate.data());
      ops::MatMul(gate.data(), 1, w.down, nullptr, out.data(), pool);
      for (int64_t h = 0; h < H; ++h) want[h] = j == 0 ? weights[m * k] * out[h] : want[h] + weights[m * k + j] * out[h];
    }
    EXPECT_EQ(0, std::memcmp(want.data(), y.data() + m * H, H * sizeof(float))) << "row " << m;
  }
}

TEST(MoeRouting, SoftmaxTopKLowerIdFirstOnTiesRenormalisedWhenAsked) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.0f, 2.0f};
  double z = 0;
  for (float v : logits) z += std::exp(v - 3.0);
  for (bool renormalize : {false, true}) {
    int32_t ids[3];
    float w[3];
    ops::RouteTopK(logits.data(), 1, 5, 3, renormalize, ids, w);
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(ids[1], 2);
    EXPECT_EQ(ids[2], 4);
    const double p[3] = {1 / z, 1 / z, std::exp(-1.0) / z};
    const double sum = renormalize ? p[0] + p[1] + p[2] : 1.0;
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(w[j], p[j] / sum, 1e-6) << "choice " << j << " renormalize " << renormalize;
  }
  int32_t id;
  float w;
  EXPECT_THROW(ops::RouteTopK(logits.data(), 1, 5, 6, false, &id, &w), Error);
}

// ---------------------------------------------------------------------------------------------
// Against transformers.

Golden ReadGolden(const Json& file) { return Golden(kGoldens / file.get<std::string>()); }

class MoeGolden : public ::testing::TestWithParam<std::string> {
 protected:
  std::string dir() const { return (kFixtures / GetParam()).string(); }
  Golden golden() const { return ReadGolden(Manifest()["targets"][GetParam()]["golden"]); }
};

// Where the decoder layers sit: Qwen3_5MoeForConditionalGeneration nests them under
// model.language_model.
std::string LayerPrefix(const TensorStore& store, int layer) {
  const bool nested = store.Find("model.language_model.embed_tokens.weight") != nullptr;
  return (nested ? "model.language_model.layers." : "model.layers.") + std::to_string(layer);
}

// Each sparse layer's block on transformers' own input: the same experts, in the same order,
// and the same output within kTolerance.
TEST_P(MoeGolden, BlockRoutesAndMixesAsTransformers) {
  LoadedModel<TargetConfig> m = LoadTarget(dir());
  const TargetConfig& cfg = m.config;
  const Golden g = golden();
  const std::vector<int> sparse = Manifest()["targets"][GetParam()]["sparse_layers"].get<std::vector<int>>();
  for (int l = 0; l < cfg.decoder.num_layers; ++l) {
    EXPECT_EQ(cfg.moe.sparse[l], std::find(sparse.begin(), sparse.end(), l) != sparse.end()) << "layer " << l;
  }
  ThreadPool pool(2);
  MoeBlock block(cfg.moe, cfg.decoder.hidden_size, 64);
  const int64_t H = cfg.decoder.hidden_size, k = cfg.moe.top_k;
  float worst = 0;
  for (size_t p = 0; p < Manifest()["prompts"].size(); ++p) {
    for (int l : sparse) {
      const std::string key = "prompt" + std::to_string(p) + ".layer" + std::to_string(l);
      const MoeWeights w = LoadMoe(m.store, LayerPrefix(m.store, l) + ".mlp", cfg.moe, H);
      const std::vector<float> x = g.F32(key + ".moe_input"), want = g.F32(key + ".moe_output");
      const std::vector<int32_t> ids = g.I32(key + ".router_ids");
      const int T = static_cast<int>(x.size() / H);
      std::vector<float> y(x.size());
      block.Forward(w, x.data(), T, y.data(), pool);
      for (int t = 0; t < T; ++t) {
        EXPECT_TRUE(std::equal(ids.begin() + t * k, ids.begin() + (t + 1) * k, block.choices(t))) << key << " token " << t;
      }
      worst = std::max(worst, MaxAbsDiff(y.data(), want.data(), y.size()));
    }
  }
  std::printf("%s: MoE block output differs from transformers' by at most %.2e\n", GetParam().c_str(), worst);
  EXPECT_LT(worst, kTolerance);
}

TEST_P(MoeGolden, LogitsAndHiddenStatesMatchTransformers) {
  LoadedModel<TargetConfig> m = LoadTarget(dir());
  const DecoderConfig& d = m.config.decoder;
  TargetOptions opt;
  opt.kv_capacity = 128;
  opt.kv_type = DType::kF32;
  for (int l = 0; l < d.num_layers; ++l) opt.capture_layers.push_back(l);
  ThreadPool pool(2);
  const std::unique_ptr<TargetModel> model = NewTargetModel(m.config, m.store, opt, pool);
  const Golden g = golden();
  float worst_logit = 0, worst_hidden = 0;
  for (size_t p = 0; p < Manifest()["prompts"].size(); ++p) {
    const std::string key = "prompt" + std::to_string(p);
    const testing::PromptDiff diff = testing::PrefillDiff(*model, g, key);
    worst_logit = std::max(worst_logit, diff.logits);
    worst_hidden = std::max(worst_hidden, diff.hidden);
  }
  std::printf("%s: logits differ by at most %.2e, hidden states by %.2e\n", GetParam().c_str(), worst_logit, worst_hidden);
  EXPECT_LT(worst_logit, kTolerance);
  EXPECT_LT(worst_hidden, kTolerance);
}

TEST_P(MoeGolden, GreedyContinuationMatchesTransformersGenerate) {
  EngineOptions eo;
  eo.target_dir = dir();
  eo.context = 128;
  eo.kv_type = DType::kF32;
  eo.prefill_chunk = 3;  // chunked prefill is part of what is compared
  Engine engine(eo);
  GenerateOptions go;
  go.max_new_tokens = Manifest()["greedy_new"].get<int>();
  go.ignore_stop = true;
  go.block_size = 1;
  const Golden g = golden();
  EXPECT_EQ(engine.Generate(g.I32("prompt1.ids"), go).tokens, g.I32("greedy"));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MoeGolden, ::testing::ValuesIn(testing::Keys(Manifest()["targets"])), testing::ParamName);

// ---------------------------------------------------------------------------------------------
// The model around the block.

TargetOptions SpecOptions() {
  TargetOptions o;
  o.kv_capacity = 256;
  o.max_rows = 16;
  o.kv_type = DType::kF16;
  return o;
}

// Greedy DFlash equals plain greedy on a MoE target at every block size and acceptance length,
// with f32 experts and with load-time Q8_0 ones (fused fixtures: the split views are quantised);
// the hybrid MoE targets roll their recurrent state back after every partial acceptance.
TEST(MoeSpec, GreedyDFlashEqualsPlainAtEveryAcceptanceLength) {
  ThreadPool pool(2);
  for (const char* name : {"qwen3moe-tiny", "qwen3moe-fused-bf16", "qwen35moe-tiny", "qwen35moe-vl-bf16"}) {
    for (bool quantise : {false, true}) {
      SCOPED_TRACE(std::string(name) + (quantise ? " q8_0" : ""));
      LoadedModel<TargetConfig> m = LoadTarget((kFixtures / name).string());
      if (quantise) {
        QuantizeMatrices(m.store, DType::kQ8_0, pool);
        for (const std::string& t : m.store.Names()) {
          if (t.find(".experts.") != std::string::npos || t.find(".shared_expert.") != std::string::npos) {
            EXPECT_EQ(m.store.Find(t)->dtype, DType::kQ8_0) << t;
          }
          if (t.ends_with(".mlp.gate.weight") || t.ends_with(".shared_expert_gate.weight")) {
            EXPECT_NE(m.store.Find(t)->dtype, DType::kQ8_0) << t << ": routers stay as stored";
          }
        }
      }
      PackMatrices(m.store, pool);
      const std::unique_ptr<TargetModel> model = NewTargetModel(m.config, m.store, SpecOptions(), pool);
      TargetModel& target = *model;
      const std::vector<int32_t> prompt = {3, 141, 59, 26, 53, 58, 97};
      GenerateOptions plain;
      plain.policy = SpecPolicy::kAlways;
      plain.max_new_tokens = 200;  // B = 16 cycles through all 16 acceptance lengths in ~136 tokens
      plain.ignore_stop = true;
      plain.block_size = 1;
      const GenerateResult ref = Generate(target, nullptr, prompt, plain);
      ASSERT_EQ(ref.tokens.size(), 200u);
      for (int B : {2, 5, 8, 16}) {
        target.Truncate(0);
        testing::CyclingDrafter drafter(ref.tokens, static_cast<int>(prompt.size()), m.config.decoder.vocab_size);
        GenerateOptions spec = plain;
        spec.block_size = B;
        const GenerateResult r = Generate(target, &drafter, prompt, spec);
        EXPECT_EQ(r.tokens, ref.tokens) << "block size " << B;
        for (int k = 1; k <= B; ++k) EXPECT_GT(r.stats.accept_hist[k], 0) << "B=" << B << " length " << k;
      }
    }
  }
}

// z-lab's DFlash draft over a MoE target, through the engine (cycle lengths are compared on
// the dense fixtures by golden_test.cc): the same tokens as z-lab's own spec_generate, and as
// transformers' plain greedy decoding where they overlap.
TEST(MoeSpec, RealDraftMatchesZlabAndPlainGreedy) {
  const Json& spec = Manifest()["drafts"]["dflash-moe-tiny"];
  const std::string target = spec["target"].get<std::string>();
  EngineOptions eo;
  eo.target_dir = (kFixtures / target).string();
  eo.draft_dir = (kFixtures / "dflash-moe-tiny").string();
  eo.context = 128;
  eo.kv_type = DType::kF32;
  eo.prefill_chunk = 5;
  Engine engine(eo);
  GenerateOptions go;
  go.max_new_tokens = Manifest()["spec_new"].get<int>();
  go.ignore_stop = true;
  go.block_size = spec["block_size"].get<int>();
  go.policy = SpecPolicy::kAlways;
  const Golden draft_golden = ReadGolden(spec["golden"]);
  const Golden target_golden = ReadGolden(Manifest()["targets"][target]["golden"]);
  const GenerateResult r = engine.Generate(target_golden.I32("prompt1.ids"), go);
  EXPECT_EQ(r.tokens, draft_golden.I32("spec.output"));
  const std::vector<int32_t> plain = target_golden.I32("greedy");
  ASSERT_LE(plain.size(), r.tokens.size());
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), r.tokens.begin()));
  EXPECT_GT(r.stats.cycles, 0);
}

// A decode step reads the router and top_k experts per sparse layer, never all experts; the
// profile counts the experts a pass read.
TEST(MoeModel, DecodeBytesAndProfileCountTheChosenExperts) {
  ThreadPool pool(2);
  LoadedModel<TargetConfig> m = LoadTarget((kFixtures / "qwen3moe-tiny").string());
  const TargetConfig& cfg = m.config;
  Qwen3Model target(cfg, m.store, SpecOptions(), pool);
  const auto bytes = [&](const std::string& name) { return static_cast<int64_t>(m.store.Find(name)->nbytes); };
  int64_t weights = bytes("lm_head.weight") + bytes("model.embed_tokens.weight") / cfg.decoder.vocab_size;
  int sparse_layers = 0;
  for (int l = 0; l < cfg.decoder.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    for (const char* w : {"q_proj", "k_proj", "v_proj", "o_proj"}) weights += bytes(p + ".self_attn." + w + ".weight");
    if (!cfg.moe.sparse[l]) {
      for (const char* w : {"gate_proj", "up_proj", "down_proj"}) weights += bytes(p + ".mlp." + w + ".weight");
      continue;
    }
    ++sparse_layers;
    weights += bytes(p + ".mlp.gate.weight");
    for (const char* w : {"gate_proj", "up_proj", "down_proj"}) {
      weights += cfg.moe.top_k * bytes(p + ".mlp.experts.0." + w + ".weight");
    }
  }
  const int64_t per_position = target.DecodeBytes(1) - target.DecodeBytes(0);
  EXPECT_GT(per_position, 0);
  EXPECT_EQ(target.DecodeBytes(0), weights + per_position);

  PassProfile profile;
  target.set_profile(&profile);
  const int32_t token = 17;
  target.Forward({&token, 1}, false);
  EXPECT_EQ(profile.experts_read, cfg.moe.top_k * sparse_layers);
  EXPECT_GT(profile[PassStage::kExperts], 0.0);
  // 16 rows choose at least top_k and at most all experts per sparse layer.
  profile = PassProfile{};
  std::vector<int32_t> rows(16);
  for (int i = 0; i < 16; ++i) rows[i] = (i * 37 + 11) % 255;
  target.Forward(rows, true);
  EXPECT_GE(profile.experts_read, cfg.moe.top_k * sparse_layers);
  EXPECT_LE(profile.experts_read, cfg.moe.num_experts * sparse_layers);
  target.set_profile(nullptr);
}

// The Qwen3.5 MoE block (routed experts plus the gated shared expert) on many rows gives each
// row bitwise what it gives that row alone.
TEST(MoeModel, HybridBlockIsBatchInvariant) {
  ThreadPool pool(2);
  LoadedModel<TargetConfig> m = LoadTarget((kFixtures / "qwen35moe-tiny").string());
  const TargetConfig& cfg = m.config;
  ASSERT_GT(cfg.moe.shared_intermediate_size, 0);
  const int64_t H = cfg.decoder.hidden_size;
  const MoeWeights w = LoadMoe(m.store, "model.layers.1.mlp", cfg.moe, H);
  MoeBlock block(cfg.moe, H, 16);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(16 * H), y(16 * H), alone(H);
  for (float& v : x) v = normal(rng);
  for (int n : {1, 5, 16}) {
    block.Forward(w, x.data(), n, y.data(), pool);
    for (int r = 0; r < n; ++r) {
      block.Forward(w, x.data() + r * H, 1, alone.data(), pool);
      EXPECT_EQ(0, std::memcmp(alone.data(), y.data() + r * H, H * sizeof(float))) << "row " << r << " of " << n;
    }
  }
}

// A hybrid MoE target reports its experts to the cost model: a decode step reads top_k per
// layer (and the shared expert, in its decode bytes), a verify more; the decoding loop's
// statistics count both.
TEST(MoeModel, HybridReportsExpertsReadPerPass) {
  ThreadPool pool(2);
  LoadedModel<TargetConfig> m = LoadTarget((kFixtures / "qwen35moe-tiny").string());
  const TargetConfig& cfg = m.config;
  const std::unique_ptr<TargetModel> model = NewTargetModel(cfg, m.store, SpecOptions(), pool);
  const ExpertShape shape = model->expert_shape();
  EXPECT_EQ(shape.experts, cfg.moe.num_experts);
  EXPECT_EQ(shape.top_k, cfg.moe.top_k);
  EXPECT_EQ(shape.sparse_layers, cfg.decoder.num_layers);
  const auto bytes = [&](const std::string& name) { return static_cast<int64_t>(m.store.Find(name)->nbytes); };
  int64_t expert = 0, shared = 0;
  for (const char* w : {"gate_proj", "up_proj", "down_proj"}) {
    expert += bytes("model.layers.0.mlp.experts.0." + std::string(w) + ".weight");
    shared += bytes("model.layers.0.mlp.shared_expert." + std::string(w) + ".weight");
  }
  EXPECT_EQ(shape.decode_bytes, cfg.decoder.num_layers * cfg.moe.top_k * expert);
  const MoeWeights w = LoadMoe(m.store, "model.layers.0.mlp", cfg.moe, cfg.decoder.hidden_size);
  EXPECT_EQ(MoeDecodeBytes(w, cfg.moe.top_k), bytes("model.layers.0.mlp.gate.weight") + cfg.moe.top_k * expert + shared +
                                                  bytes("model.layers.0.mlp.shared_expert_gate.weight"));

  const std::vector<int32_t> prompt = {3, 141, 59, 26, 53, 58, 97};
  GenerateOptions plain;
  plain.max_new_tokens = 40;
  plain.ignore_stop = true;
  plain.block_size = 1;
  const GenerateResult ref = Generate(*model, nullptr, prompt, plain);
  EXPECT_EQ(ref.stats.steps, 39);  // the first token comes from the prefill
  EXPECT_EQ(ref.stats.step_experts, int64_t{39} * cfg.moe.top_k * shape.sparse_layers);
  model->Truncate(0);
  testing::CyclingDrafter drafter(ref.tokens, static_cast<int>(prompt.size()), cfg.decoder.vocab_size);
  GenerateOptions spec = plain;
  spec.block_size = 8;
  spec.policy = SpecPolicy::kAlways;
  const GenerateResult r = Generate(*model, &drafter, prompt, spec);
  EXPECT_EQ(r.tokens, ref.tokens);
  ASSERT_GT(r.stats.cycles, 0);
  EXPECT_GT(r.stats.verify_experts, int64_t{r.stats.cycles} * cfg.moe.top_k * shape.sparse_layers);
  EXPECT_LE(r.stats.verify_experts, int64_t{r.stats.cycles} * cfg.moe.num_experts * shape.sparse_layers);
}

// ---------------------------------------------------------------------------------------------
// The expert term of the cost model and the adaptive policy.

TEST(MoeCost, DistinctExpertsFollowUniformRoutingAndInvert) {
  EXPECT_DOUBLE_EQ(plan::DistinctExperts(128, 8, 1), 8.0);
  EXPECT_NEAR(plan::DistinctExperts(128, 8, 16), 128 * (1 - std::pow(120.0 / 128, 16)), 1e-9);
  EXPECT_NEAR(plan::DistinctExperts(128, 8, 16), 82.4, 0.1);
  for (double e : {8.0, 20.0, 64.0, 128.0}) {
    EXPECT_NEAR(plan::EffectiveExperts(128, 8, 16, plan::DistinctExperts(e, 8, 16)), e, 1e-6);
  }
  EXPECT_EQ(plan::EffectiveExperts(128, 8, 16, 200), 128);  // more than uniform routing gives: clamped
  // A step reads top_k experts; t_verify(1) = t_step whatever the share.
  plan::StepCosts c{10, 2, 0.05, 0, 0, {128, 8, 0.7, 0}};
  EXPECT_DOUBLE_EQ(plan::VerifyMs(c, 1), 10);
  EXPECT_NEAR(plan::VerifyMs(c, 16), 10 * (0.3 * (1 + 0.05 * 15) + 0.7 * 82.4 / 8), 0.1);
  c.moe = {};
  EXPECT_DOUBLE_EQ(plan::VerifyMs(c, 16), 10 * (1 + 0.05 * 15));  // dense: the linear model
}

// Verifies timed on a machine whose expert reads cost what the model says: the policy, told the
// experts' share of a step and the distinct experts each verify read, predicts the cost of every
// other verify length within 3%; without the expert term (a straight line through the same
// samples) it is off by more than 25% somewhere, and so would choose its rows on wrong costs.
TEST(MoeCost, PolicyLearnsTheExpertCurveFromMeasuredCounts) {
  const plan::ExpertCosts moe{128, 8, 0.75, 0};
  const double step = 10, slope = 0.02, effective = 40;  // routing concentrated on ~40 of 128
  const plan::StepCosts truth{step, 1, slope, 0, 0, {128, 8, 0.75, effective}};
  const auto verify = [&](int rows) { return plan::VerifyMs(truth, rows); };
  for (bool with_experts : {true, false}) {
    SpeculationController c(SpecPolicy::kAdaptive, 16, with_experts ? moe : plan::ExpertCosts{});
    c.OnPlainStep(step);
    for (int i = 0; i < 30; ++i) {
      const int rows = 12 + i % 5;
      c.OnCycle(1, verify(rows), rows, rows / 2, plan::DistinctExperts(effective, 8, rows));
    }
    double worst = 0;
    for (int rows = 2; rows <= 16; ++rows) {
      worst = std::max(worst, std::abs(plan::VerifyMs(c.costs(), rows) / verify(rows) - 1));
    }
    std::printf("expert term %s: worst verify-cost error %.1f%%\n", with_experts ? "on" : "off", 100 * worst);
    if (with_experts) {
      EXPECT_LT(worst, 0.03);
      EXPECT_NEAR(c.costs().moe.effective, effective, 0.5);
    } else {
      EXPECT_GT(worst, 0.25);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Bad input.

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

Json FixtureConfig(const std::string& name) { return ReadJsonFile((kFixtures / name / "config.json").string()); }

TEST(MoeBadInput, ConfigErrorsNameTheField) {
  Json c = FixtureConfig("qwen3moe-tiny");
  c["num_experts_per_tok"] = 9;  // of 8
  EXPECT_NE(ErrorOf([&] { TargetConfigFromJson(c, "moe/config.json"); }).find("num_experts_per_tok"), std::string::npos);
  c = FixtureConfig("qwen3moe-tiny");
  c["mlp_only_layers"] = Json::array({7});
  EXPECT_NE(ErrorOf([&] { TargetConfigFromJson(c, "moe/config.json"); }).find("mlp_only_layers entry 7"), std::string::npos);
  c = FixtureConfig("qwen3moe-tiny");
  c.erase("moe_intermediate_size");
  EXPECT_NE(ErrorOf([&] { TargetConfigFromJson(c, "moe/config.json"); }).find("moe_intermediate_size"), std::string::npos);
}

TEST(MoeBadInput, HybridMoeErrorsNameTheFieldOrTensor) {
  const std::string dir = (kFixtures / "qwen35moe-tiny").string();
  Json c = FixtureConfig("qwen35moe-tiny");
  c["num_experts_per_tok"] = 9;  // of 8
  EXPECT_NE(ErrorOf([&] { TargetConfigFromJson(c, "moe/config.json"); }).find("num_experts_per_tok"), std::string::npos);
  c = FixtureConfig("qwen35moe-tiny");
  c.erase("shared_expert_intermediate_size");
  EXPECT_NE(ErrorOf([&] { TargetConfigFromJson(c, "moe/config.json"); }).find("shared_expert_intermediate_size"),
            std::string::npos);
  ThreadPool pool(1);
  const auto build = [&](const TargetConfig& cfg, const TensorStore& store) {
    return ErrorOf([&] { NewTargetModel(cfg, store, SpecOptions(), pool); });
  };
  {  // a missing shared-expert gate
    LoadedModel<TargetConfig> m = LoadTarget(dir);
    m.store.Remove("model.layers.2.mlp.shared_expert_gate.weight");
    EXPECT_NE(build(m.config, m.store).find("model.layers.2.mlp.shared_expert_gate.weight"), std::string::npos);
  }
  {  // a missing router
    LoadedModel<TargetConfig> m = LoadTarget(dir);
    m.store.Remove("model.layers.0.mlp.gate.weight");
    EXPECT_NE(build(m.config, m.store).find("model.layers.0.mlp.gate.weight"), std::string::npos);
  }
  {  // a shared expert of another width than the config's
    LoadedModel<TargetConfig> m = LoadTarget(dir);
    m.config.moe.shared_intermediate_size = 16;
    EXPECT_NE(build(m.config, m.store).find("model.layers.0.mlp.shared_expert.gate_proj.weight"), std::string::npos);
  }
}

TEST(MoeBadInput, TensorErrorsNameTheTensor) {
  ThreadPool pool(1);
  const std::string tiny = (kFixtures / "qwen3moe-tiny").string(), fused = (kFixtures / "qwen3moe-fused-bf16").string();
  const auto build = [&](const TargetConfig& cfg, const TensorStore& store) {
    return ErrorOf([&] { Qwen3Model(cfg, store, SpecOptions(), pool); });
  };
  {  // a missing router
    LoadedModel<TargetConfig> m = LoadTarget(tiny);
    m.store.Remove("model.layers.0.mlp.gate.weight");
    EXPECT_NE(build(m.config, m.store).find("model.layers.0.mlp.gate.weight"), std::string::npos);
  }
  {  // fewer experts in the file than the config says
    LoadedModel<TargetConfig> m = LoadTarget(tiny);
    m.store.Remove("model.layers.2.mlp.experts.7.up_proj.weight");
    EXPECT_NE(build(m.config, m.store).find("model.layers.2.mlp.experts.7.up_proj.weight"), std::string::npos);
  }
  {  // more experts in the file than the config says
    LoadedModel<TargetConfig> m = LoadTarget(tiny);
    Tensor extra = *m.store.Find("model.layers.0.mlp.experts.0.gate_proj.weight");
    extra.name = "model.layers.0.mlp.experts.8.gate_proj.weight";
    m.store.Add(extra);
    const std::string e = build(m.config, m.store);
    EXPECT_NE(e.find("model.layers.0.mlp.experts.8.gate_proj.weight"), std::string::npos) << e;
    EXPECT_NE(e.find("beyond num_experts 8"), std::string::npos) << e;
  }
  {  // a misshapen expert: another width
    LoadedModel<TargetConfig> m = LoadTarget(tiny);
    m.config.moe.intermediate_size = 16;
    EXPECT_NE(build(m.config, m.store).find("model.layers.0.mlp.experts.0.gate_proj.weight"), std::string::npos);
  }
  {  // fused tensors with another expert count than the config's
    Json c = FixtureConfig("qwen3moe-fused-bf16");
    c["num_local_experts"] = 8;
    const TargetConfig cfg = TargetConfigFromJson(c, fused + "/config.json");
    TensorStore store = LoadSafetensorsDir(fused);
    const std::string e = ErrorOf([&] { SplitFusedExperts(store, cfg); });
    EXPECT_NE(e.find("model.layers.1.mlp.experts.gate_up_proj"), std::string::npos) << e;
  }
  {  // a fused layer missing half of its experts' matrices
    const TargetConfig cfg = LoadTargetConfig(fused);
    TensorStore store = LoadSafetensorsDir(fused);
    store.Remove("model.layers.3.mlp.experts.down_proj");
    const std::string e = ErrorOf([&] { SplitFusedExperts(store, cfg); });
    EXPECT_NE(e.find("model.layers.3.mlp.experts.down_proj"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace dflash
