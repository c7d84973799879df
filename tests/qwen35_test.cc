// Qwen3.5 hybrid targets (Gated DeltaNet + gated attention) against transformers, and the
// exactness of their state under DFlash: tools/make_hybrid_fixtures.py made every fixture and
// golden (tests/goldens/hybrid_manifest.json).
//
// Tolerances. As in golden_test.cc both sides compute in f32 and differ only in summation
// order, with one more source here: transformers runs a prompt's delta rule in its chunked
// form (64-row chunks, a triangular solve) while we run the recurrent form row by row; both
// are exact algebra, so what differs is rounding. Measured over the three fixtures (x86-64,
// AVX-512): logits and hidden states within 3.2e-5 (the 4-layer Qwen3 fixtures: 5e-6), conv
// states within 5.4e-6, recurrent states within 2.7e-7; we allow golden_test's 2e-4, ~6x the
// largest measured difference and ~50x below what a real bug does (a w-versus-(1 + w) norm, a wrong gate, rotary width or head mapping moves logits by
// 1e-2 or more, see NormWeightBugIsCaught).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/verify_cost.h"
#include "core/thread_pool.h"
#include "draft/dflash_draft.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/load.h"
#include "model/qwen35.h"
#include "serve/slot_pool.h"
#include "spec/drafter.h"
#include "spec/engine.h"
#include "spec/sampler.h"
#include "testing/goldens.h"

