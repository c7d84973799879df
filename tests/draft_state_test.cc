// The draft's state, checked directly. DFlash output is lossless whatever the draft proposes,
// so token equality cannot see a draft bug (wrong feature rows appended after a verify, a block
// drafted at the wrong position, a stale context kept on prefix reuse): only acceptance drops.
// These tests compare what the incremental loop drafted and accepted with a reference that
// rebuilds the draft's context from scratch for every cycle, and a reused sequence's draft
// context with a cold one's, byte for byte. They run on the shipped pair, whose draft accepts
// at many lengths (tau 4-7), so rollback after partial acceptance is exercised.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <set>
#include <string>

#include "ops/ops.h"
#include "spec/engine.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;
const fs::path kPair = fs::path(DFLASH_SOURCE_DIR) / "models" / "dflash-pair";
// A prompt on which the shipped draft accepts at many lengths (also sampling_test's).
const std::vector<int32_t> kPrompt = {924, 54, 2130, 608, 412, 1100, 587, 1337, 2947, 86, 593, 36};

Engine MakeEngine() {
  EngineOptions o;
  o.target_dir = (kPair / "target").string();
  o.draft_dir = (kPair / "draft").string();
  o.context = 512;
  o.threads = 2;
  return Engine(o);
}

GenerateOptions Always(const Engine& e, int n, const SamplingParams& sampling) {
  GenerateOptions g;
  g.max_new_tokens = n;
  g.ignore_stop = true;
  g.block_size = e.draft_config()->block_size;
  g.policy = SpecPolicy::kAlways;
  g.sampling = sampling;
  return g;
}

// A sampling mode the loop runs in, named for the test's name.
struct Mode {
  const char* name;
  SamplingParams sampling;
};
void PrintTo(const Mode& m, std::ostream* os) { *os << m.name; }

Mode Sampled(const char* name, SpecSampling spec) {
  Mode m{name, {}};
  m.sampling.temperature = 0.2;
  m.sampling.top_k = 20;
  m.sampling.seed = 7;
  m.sampling.spec = spec;
  return m;
}

// One DFlash cycle as the loop ran it, or as the reference recomputes it.
struct Cycle {
  int32_t anchor = -1;
  int pos = -1;
  std::vector<std::vector<float>> logits;  // [proposals][vocab]
  int committed = 0;                       // accepted drafts + 1
};

// Passes the loop's calls through to the engine's draft and keeps a copy of each cycle's
// request and logits; as the loop's sink it also learns how many tokens each cycle committed.
class RecordingDrafter final : public Drafter {
 public:
  RecordingDrafter(Drafter& inner, int vocab) : inner_(inner), vocab_(vocab) {}
  int max_block() const override { return inner_.max_block(); }
  int max_append() const override { return inner_.max_append(); }
  void AppendContext(const float* features, int n, int pos) override { inner_.AppendContext(features, n, pos); }
  void Propose(int32_t anchor, int pos, int block, int proposals) override {
    inner_.Propose(anchor, pos, block, proposals);
    Cycle& c = cycles.emplace_back();
    c.anchor = anchor;
    c.pos = pos;
    for (int j = 0; j < proposals; ++j) c.logits.emplace_back(inner_.Logits(j), inner_.Logits(j) + vocab_);
  }
  const float* Logits(int j) const override { return inner_.Logits(j); }
  // A commit right after a Propose is that cycle's; others are the prefill's or plain steps'.
  bool OnCommit(std::span<const int32_t> tokens) {
    if (!cycles.empty() && cycles.back().committed == 0) cycles.back().committed = static_cast<int>(tokens.size());
    return true;
  }

  std::vector<Cycle> cycles;

 private:
  Drafter& inner_;
  int vocab_;
};

// The target's captured features of `tokens` ([n][F*H]), from one plain pass over them.
std::vector<float> TargetFeatures(TargetModel& target, std::span<const int32_t> tokens) {
  const size_t width = target.capture_layers().size() * static_cast<size_t>(target.config().hidden_size);
  std::vector<float> features(tokens.size() * width);
  target.Truncate(0);
  for (size_t at = 0; at < tokens.size(); at += target.max_rows()) {
    const size_t n = std::min<size_t>(target.max_rows(), tokens.size() - at);
    target.Forward(tokens.subspan(at, n), /*all_logits=*/false);
    std::memcpy(features.data() + at * width, target.Features(0), n * width * sizeof(float));
  }
  return features;
}