namespace dflash {
namespace {

constexpr float kTolerance = 2e-4f;

const Json& Manifest() {
  static const Json m = ReadJsonFile((testing::kGoldensDir / "hybrid_manifest.json").string());
  return m;
}

std::string Fixture(const std::string& name) { return (testing::kFixturesDir / name).string(); }

using testing::Golden;
using testing::MaxAbsDiff;
using testing::ParamName;

Golden ReadGolden(const std::string& name) { return Golden(testing::kGoldensDir / (name + ".safetensors")); }

Engine MakeEngine(const std::string& target, int prefill_chunk, const std::string& draft = "",
                  int checkpoints = TargetOptions().checkpoints, int checkpoint_interval = TargetOptions().checkpoint_interval) {
  EngineOptions eo;
  eo.ctx_checkpoints = checkpoints;
  eo.checkpoint_interval = checkpoint_interval;
  eo.target_dir = Fixture(target);
  eo.draft_dir = draft.empty() ? "" : Fixture(draft);
  eo.context = 128;
  eo.kv_type = DType::kF32;  // the goldens are f32 transformers runs
  eo.prefill_chunk = prefill_chunk;
  return Engine(eo);
}

Qwen35Model& Hybrid(TargetModel& t) {
  auto* h = dynamic_cast<Qwen35Model*>(&t);
  if (!h) throw Error("not a hybrid target");
  return *h;
}

// Every linear layer's conv and recurrent state, as bytes.
std::vector<float> StateOf(const Qwen35Model& m) {
  std::vector<float> all;
  const DecoderConfig& d = m.config();
  const int linear = static_cast<int>(std::count(d.layer_linear.begin(), d.layer_linear.end(), true));
  for (int j = 0; j < linear; ++j) {
    const auto c = m.ConvState(j), r = m.RecurrentState(j);
    all.insert(all.end(), c.begin(), c.end());
    all.insert(all.end(), r.begin(), r.end());
  }
  return all;
}

bool SameBytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class HybridGolden : public ::testing::TestWithParam<std::string> {};

// Logits and every layer's output for each prompt in one prefill (the last layer's captured
// output is final-normed, as hidden_states[L]).
TEST_P(HybridGolden, LogitsAndHiddenStatesMatchTransformers) {
  const std::string name = GetParam();
  const Golden g = ReadGolden(name);
  const LoadedModel<TargetConfig> loaded = LoadTarget(Fixture(name));
  const DecoderConfig& d = loaded.config.decoder;
  TargetOptions opt;
  opt.kv_capacity = 128;
  for (int l = 0; l < d.num_layers; ++l) opt.capture_layers.push_back(l);
  ThreadPool pool(2);
  Qwen35Model model(loaded.config, loaded.store, opt, pool);
  const Json& prompts = Manifest()["prompts"];
  for (size_t p = 0; p < prompts.size(); ++p) {
    const std::string key = "prompt" + std::to_string(p);
    const testing::PromptDiff worst = testing::PrefillDiff(model, g, key);
    EXPECT_LT(worst.logits, kTolerance) << name << " " << key;
    EXPECT_LT(worst.hidden, kTolerance) << name << " " << key;
  }
}

// The conv state (transformers keeps the last `kernel` inputs per channel, [channel][kernel];
// the oldest is never read again, we keep kernel - 1, [tap][channel]) and the recurrent state
// ([value head][key dim][value dim]) after the last prompt, prefilled in chunks of 3.
TEST_P(HybridGolden, StateAfterPromptMatchesTransformers) {
  const std::string name = GetParam();
  const Golden g = ReadGolden(name);
  Engine engine = MakeEngine(name, 3);
  const TargetConfig& cfg = engine.target_config();
  const int K = cfg.linear.conv_kernel;
  const std::vector<int32_t> ids = g.I32("prompt2.ids");
  Qwen35Model& m = Hybrid(engine.target());
  m.Truncate(0);
  for (size_t p = 0; p < ids.size(); p += 3) {
    m.Forward(std::span(ids).subspan(p, std::min<size_t>(3, ids.size() - p)), false);
  }
  const std::vector<float> conv = g.F32("state.conv"), rec = g.F32("state.recurrent");
  const size_t rf = m.RecurrentState(0).size(), C = m.ConvState(0).size() / (K - 1);
  const size_t linear = rec.size() / rf;
  ASSERT_EQ(conv.size(), linear * C * K);
  for (size_t j = 0; j < linear; ++j) {
    const auto ours = m.ConvState(static_cast<int>(j));
    float worst = 0;
    for (int t = 0; t < K - 1; ++t) {
      for (size_t c = 0; c < C; ++c) {
        worst = std::max(worst, std::fabs(ours[t * C + c] - conv[(j * C + c) * K + t + 1]));
      }
    }
    EXPECT_LT(worst, kTolerance) << name << " conv state, linear layer " << j;
    EXPECT_LT(MaxAbsDiff(m.RecurrentState(static_cast<int>(j)).data(), &rec[j * rf], rf), kTolerance)
        << name << " recurrent state, linear layer " << j;
  }
}

TEST_P(HybridGolden, GreedyContinuationMatchesTransformersGenerate) {
  const std::string name = GetParam();
  const Golden g = ReadGolden(name);
  Engine engine = MakeEngine(name, 3);
  GenerateOptions go;
  go.max_new_tokens = Manifest()["greedy_new"].get<int>();
  go.ignore_stop = true;
  go.block_size = 1;
  EXPECT_EQ(engine.Generate(g.I32("prompt1.ids"), go).tokens, g.I32("greedy")) << name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HybridGolden, ::testing::ValuesIn(testing::Keys(Manifest()["targets"])), ParamName);

// The reference: plain decoding one token per Forward, and the state after every position.
struct PlainRun {
  std::vector<int32_t> tokens;              // prompt, then the greedy output
  std::vector<std::vector<float>> states;   // [length] the linear state after `length` positions
};

PlainRun DecodePlainly(Qwen35Model& m, const std::vector<int32_t>& prompt, int new_tokens) {
  PlainRun run;
  run.tokens = prompt;
  run.states.push_back(StateOf(m));  // length 0 (after Truncate(0))
  for (size_t p = 0; p < prompt.size() + new_tokens - 1; ++p) {
    m.Forward({&run.tokens[p], 1}, false);
    run.states.push_back(StateOf(m));
    if (p + 1 >= prompt.size()) run.tokens.push_back(Sampler::Argmax(m.Logits(0), m.config().vocab_size));
  }
  return run;
}

// Proposes the reference's tokens for the first `right` drafts of every block, then a token the
// reference does not have; after each append (a prefill chunk or a cycle's accepted rows)
// checks the target's state against plain decoding's at that length, byte for byte.
class RightThenWrongDrafter final : public Drafter {
 public:
  RightThenWrongDrafter(const PlainRun& ref, Qwen35Model& target, int right)
      : ref_(ref), target_(target), right_(right), vocab_(target.config().vocab_size), logits_(16 * vocab_) {}
  int max_block() const override { return 16; }
  int max_append() const override { return 1 << 20; }
  void AppendContext(const float*, int n, int pos) override {
    const int length = target_.kv_length();
    EXPECT_EQ(length, pos + n);
    if (length < static_cast<int>(ref_.states.size()) && !SameBytes(StateOf(target_), ref_.states[length])) {
      ++mismatches;
    }
    ++checks;
  }
  void Propose(int32_t, int pos, int, int proposals) override {
    std::fill(logits_.begin(), logits_.end(), 0.0f);
    for (int j = 0; j < proposals; ++j) {
      const size_t at = static_cast<size_t>(pos) + 1 + j;
      int32_t token = at < ref_.tokens.size() ? ref_.tokens[at] : 0;
      if (j >= right_) token = (token + 1) % vocab_;
      logits_[static_cast<size_t>(j) * vocab_ + token] = 1.0f;
    }
  }
  const float* Logits(int j) const override { return logits_.data() + static_cast<size_t>(j) * vocab_; }

  int checks = 0, mismatches = 0;

 private:
  const PlainRun& ref_;
  Qwen35Model& target_;
  int right_, vocab_;
  std::vector<float> logits_;
};

// Exact rollback: for block sizes 2..16 and every acceptance length, DFlash greedy equals plain
// greedy and the conv + recurrent state after every cycle (and every prefill chunk) is the one
// plain decoding reaches at the same position, bit for bit.
TEST(HybridRollback, EveryBlockSizeAndAcceptanceLengthLeavesPlainDecodingsState) {
  Engine engine = MakeEngine("qwen35-tiny", 5);
  Qwen35Model& m = Hybrid(engine.target());
  const std::vector<int32_t> prompt = ReadGolden("qwen35-tiny").I32("prompt1.ids");
  constexpr int kNew = 30;
  m.Truncate(0);
  const PlainRun ref = DecodePlainly(m, prompt, kNew);
  const std::vector<int32_t> expected(ref.tokens.begin() + prompt.size(), ref.tokens.end());
  for (int B = 2; B <= 16; ++B) {
    for (int right = 0; right < B; ++right) {
      m.Truncate(0);
      RightThenWrongDrafter drafter(ref, m, right);
      GenerateOptions go;
      go.max_new_tokens = kNew;
      go.ignore_stop = true;
      go.block_size = B;
      go.policy = SpecPolicy::kAlways;
      const GenerateResult r = Generate(m, &drafter, prompt, go);
      EXPECT_EQ(r.tokens, expected) << "B " << B << " right " << right;
      EXPECT_EQ(drafter.mismatches, 0) << "B " << B << " right " << right << " of " << drafter.checks << " checks";
      EXPECT_GT(r.stats.cycles, 0);
      if (right + 1 < B) {
        EXPECT_GT(r.stats.accept_hist[right + 1], 0) << "B " << B << " right " << right;
      }
    }
  }
}

// A second request sharing only the first prompt with the sequence's history resumes from the
// checkpoint at the end of that prompt: cached tokens > 0, and the output and state equal a
// cold run's.
TEST(HybridPrefixReuse, ResumesFromThePromptCheckpointWithColdRunOutput) {
  Engine engine = MakeEngine("qwen35-tiny", 4);
  const std::vector<int32_t> first = ReadGolden("qwen35-tiny").I32("prompt2.ids");
  GenerateOptions go;
  go.max_new_tokens = 12;
  go.ignore_stop = true;
  go.block_size = 1;
  Sequence seq = engine.NewSequence();
  engine.Continue(seq, first, go);
  // Diverges right after the first prompt: only the checkpoint restores.
  std::vector<int32_t> second = first;
  second.insert(second.end(), {7, 8, 9, 10});
  EXPECT_EQ(engine.ReusablePrefix(seq, second), static_cast<int>(first.size()));
  const GenerateResult warm = engine.Continue(seq, second, go);
  EXPECT_EQ(warm.stats.cached_tokens, static_cast<int>(first.size()));
  Sequence cold_seq = engine.NewSequence();
  const GenerateResult cold = engine.Continue(cold_seq, second, go);
  EXPECT_EQ(cold.stats.cached_tokens, 0);
  EXPECT_EQ(warm.tokens, cold.tokens);
  engine.target().Bind(seq.target.get());
  const std::vector<float> warm_state = StateOf(Hybrid(engine.target()));
  engine.target().Bind(cold_seq.target.get());
  EXPECT_TRUE(SameBytes(warm_state, StateOf(Hybrid(engine.target()))));
  // Diverging inside the first prompt, before any checkpoint: nothing is reusable.
  std::vector<int32_t> third(first.begin(), first.begin() + 10);
  third.push_back(3);
  EXPECT_EQ(engine.ReusablePrefix(seq, third), 0);
}

// The server's slot pool on a hybrid: a follow-up turn that extends the whole history reuses
// all of it, one that departs inside the last reply reuses the prompt checkpoint, and both give
// a cold run's output.
TEST(HybridPrefixReuse, SlotPoolPicksTheRestorablePrefix) {
  Engine engine = MakeEngine("qwen35-tiny", 4);
  serve::SlotPool pool(engine, 2);
  const auto far = serve::SlotPool::Clock::now() + std::chrono::seconds(5);
  GenerateOptions go;
  go.max_new_tokens = 8;
  go.ignore_stop = true;
  go.block_size = 1;
  const auto serve = [&](const std::vector<int32_t>& prompt) {
    auto lease = pool.Acquire(prompt, far, std::chrono::milliseconds(10), {});
    return engine.Continue(lease->slot().seq, prompt, go);
  };
  const auto cold = [&](const std::vector<int32_t>& prompt) {
    Sequence seq = engine.NewSequence();
    return engine.Continue(seq, prompt, go).tokens;
  };
  const std::vector<int32_t> first = ReadGolden("qwen35-tiny").I32("prompt1.ids");
  const GenerateResult r1 = serve(first);
  std::vector<int32_t> extend = first;
  extend.insert(extend.end(), r1.tokens.begin(), r1.tokens.end());
  extend.insert(extend.end(), {40, 41});
  const GenerateResult r2 = serve(extend);
  EXPECT_EQ(r2.stats.cached_tokens, static_cast<int>(first.size() + r1.tokens.size() - 1));
  EXPECT_EQ(r2.tokens, cold(extend));
  std::vector<int32_t> fork = extend;  // departs inside the last reply
  const size_t half = r2.tokens.size() / 2;
  fork.insert(fork.end(), r2.tokens.begin(), r2.tokens.begin() + half);
  fork.push_back((r2.tokens[half] + 1) % 256);
  const GenerateResult r3 = serve(fork);
  EXPECT_EQ(r3.stats.cached_tokens, static_cast<int>(extend.size()));  // the checkpoint after `extend`
  EXPECT_EQ(r3.tokens, cold(fork));
}

// The state of `seq` as a cold run of its tokens leaves it, and its output: what a warm
// request must reproduce bit for bit.
void ExpectColdRunEquals(Engine& engine, Sequence& warm_seq, const GenerateResult& warm,
                         std::span<const int32_t> prompt, const GenerateOptions& go, const std::string& what) {
  Sequence cold_seq = engine.NewSequence();
  const GenerateResult cold = engine.Continue(cold_seq, prompt, go);
  EXPECT_EQ(cold.stats.cached_tokens, 0) << what;
  EXPECT_EQ(warm.tokens, cold.tokens) << what;
  engine.target().Bind(warm_seq.target.get());
  const std::vector<float> warm_state = StateOf(Hybrid(engine.target()));
  engine.target().Bind(cold_seq.target.get());
  EXPECT_TRUE(SameBytes(warm_state, StateOf(Hybrid(engine.target())))) << what;
}

// Checkpoints every N positions, a ring of K per sequence: a request that departs from the
// cached sequence inside the last reply (as Qwen3.5's template makes the next turn do when it
// drops the reply's reasoning) resumes from the longest checkpoint inside the common prefix,
// with a cold run's output and state bytes; what fell out of the ring is not reused.
TEST(HybridPrefixReuse, ResumesFromTheLastIntervalCheckpointInsideTheReply) {
  constexpr int kRing = 3, kInterval = 4;
  Engine engine = MakeEngine("qwen35-tiny", 4, "", kRing, kInterval);
  const std::vector<int32_t> first = ReadGolden("qwen35-tiny").I32("prompt2.ids");
  const int P = static_cast<int>(first.size());
  GenerateOptions go;
  go.max_new_tokens = 20;
  go.ignore_stop = true;
  go.block_size = 1;
  // Plain decoding runs one position per Forward: after the prompt's checkpoint (at P) one is
  // taken at P + 4, P + 8, P + 12 and P + 16 (the sequence ends at P + 19), and the ring keeps
  // the three longest.
  const int kept[] = {P + 8, P + 12, P + 16};
  for (int depart : {1, 5, 8, 11, 12, 13, 17}) {
    Sequence seq = engine.NewSequence();
    const GenerateResult reply = engine.Continue(seq, first, go);
    ASSERT_EQ(reply.tokens.size(), 20u);
    std::vector<int32_t> next = first;
    next.insert(next.end(), reply.tokens.begin(), reply.tokens.begin() + depart);
    next.push_back((reply.tokens[depart] + 1) % 256);  // departs at position P + depart
    int expected = 0;
    for (int c : kept) {
      if (c <= P + depart) expected = c;
    }
    const std::string what = "departing at P + " + std::to_string(depart);
    EXPECT_EQ(engine.ReusablePrefix(seq, next), expected) << what;
    const GenerateResult warm = engine.Continue(seq, next, go);
    EXPECT_EQ(warm.stats.cached_tokens, expected) << what;
    ExpectColdRunEquals(engine, seq, warm, next, go, what);
  }
}

// The same under DFlash: a verify's rejected rows are cut before the next Forward, so the
// checkpoints taken between cycles hold committed positions only.
TEST(HybridPrefixReuse, IntervalCheckpointsUnderDflashHoldCommittedPositions) {
  Engine engine = MakeEngine("qwen35-tiny", 4, "dflash-qwen35", 12, 3);
  const std::vector<int32_t> first = ReadGolden("qwen35-tiny").I32("prompt1.ids");
  const int P = static_cast<int>(first.size());
  GenerateOptions go;
  go.max_new_tokens = 24;
  go.ignore_stop = true;
  go.block_size = 4;
  go.policy = SpecPolicy::kAlways;
  for (int depart : {7, 15, 22}) {
    Sequence seq = engine.NewSequence();
    const GenerateResult reply = engine.Continue(seq, first, go);
    ASSERT_GT(reply.stats.cycles, 0);
    std::vector<int32_t> next = first;
    next.insert(next.end(), reply.tokens.begin(), reply.tokens.begin() + depart);
    next.push_back((reply.tokens[depart] + 1) % 256);
    const std::string what = "departing at P + " + std::to_string(depart);
    const int reuse = engine.ReusablePrefix(seq, next);
    // Checkpoints lie at most interval + block - 1 positions apart (a cycle commits up to a block).
    EXPECT_LE(reuse, P + depart) << what;
    EXPECT_GT(reuse, P + depart - (3 + 4)) << what;
    const GenerateResult warm = engine.Continue(seq, next, go);
    EXPECT_EQ(warm.stats.cached_tokens, reuse) << what;
    ExpectColdRunEquals(engine, seq, warm, next, go, what);
  }
}

// A sequence's bytes, as the server budgets them (Engine::cache_bytes, SlotPool), are what its
// state holds: the KV of the full-attention layers, two copies of every linear layer's conv
// and recurrent state (before and after the last Forward), the row log, and one more copy per
// checkpoint of the ring.
TEST(HybridMemory, SequenceBytesCountEveryCopyAndCheckpoint) {
  size_t bytes[2] = {};
  TargetConfig c;
  for (int ring : {0, 5}) {
    Engine engine = MakeEngine("qwen35-tiny", 4, "dflash-qwen35", ring, 4);
    Sequence seq = engine.NewSequence();
    EXPECT_EQ(engine.cache_bytes(), seq.target->bytes() + seq.draft.bytes()) << ring;
    serve::SlotPool pool(engine, 1, 2);
    EXPECT_EQ(pool.sequence_bytes(), engine.cache_bytes()) << ring;
    bytes[ring > 0] = engine.cache_bytes();
    c = engine.target_config();
  }
  const LinearAttentionConfig& l = c.linear;
  const size_t conv_dim = 2 * l.num_key_heads * l.key_head_dim + l.num_value_heads * l.value_head_dim;
  const size_t one_copy = (l.conv_kernel - 1) * conv_dim + static_cast<size_t>(l.num_value_heads) * l.key_head_dim * l.value_head_dim;
  const size_t linear = std::count(c.decoder.layer_linear.begin(), c.decoder.layer_linear.end(), true);
  EXPECT_EQ(bytes[1] - bytes[0], 5 * linear * one_copy * sizeof(float));
}

// The tiny DFlash draft made by z-lab's package for a hybrid target: its block logits.
TEST(HybridDraft, BlockLogitsMatchZlab) {
  Engine engine = MakeEngine("qwen35-tiny", 64, "dflash-qwen35");
  testing::ExpectDraftBlockLogitsMatch(engine, ReadGolden("dflash-qwen35"), kTolerance);
}

// With the real draft: DFlash greedy equals plain greedy (transformers' generate).
TEST(HybridDraft, DflashGreedyEqualsPlainGreedy) {
  Engine engine = MakeEngine("qwen35-tiny", 5, "dflash-qwen35");
  testing::ExpectDflashGreedyEqualsGolden(engine, ReadGolden("qwen35-tiny"));
}

// bench --verify-cost --profile on a hybrid: the Gated DeltaNet layers' state work (gates,
// conv, delta rule, gated norm) is its own stage, apart from their projections and from the
// full-attention layers' attention over the KV; the stages still add up to the pass.
TEST(HybridVerifyCost, ProfileSeparatesTheLinearAttentionStateCost) {
  Engine engine = MakeEngine("qwen35-tiny", 16);
  const std::vector<VerifyCostPoint> pts = MeasureVerifyCost(engine.target(), {64}, {1, 8}, 3, {}, /*profile=*/true);
  ASSERT_EQ(pts.size(), 2u);
  for (const VerifyCostPoint& p : pts) {
    double total = 0;
    for (double ms : p.stages.ms) total += ms;
    for (PassStage s : {PassStage::kQkv, PassStage::kAttention, PassStage::kLinearAttention, PassStage::kOProj,
                        PassStage::kGateUp, PassStage::kDown, PassStage::kLmHead}) {
      EXPECT_GT(p.stages[s], 0.0) << PassStageName(s) << " rows " << p.rows;
    }
    EXPECT_LE(total, p.ms_max) << "rows " << p.rows;
    EXPECT_GE(total, 0.8 * p.ms_min) << "rows " << p.rows;
  }
}

// A norm read as w instead of (1 + w) moves the logits far beyond the tolerance: the goldens
// would catch it (the fixtures' (1 + w) weights are randomised away from their init of 0).
TEST(HybridGoldenSensitivity, NormWeightBugIsCaught) {
  const Golden g = ReadGolden("qwen35-tiny");
  LoadedModel<TargetConfig> loaded = LoadTarget(Fixture("qwen35-tiny"));
  // Make the final norm's stored w into (1 + w) - 1 + 0.3: a 0.3 shift, like a missing +1 would
  // be a 1.0 shift.
  TensorStore& store = loaded.store;
  const Tensor* norm = store.Find("model.norm.weight");
  ASSERT_NE(norm, nullptr);
  std::vector<float> w(reinterpret_cast<const float*>(norm->data), reinterpret_cast<const float*>(norm->data) + norm->numel());
  for (float& x : w) x += 0.3f;
  ByteBuffer bytes(w.size() * sizeof(float));
  std::memcpy(bytes.data(), w.data(), bytes.size());
  store.ReplaceData("model.norm.weight", DType::kF32, std::move(bytes));
  TargetOptions opt;
  opt.kv_capacity = 64;
  ThreadPool pool(1);
  Qwen35Model model(loaded.config, store, opt, pool);
  const std::vector<int32_t> ids = g.I32("prompt1.ids");
  model.Forward(ids, true);
  const std::vector<float> logits = g.F32("prompt1.logits");
  const size_t V = loaded.config.decoder.vocab_size;
  EXPECT_GT(MaxAbsDiff(model.Logits(0), logits.data(), V), 100 * kTolerance);
}

// Bad input: clear errors naming the file, field or tensor.
TEST(HybridBadInput, ErrorsNameTheFieldOrTensor) {
  Json cfg = ReadJsonFile(Fixture("qwen35-tiny") + "/config.json");
  Json bad = cfg;
  bad["layer_types"].erase(0);
  try {
    TargetConfigFromJson(bad, "x/config.json");
    FAIL() << "layer_types length";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer_types has 3 entries for 4 layers"), std::string::npos) << e.what();
  }
  bad = cfg;
  bad["linear_num_value_heads"] = 3;
  try {
    TargetConfigFromJson(bad, "x/config.json");
    FAIL() << "value heads";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear_num_value_heads 3"), std::string::npos) << e.what();
  }
  for (const char* missing : {"model.layers.1.linear_attn.conv1d.weight", "model.layers.2.linear_attn.A_log"}) {
    LoadedModel<TargetConfig> loaded = LoadTarget(Fixture("qwen35-tiny"));
    loaded.store.Remove(missing);
    ThreadPool pool(1);
    try {
      Qwen35Model model(loaded.config, loaded.store, TargetOptions{}, pool);
      FAIL() << missing;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace dflash