// Replays the loop's DFlash cycles (policy always) over the committed sequence `all` (prompt of
// `prompt_len` tokens, then the output), each with a draft context built afresh from the
// target's features of the tokens before the anchor: no incremental state. A cycle accepts its
// drafts while they equal the output: by definition under greedy and reproducible sampling, and
// under rejection sampling because a rejected draft x has p(x) < q(x), so the residual
// max(0, p - q) the next token is drawn from gives x no mass.
std::vector<Cycle> ReferenceCycles(TargetModel& target, DFlashDraft& draft, std::span<const int32_t> all,
                                   int prompt_len, const GenerateOptions& g) {
  const int vocab = target.config().vocab_size;
  const size_t width = target.capture_layers().size() * static_cast<size_t>(target.config().hidden_size);
  const std::vector<float> features = TargetFeatures(target, all);
  Sampler sampler(g.sampling, vocab);
  std::vector<float> probs(vocab);
  // The token the loop drafts at `position` from a row of draft logits (spec/sampler.h).
  const Stream stream = g.sampling.spec == SpecSampling::kRejection ? Stream::kDraft : Stream::kTarget;
  const auto propose = [&](const float* logits, int64_t position) {
    if (g.sampling.greedy()) return Sampler::Argmax(logits, vocab);
    sampler.Probabilities(logits, probs.data());
    return sampler.DrawAt(probs.data(), position, stream);
  };
  std::vector<Cycle> cycles;
  int done = 1;  // output tokens committed: the prefill commits the first
  while (done < g.max_new_tokens) {
    const int rows = std::min(g.block_size, g.max_new_tokens - done);
    if (rows < 2) {  // the loop steps plainly when one token is left
      ++done;
      continue;
    }
    Cycle& c = cycles.emplace_back();
    c.pos = prompt_len + done - 1;
    c.anchor = all[c.pos];
    draft.TruncateContext(0);
    for (int at = 0; at < c.pos; at += draft.max_append()) {
      const int n = std::min(draft.max_append(), c.pos - at);
      draft.AppendContext(features.data() + at * width, n, at);
    }
    draft.Propose(c.anchor, c.pos, rows, rows - 1);
    int accepted = 0;
    for (int j = 0; j < rows - 1; ++j) {
      c.logits.emplace_back(draft.Logits(j), draft.Logits(j) + vocab);
      if (accepted == j && propose(draft.Logits(j), c.pos + 1 + j) == all[c.pos + 1 + j]) ++accepted;
    }
    c.committed = accepted + 1;
    done += c.committed;
  }
  return cycles;
}

std::vector<int> Histogram(const std::vector<Cycle>& cycles, int block) {
  std::vector<int> hist(block + 1, 0);
  for (const Cycle& c : cycles) hist[c.committed]++;
  return hist;
}

class DraftState : public ::testing::TestWithParam<Mode> {};

// The loop's draft state is incremental (context rows appended after each verify, the block
// drafted after the last committed token); the reference's is rebuilt per cycle. Equal logits in
// every cycle, bit for bit (the kernels are batch-invariant), mean the incremental state held
// exactly the committed tokens' features at their positions; equal per-cycle acceptance and
// accept_hist mean the loop drew and judged the drafts at the right positions.
TEST_P(DraftState, IncrementalDraftEqualsFromScratchEveryCycle) {
  Engine engine = MakeEngine();
  const int vocab = engine.target_config().decoder.vocab_size;
  const GenerateOptions g = Always(engine, 120, GetParam().sampling);
  TargetModel& target = engine.target();
  RecordingDrafter recorder(*engine.drafter(), vocab);
  GenerateHooks hooks;
  hooks.sink = [&](std::span<const int32_t> t) { return recorder.OnCommit(t); };
  const GenerateResult r = Generate(target, &recorder, kPrompt, g, hooks);
  ASSERT_EQ(r.tokens.size(), static_cast<size_t>(g.max_new_tokens));

  std::vector<int32_t> all = kPrompt;
  all.insert(all.end(), r.tokens.begin(), r.tokens.end());
  auto* draft = dynamic_cast<DFlashDraft*>(engine.drafter());
  ASSERT_NE(draft, nullptr);
  const std::vector<Cycle> ref = ReferenceCycles(target, *draft, all, static_cast<int>(kPrompt.size()), g);

  // The run must exercise rollback: cycles that accept none, some and more of their drafts.
  std::set<int> lengths;
  for (const Cycle& c : ref) lengths.insert(c.committed);
  const std::vector<int> hist = Histogram(ref, g.block_size);
  ASSERT_GE(lengths.size(), 4u) << "the draft no longer accepts at many lengths: " << ::testing::PrintToString(hist);

  EXPECT_EQ(r.stats.accept_hist, hist);
  ASSERT_EQ(recorder.cycles.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    const Cycle& got = recorder.cycles[i];
    const Cycle& want = ref[i];
    ASSERT_EQ(got.pos, want.pos) << "cycle " << i;
    ASSERT_EQ(got.anchor, want.anchor) << "cycle " << i;
    ASSERT_EQ(got.committed, want.committed) << "cycle " << i << " at position " << want.pos;
    ASSERT_EQ(got.logits.size(), want.logits.size()) << "cycle " << i;
    for (size_t j = 0; j < want.logits.size(); ++j) {
      ASSERT_EQ(0, std::memcmp(got.logits[j].data(), want.logits[j].data(), vocab * sizeof(float)))
          << "cycle " << i << " at position " << want.pos << ": draft row " << j << " differs from scratch";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sampling, DraftState,
                         ::testing::Values(Mode{"Greedy", {}}, Sampled("Reproducible", SpecSampling::kReproducible),
                                           Sampled("Rejection", SpecSampling::kRejection)),
                         [](const auto& info) { return std::string(info.param.name); });

// Bytes of a draft context's live rows: each layer's K and V rows [0, length) in every KV head
// (DraftContext's tiled layout), and positions.
void ExpectSameDraftContext(const DraftContext& got, const DraftContext& want, const DraftConfig& cfg) {
  ASSERT_EQ(got.length, want.length);
  ASSERT_EQ(got.type, want.type);
  ASSERT_EQ(got.k.size(), want.k.size());
  const int layers = cfg.decoder.num_layers, heads = cfg.decoder.num_kv_heads, hd = cfg.decoder.head_dim;
  const size_t elem = RowBytes(got.type, 1), head_bytes = got.k.size() / (static_cast<size_t>(layers) * heads);
  for (const bool keys : {true, false}) {
    const uint8_t* g = keys ? got.k.data() : got.v.data();
    const uint8_t* w = keys ? want.k.data() : want.v.data();
    for (int lh = 0; lh < layers * heads; ++lh) {
      for (int p = 0; p < got.length; ++p) {
        for (int i = 0; i < hd; ++i) {
          const int64_t e = keys ? ops::TiledKeyOffset(p, i, hd, got.type) : ops::TiledValueOffset(p, i, hd, got.type);
          const size_t at = lh * head_bytes + e * elem;
          ASSERT_EQ(0, std::memcmp(g + at, w + at, elem))
              << (keys ? "K" : "V") << " of layer " << lh / heads << ", head " << lh % heads << ", row " << p;
        }
      }
    }
  }
  EXPECT_TRUE(std::equal(got.pos.begin(), got.pos.begin() + got.length, want.pos.begin()));
}

// Prefix reuse keeps the shared prefix's draft context and must drop every row after it: a
// sequence that generated after prompt A and then takes prompt B (A's first tokens, then others)
// must hold the same draft context, and accept the same drafts, as a cold sequence given B.
TEST(DraftStateReuse, ForkedPromptMatchesColdSequence) {
  Engine engine = MakeEngine();
  const GenerateOptions g = Always(engine, 60, SamplingParams{});
  std::vector<int32_t> a = kPrompt;
  for (int i = 0; i < 20; ++i) a.push_back(4 + (i * 37) % 4000);
  std::vector<int32_t> b(kPrompt.begin(), kPrompt.begin() + 8);
  b.insert(b.end(), {412, 1100, 2947, 86, 593, 36});

  Sequence warm = engine.NewSequence();
  engine.Continue(warm, a, g);
  const GenerateResult reused = engine.Continue(warm, b, g);
  ASSERT_EQ(reused.stats.cached_tokens, 8);
  Sequence cold = engine.NewSequence();
  const GenerateResult fresh = engine.Continue(cold, b, g);

  EXPECT_EQ(reused.tokens, fresh.tokens);
  EXPECT_EQ(reused.stats.accept_hist, fresh.stats.accept_hist);
  ExpectSameDraftContext(warm.draft, cold.draft, *engine.draft_config());
}

}  // namespace
}  // namespace dflash
