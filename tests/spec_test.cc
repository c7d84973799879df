// The speculative loop is lossless: greedy DFlash equals plain greedy bit for bit at every
// acceptance length and block size, and sampled DFlash has the target's distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "core/thread_pool.h"
#include "draft/dflash_draft.h"
#include "io/quantize_store.h"
#include "model/qwen3.h"
#include "spec/generate.h"
#include "spec/penalties.h"
#include "testing/chi_square.h"
#include "testing/cycling_drafter.h"
#include "testing/kernel_scopes.h"
#include "testing/random_model.h"

namespace dflash {
namespace {

// Greedy options for n new tokens whose every cycle speculates (acceptance is what these tests
// check); block 1 is plain decoding, the reference.
GenerateOptions AlwaysSpeculate(int max_new_tokens) {
  GenerateOptions g;
  g.policy = SpecPolicy::kAlways;
  g.max_new_tokens = max_new_tokens;
  g.block_size = 1;
  return g;
}

using testing::ChiSquare;
using testing::ChiSquareCritical;
using testing::Marginal;
using testing::MakeRandomDraft;
using testing::MakeRandomTarget;
using testing::CyclingDrafter;

// Proposes from a fixed random distribution per row: any q must leave the output
// distribution (and, for a given seed, the output itself) unchanged.
class NoisyDrafter : public Drafter {
 public:
  NoisyDrafter(int vocab, uint32_t seed) : vocab_(vocab), logits_(16 * vocab) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.0f, 1.5f);
    for (float& v : logits_) v = n(rng);
  }
  int max_block() const override { return 16; }
  int max_append() const override { return 1 << 20; }
  void AppendContext(const float*, int, int) override {}
  void Propose(int32_t, int, int, int) override {}
  const float* Logits(int j) const override { return logits_.data() + static_cast<size_t>(j) * vocab_; }

 private:
  int vocab_;
  std::vector<float> logits_;
};

// Proposes the target's own raw logits (before penalties) for a reference continuation: with
// the penalties applied to the draft's rows exactly as to the target's (same history: the
// committed tokens and the drafts before the row), every draft of the reference is accepted.
class OracleDrafter : public Drafter {
 public:
  // rows[i]: the target's logits predicting reference token i.
  OracleDrafter(std::vector<std::vector<float>> rows, int prompt_len, int vocab)
      : rows_(std::move(rows)), prompt_len_(prompt_len), vocab_(vocab), logits_(16 * vocab) {}
  int max_block() const override { return 16; }
  int max_append() const override { return 1 << 20; }
  void AppendContext(const float*, int, int) override {}
  void Propose(int32_t, int pos, int, int proposals) override {
    for (int j = 0; j < proposals; ++j) {
      const size_t i = static_cast<size_t>(pos + 1 + j - prompt_len_);
      float* row = logits_.data() + static_cast<size_t>(j) * vocab_;
      if (i < rows_.size()) {
        std::copy(rows_[i].begin(), rows_[i].end(), row);
      } else {
        std::fill(row, row + vocab_, 0.0f);
      }
    }
  }
  const float* Logits(int j) const override { return logits_.data() + static_cast<size_t>(j) * vocab_; }

 private:
  std::vector<std::vector<float>> rows_;
  int prompt_len_, vocab_;
  std::vector<float> logits_;
};

// The target's raw logits predicting each token of `continuation` after `prompt`.
std::vector<std::vector<float>> TargetRows(TargetModel& target, const std::vector<int32_t>& prompt,
                                           const std::vector<int32_t>& continuation) {
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), continuation.begin(), continuation.end() - 1);
  const int V = target.config().vocab_size;
  std::vector<std::vector<float>> rows;
  target.Truncate(0);
  for (size_t at = 0; at < all.size(); at += target.max_rows()) {
    const size_t n = std::min<size_t>(target.max_rows(), all.size() - at);
    target.Forward({all.data() + at, n}, /*all_logits=*/true);
    for (size_t r = 0; r < n; ++r) {
      if (at + r + 1 >= prompt.size()) rows.emplace_back(target.Logits(static_cast<int>(r)), target.Logits(static_cast<int>(r)) + V);
    }
  }
  target.Truncate(0);
  return rows;
}

SamplingParams WithPenalties(SamplingParams s = {}) {
  s.repetition_penalty = 1.3;
  s.presence_penalty = 0.4;
  s.frequency_penalty = 0.3;
  return s;
}

TargetOptions Options(int capture_layers, int max_rows = 64, DType kv_type = DType::kF16) {
  TargetOptions o;
  o.kv_capacity = 512;
  o.max_rows = max_rows;
  o.kv_type = kv_type;
  for (int i = 0; i < capture_layers; ++i) o.capture_layers.push_back(i);
  return o;
}

// Every KV cache type: each stored key and value is rounded once, so a verify block reads the
// same cache a decode step does.
TEST(Spec, GreedyScriptedDraftIsBitIdenticalAtEveryAcceptanceLength) {
  ThreadPool pool(2);
  auto rt = MakeRandomTarget(/*vocab=*/97, /*hidden=*/32, /*layers=*/2, /*seed=*/1);
  for (DType kv : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(kv));
    Qwen3Model target(rt->config, rt->weights.store, Options(0, 64, kv), pool);
    const std::vector<int32_t> prompt = {3, 14, 15, 92, 65, 35};
    const GenerateOptions plain = AlwaysSpeculate(160);
    const GenerateResult ref = Generate(target, nullptr, prompt, plain);
    ASSERT_EQ(ref.tokens.size(), 160u);
    for (int B = 1; B <= 16; ++B) {
      target.Truncate(0);
      CyclingDrafter drafter(ref.tokens, static_cast<int>(prompt.size()), 97);
      GenerateOptions spec = plain;
      spec.block_size = B;
      const GenerateResult r = Generate(target, &drafter, prompt, spec);
      EXPECT_EQ(r.tokens, ref.tokens) << "block size " << B;
      if (B == 1) continue;
      for (int k = 1; k <= B; ++k) EXPECT_GT(r.stats.accept_hist[k], 0) << "B=" << B << " length " << k;
      EXPECT_GT(r.stats.accepted, 0);
    }
  }
}

// Penalties see, for each verify row and each draft row, the committed tokens and the drafts
// before that row: greedy DFlash with penalties equals plain greedy with them at every acceptance
// length, and a draft proposing the target's own logits is always accepted (greedy and
// reproducible sampling), which holds only when the draft's rows are penalised like the target's.
TEST(Spec, PenaltiesKeepDFlashLosslessAndApplyToTheDraftAlike) {
  ThreadPool pool(2);
  auto rt = MakeRandomTarget(97, 32, 2, 1);
  Qwen3Model target(rt->config, rt->weights.store, Options(0), pool);
  const std::vector<int32_t> prompt = {3, 14, 15, 92, 65, 35};
  const int P = static_cast<int>(prompt.size());
  GenerateOptions plain = AlwaysSpeculate(160);
  const GenerateResult unpenalised = Generate(target, nullptr, prompt, plain);
  plain.sampling = WithPenalties();
  target.Truncate(0);
  const GenerateResult ref = Generate(target, nullptr, prompt, plain);
  ASSERT_EQ(ref.tokens.size(), 160u);
  ASSERT_NE(ref.tokens, unpenalised.tokens) << "the penalties must change the output for this test to mean anything";
  for (int B : {2, 5, 16}) {
    SCOPED_TRACE("block " + std::to_string(B));
    GenerateOptions spec = plain;
    spec.block_size = B;
    target.Truncate(0);
    CyclingDrafter scripted(ref.tokens, P, 97);
    const GenerateResult r = Generate(target, &scripted, prompt, spec);
    EXPECT_EQ(r.tokens, ref.tokens);
    for (int k = 1; k <= B; ++k) EXPECT_GT(r.stats.accept_hist[k], 0) << "length " << k;
  }

  const std::vector<std::vector<float>> rows = TargetRows(target, prompt, ref.tokens);
  // Where the penalties change the target's pick, an unpenalised draft row proposes another token.
  int changed = 0;
  for (size_t i = 0; i < rows.size(); ++i) changed += Sampler::Argmax(rows[i].data(), 97) != ref.tokens[i];
  ASSERT_GT(changed, 20) << "the penalties rarely change the pick: the oracle check below would be weak";
  for (int B : {4, 16}) {
    SCOPED_TRACE("oracle, block " + std::to_string(B));
    GenerateOptions spec = plain;
    spec.block_size = B;
    target.Truncate(0);
    OracleDrafter oracle(rows, P, 97);
    const GenerateResult r = Generate(target, &oracle, prompt, spec);
    EXPECT_EQ(r.tokens, ref.tokens);
    EXPECT_EQ(r.stats.accepted, r.stats.drafted) << "a draft row penalised unlike the target's row";
  }

  // Reproducible sampling: the same tokens as plain sampling, and the oracle is never refused.
  GenerateOptions sampled = plain;
  sampled.sampling = WithPenalties(SamplingParams{0.8, 0, 0.95, 7});
  sampled.sampling.spec = SpecSampling::kReproducible;
  target.Truncate(0);
  const GenerateResult sampled_ref = Generate(target, nullptr, prompt, sampled);
  GenerateOptions no_penalty = sampled;
  no_penalty.sampling = SamplingParams{0.8, 0, 0.95, 7};
  target.Truncate(0);
  EXPECT_NE(Generate(target, nullptr, prompt, no_penalty).tokens, sampled_ref.tokens);
  sampled.block_size = 16;
  OracleDrafter sampled_oracle(TargetRows(target, prompt, sampled_ref.tokens), P, 97);
  const GenerateResult r = Generate(target, &sampled_oracle, prompt, sampled);
  EXPECT_EQ(r.tokens, sampled_ref.tokens);
  EXPECT_EQ(r.stats.accepted, r.stats.drafted);
  target.Truncate(0);
  CyclingDrafter scripted(sampled_ref.tokens, P, 97);
  EXPECT_EQ(Generate(target, &scripted, prompt, sampled).tokens, sampled_ref.tokens);
}

// A target whose every Forward advances a scripted clock by 1 ms + 0.1 ms per extra row, so the
// adaptive policy sees a fixed cost curve instead of this machine's timing noise.
class CostedTarget : public TargetModel {
 public:
  CostedTarget(TargetModel& inner, double& clock) : inner_(inner), clock_(clock) {}
  void Forward(std::span<const int32_t> tokens, bool all_logits) override {
    clock_ += 1.0 + 0.1 * (static_cast<double>(tokens.size()) - 1);
    inner_.Forward(tokens, all_logits);
  }
  const float* Logits(int r) const override { return inner_.Logits(r); }
  const float* Features(int r) const override { return inner_.Features(r); }
  int kv_length() const override { return inner_.kv_length(); }
  int kv_capacity() const override { return inner_.kv_capacity(); }
  void Truncate(int length) override { inner_.Truncate(length); }
  void Checkpoint() override { inner_.Checkpoint(); }
  std::unique_ptr<TargetState> NewState() const override { return inner_.NewState(); }
  void Bind(TargetState* state) override { inner_.Bind(state); }
  size_t state_bytes() const override { return inner_.state_bytes(); }
  void FillSyntheticKv(int length) override { inner_.FillSyntheticKv(length); }
  int max_rows() const override { return inner_.max_rows(); }
  const DecoderConfig& config() const override { return inner_.config(); }
  std::span<const int> capture_layers() const override { return inner_.capture_layers(); }
  const WeightRef& embedding() const override { return inner_.embedding(); }
  const WeightRef& lm_head() const override { return inner_.lm_head(); }
  int64_t DecodeBytes(int ctx) const override { return inner_.DecodeBytes(ctx); }
  void set_profile(PassProfile* profile) override { inner_.set_profile(profile); }

 private:
  TargetModel& inner_;
  double& clock_;
};

// A drafter whose Propose costs 0.5 ms on the scripted clock.
class CostedDrafter : public Drafter {
 public:
  CostedDrafter(Drafter& inner, double& clock) : inner_(inner), clock_(clock) {}
  int max_block() const override { return inner_.max_block(); }
  int max_append() const override { return inner_.max_append(); }
  void AppendContext(const float* features, int n, int pos) override { inner_.AppendContext(features, n, pos); }
  void Propose(int32_t pending, int pos, int block, int proposals) override {
    clock_ += 0.5;
    inner_.Propose(pending, pos, block, proposals);
  }
  const float* Logits(int j) const override { return inner_.Logits(j); }

 private:
  Drafter& inner_;
  double& clock_;
};

// The adaptive policy changes speed only: a draft that always agrees keeps speculating over the
// whole block, one that never agrees is dropped for plain decoding, and both outputs equal plain
// greedy.
TEST(Spec, AdaptivePolicyKeepsWinningDraftAndDropsLosingOne) {
  ThreadPool pool(2);
  auto rt = MakeRandomTarget(97, 32, 2, 5);
  Qwen3Model model(rt->config, rt->weights.store, Options(0), pool);
  double clock = 0;
  CostedTarget target(model, clock);
  GenerateHooks hooks;
  hooks.clock_ms = [&clock] { return clock; };
  const std::vector<int32_t> prompt = {5, 6, 7, 8};
  GenerateOptions g;
  g.max_new_tokens = 400;
  g.block_size = 1;
  const GenerateResult ref = Generate(target, nullptr, prompt, g, hooks);
  g.block_size = 16;
  g.policy = SpecPolicy::kAdaptive;

  target.Truncate(0);
  CyclingDrafter good_inner(ref.tokens, static_cast<int>(prompt.size()), 97, /*perfect=*/true);
  CostedDrafter good(good_inner, clock);
  const GenerateResult r_good = Generate(target, &good, prompt, g, hooks);
  EXPECT_EQ(r_good.tokens, ref.tokens);
  EXPECT_EQ(r_good.stats.fallbacks, 0);
  EXPECT_LE(r_good.stats.plain_steps, 1 + r_good.stats.cycles / SpeculationController::kRefreshCycles);
  // After the short first probe and two doublings every cycle verifies the whole block (the last
  // one only what is left to generate).
  EXPECT_GE(r_good.stats.verified_rows, 16 * (r_good.stats.cycles - 3) + 4 + 8);

  target.Truncate(0);
  NoisyDrafter bad_inner(97, 9);  // fixed random proposals: almost never the target's token
  CostedDrafter bad(bad_inner, clock);
  const GenerateResult r_bad = Generate(target, &bad, prompt, g, hooks);
  EXPECT_EQ(r_bad.tokens, ref.tokens);
  EXPECT_GE(r_bad.stats.fallbacks, 1);
  EXPECT_GT(r_bad.stats.plain_steps, 20 * r_bad.stats.cycles);
  // Verify passes cost at most a few percent of the plain steps' time.
  EXPECT_LT(r_bad.stats.decode_ms, 1.05 * ref.stats.decode_ms);
}

TEST(Spec, StopTokenTruncatesInsideAcceptedBlock) {
  ThreadPool pool(1);
  auto rt = MakeRandomTarget(97, 32, 2, 1);
  Qwen3Model target(rt->config, rt->weights.store, Options(0), pool);
  const std::vector<int32_t> prompt = {3, 14, 15, 92, 65, 35};
  const GenerateOptions plain = AlwaysSpeculate(60);
  const GenerateResult ref = Generate(target, nullptr, prompt, plain);
  GenerateOptions stop = plain;
  stop.stop_tokens = {ref.tokens[20]};
  target.Truncate(0);
  const GenerateResult want = Generate(target, nullptr, prompt, stop);
  ASSERT_EQ(want.finish_reason, FinishReason::kStop);
  for (int B : {4, 16}) {
    target.Truncate(0);
    CyclingDrafter drafter(ref.tokens, static_cast<int>(prompt.size()), 97);
    stop.block_size = B;
    const GenerateResult r = Generate(target, &drafter, prompt, stop);
    EXPECT_EQ(r.tokens, want.tokens);
    EXPECT_EQ(r.finish_reason, FinishReason::kStop);
  }
  stop.ignore_stop = true;
  target.Truncate(0);
  EXPECT_EQ(Generate(target, nullptr, prompt, stop).tokens.size(), 60u);
}

TEST(Spec, RealDraftWithWindowsAndSlidingLayersStaysLossless) {
  ThreadPool pool(2);
  auto rt = MakeRandomTarget(97, 32, 4, 2);
  const std::vector<int32_t> prompt(150, 7);
  for (int window : {0, 8, 40}) {
    for (int chunk : {1, 16, 64}) {
      TargetOptions o = Options(0, chunk < 16 ? 16 : chunk);
      o.capture_layers = {0, 2, 3};
      Qwen3Model target(rt->config, rt->weights.store, o, pool);
      auto rd = MakeRandomDraft(rt->config, 3, {0, 2, 3}, {6, 0, 6}, 3);
      DraftOptions dopt;
      dopt.context_capacity = 512;
      dopt.max_append = o.max_rows;
      dopt.window = window;
      dopt.sink = 4;
      DFlashDraft draft(rd->config, rd->weights.store, target, dopt, pool);
      GenerateOptions g = AlwaysSpeculate(80);
      const GenerateResult ref = Generate(target, nullptr, prompt, g);
      target.Truncate(0);
      g.block_size = 16;
      const GenerateResult r = Generate(target, &draft, prompt, g);
      EXPECT_EQ(r.tokens, ref.tokens) << "window " << window << " chunk " << chunk;
    }
  }
}

// Wraps a windowed draft bound to a context the test can read. At every Propose it checks the
// context holds the sink and one run of the most recent rows (more than `window` of them, and at
// most 1.5 x `window` or `window` + the last append, DraftOptions' compaction), and that the draft's logits equal, bit for bit, those of an
// unbounded draft given the features of exactly those rows at their positions.
class WindowChecker : public Drafter {
 public:
  WindowChecker(DFlashDraft& windowed, const DraftContext& context, DFlashDraft& unbounded, int window, int sink,
                int feature_width, int vocab)
      : windowed_(windowed), context_(context), unbounded_(unbounded), window_(window), sink_(sink),
        width_(feature_width), vocab_(vocab) {}
  int max_block() const override { return windowed_.max_block(); }
  int max_append() const override { return windowed_.max_append(); }
  void AppendContext(const float* features, int n, int pos) override {
    windowed_.AppendContext(features, n, pos);
    last_append_ = n;
    features_.resize(static_cast<size_t>(pos + n) * width_);
    std::copy(features, features + static_cast<size_t>(n) * width_, features_.begin() + static_cast<size_t>(pos) * width_);
  }
  void Propose(int32_t anchor, int pos, int block, int proposals) override {
    windowed_.Propose(anchor, pos, block, proposals);
    const int n = context_.length;
    const std::vector<int32_t> kept(context_.pos.begin(), context_.pos.begin() + n);
    if (n < pos) {
      ++windowed_cycles;
      const int recent = n - sink_;
      EXPECT_GT(recent, window_) << "at " << pos;
      EXPECT_LE(recent, window_ + std::max(window_ / 2, last_append_)) << "at " << pos;
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(kept[i], i < sink_ ? i : pos - recent + (i - sink_)) << "context row " << i << " at " << pos;
      }
    } else {
      for (int i = 0; i < n; ++i) EXPECT_EQ(kept[i], i) << "context row " << i << " before any compaction";
    }
    // The reference: the same rows, appended in runs of consecutive positions.
    unbounded_.TruncateContext(0);
    for (int i = 0; i < n;) {
      int run = 1;
      while (i + run < n && kept[i + run] == kept[i] + run && run < unbounded_.max_append()) ++run;
      unbounded_.AppendContext(features_.data() + static_cast<size_t>(kept[i]) * width_, run, kept[i]);
      i += run;
    }
    unbounded_.Propose(anchor, pos, block, proposals);
    for (int j = 0; j < proposals; ++j) {
      EXPECT_EQ(0, std::memcmp(windowed_.Logits(j), unbounded_.Logits(j), vocab_ * sizeof(float)))
          << "row " << j << " at " << pos;
    }
  }
  const float* Logits(int j) const override { return windowed_.Logits(j); }

  int windowed_cycles = 0;  // cycles drafted with rows dropped from the context

 private:
  DFlashDraft& windowed_;
  const DraftContext& context_;
  DFlashDraft& unbounded_;
  int window_, sink_, width_, vocab_;
  int last_append_ = 0;
  std::vector<float> features_;  // [position][F*H] every committed token's target features
};

// Token equality cannot see a draft context bug (output is lossless whatever the draft does), so
// the draft's logits are compared with a reference at every cycle.
TEST(Spec, WindowedDraftSeesItsSinkAndItsRecentRowsOnly) {
  ThreadPool pool(2);
  auto rt = MakeRandomTarget(97, 32, 4, 2);
  auto rd = MakeRandomDraft(rt->config, 3, {0, 2, 3}, {6, 0, 6}, 3);
  std::vector<int32_t> prompt(150);
  for (int i = 0; i < 150; ++i) prompt[i] = (i * 37 + 5) % 96;
  const int width = 3 * rt->config.decoder.hidden_size;
  for (int window : {8, 40}) {
    for (int chunk : {1, 16, 64}) {
      SCOPED_TRACE("window " + std::to_string(window) + " chunk " + std::to_string(chunk));
      TargetOptions o = Options(0, std::max(chunk, 16));
      o.capture_layers = {0, 2, 3};
      Qwen3Model target(rt->config, rt->weights.store, o, pool);
      DraftOptions wopt;
      wopt.max_append = o.max_rows;
      wopt.window = window;
      wopt.sink = 4;
      wopt.own_context = false;
      DFlashDraft windowed(rd->config, rd->weights.store, target, wopt, pool);
      DraftContext context = windowed.NewContext();
      windowed.Bind(&context);
      DraftOptions uopt;
      uopt.context_capacity = 512;
      uopt.max_append = 64;
      DFlashDraft unbounded(rd->config, rd->weights.store, target, uopt, pool);
      WindowChecker checker(windowed, context, unbounded, window, 4, width, 97);
      GenerateOptions g = AlwaysSpeculate(80);
      const GenerateResult ref = Generate(target, nullptr, prompt, g);
      target.Truncate(0);
      g.block_size = 16;
      const GenerateResult r = Generate(target, &checker, prompt, g);
      EXPECT_EQ(r.tokens, ref.tokens);
      EXPECT_EQ(checker.windowed_cycles, r.stats.cycles) << "every cycle runs past the window";
      EXPECT_GT(r.stats.cycles, 0);
    }
  }
}

// A sliding draft layer (causal, window w) lets block row r at position q see the context rows
// at positions > q - w and block rows 0..r. Checked, on a one-layer draft (so no other row's
// window mixes in), against a full-attention layer given only those context rows and a block of
// r + 1 rows, whose last row is row r: the reference needs neither the window nor the causal mask.
TEST(Spec, SlidingDraftLayerSeesOnlyItsWindow) {
  ThreadPool pool(2);
  auto rt = MakeRandomTarget(97, 32, 4, 2);
  constexpr int kWindow = 20, kContext = 60, B = 16;
  auto sliding = MakeRandomDraft(rt->config, 1, {0, 2, 3}, {kWindow}, 4);
  auto full = MakeRandomDraft(rt->config, 1, {0, 2, 3}, {0}, 4);  // the same weights: same seed
  TargetOptions o = Options(0);
  o.capture_layers = {0, 2, 3};
  Qwen3Model target(rt->config, rt->weights.store, o, pool);
  std::vector<int32_t> prompt(kContext);
  for (int i = 0; i < kContext; ++i) prompt[i] = (i * 29 + 3) % 96;
  target.Forward(prompt, /*all_logits=*/false);
  const int width = 3 * rt->config.decoder.hidden_size;
  const std::vector<float> features(target.Features(0), target.Features(0) + static_cast<size_t>(kContext) * width);
  DraftOptions dopt;
  dopt.context_capacity = 128;
  dopt.max_append = 64;
  DFlashDraft draft(sliding->config, sliding->weights.store, target, dopt, pool);
  DFlashDraft reference(full->config, full->weights.store, target, dopt, pool);
  draft.AppendContext(features.data(), kContext, 0);
  draft.Propose(11, kContext, B, B - 1);
  reference.AppendContext(features.data(), kContext, 0);
  reference.Propose(11, kContext, B, B - 1);
  const size_t V = 97;
  double window_effect = 0;
  for (int j = 0; j < B - 1; ++j) {
    for (size_t t = 0; t < V; ++t) window_effect = std::max(window_effect, double(std::fabs(draft.Logits(j)[t] - reference.Logits(j)[t])));
  }
  ASSERT_GT(window_effect, 1e-3) << "the window must change what a sliding layer sees";
  for (int r = 1; r < B; ++r) {
    const int first = kContext + r - kWindow + 1;  // the first context position row r sees
    reference.TruncateContext(0);
    reference.AppendContext(features.data() + static_cast<size_t>(first) * width, kContext - first, first);
    reference.Propose(11, kContext, r + 1, r);
    for (size_t t = 0; t < V; ++t) {
      EXPECT_NEAR(draft.Logits(r - 1)[t], reference.Logits(r - 1)[t], 1e-5) << "block row " << r << " token " << t;
    }
  }
}

// A verify of fewer rows than the block asks the draft for fewer proposals: those rows' logits
// are bit for bit the ones a full proposal makes, and an out-of-range count is refused.
TEST(Spec, DraftProposalsForFewerRowsAreTheFullProposalsFirstRows) {
  ThreadPool pool(2);
  auto rt = MakeRandomTarget(97, 32, 4, 2);
  TargetOptions o = Options(0);
  o.capture_layers = {0, 2, 3};
  Qwen3Model target(rt->config, rt->weights.store, o, pool);
  auto rd = MakeRandomDraft(rt->config, 2, {0, 2, 3}, {6, 0}, 3);
  DraftOptions dopt;
  dopt.context_capacity = 512;
  dopt.max_append = o.max_rows;
  DFlashDraft draft(rd->config, rd->weights.store, target, dopt, pool);
  const std::vector<int32_t> prompt(20, 5);
  target.Forward(prompt, /*all_logits=*/false);
  draft.AppendContext(target.Features(0), 20, 0);
  constexpr int B = 16;
  const size_t V = rt->config.decoder.vocab_size;
  draft.Propose(9, 20, B, B - 1);
  const std::vector<float> full(draft.Logits(0), draft.Logits(0) + (B - 1) * V);
  for (int proposals : {1, 3, 8}) {
    draft.Propose(9, 20, B, proposals);
    for (int j = 0; j < proposals; ++j) {
      EXPECT_EQ(0, std::memcmp(draft.Logits(j), &full[j * V], V * sizeof(float))) << proposals << " row " << j;
    }
  }
  for (int bad : {0, B}) {
    try {
      draft.Propose(9, 20, B, bad);
      ADD_FAILURE() << "proposals " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("proposals outside [1, 15]"), std::string::npos) << e.what();
    }
  }
}

// Quantised weights (load-time Q8_0 / Q4_0, target and draft) keep DFlash lossless: the
// quantised MatMul is batch-invariant like the float one.
TEST(Spec, GreedyDFlashEqualsPlainOnQuantisedWeights) {
  ThreadPool pool(2);
  // And a bf16 cache, attended with bf16 dot products where the CPU has them.
  for (const auto& [q, kv] : {std::pair{DType::kQ8_0, DType::kF16}, std::pair{DType::kQ4_0, DType::kF16},
                              std::pair{DType::kQ8_0, DType::kBF16}}) {
    auto rt = MakeRandomTarget(97, 32, 4, 2);
    auto rd = MakeRandomDraft(rt->config, 2, {0, 2, 3}, {6, 0}, 3);
    // Target: 2 + 7 per layer matrices; draft: fc + 7 per layer.
    EXPECT_EQ(QuantizeMatrices(rt->weights.store, q, pool), 2 + 7 * 4);
    EXPECT_EQ(QuantizeMatrices(rd->weights.store, q, pool), 1 + 7 * 2);
    PackMatrices(rt->weights.store, pool);
    PackMatrices(rd->weights.store, pool);
    EXPECT_EQ(rt->weights.store.Find("lm_head.weight")->dtype, q);
    TargetOptions o = Options(0, 64, kv);
    o.capture_layers = {0, 2, 3};
    Qwen3Model target(rt->config, rt->weights.store, o, pool);
    DraftOptions dopt;
    dopt.context_capacity = 512;
    dopt.max_append = o.max_rows;
    DFlashDraft draft(rd->config, rd->weights.store, target, dopt, pool);
    const std::vector<int32_t> prompt(70, 5);
    GenerateOptions g;
    g.max_new_tokens = 80;
    g.block_size = 1;
    const GenerateResult ref = Generate(target, nullptr, prompt, g);
    for (int B : {4, 16}) {
      target.Truncate(0);
      draft.TruncateContext(0);
      g.block_size = B;
      const GenerateResult r = Generate(target, &draft, prompt, g);
      EXPECT_EQ(r.tokens, ref.tokens) << DTypeName(q) << " KV " << DTypeName(kv) << " block " << B;
      EXPECT_GT(r.stats.cycles, 0);
    }
  }
}

// Distribution of the first three generated tokens, exactly, by enumerating the target.
std::map<std::vector<int32_t>, double> ExactJoint(Qwen3Model& target, const std::vector<int32_t>& prompt,
                                                  const SamplingParams& sp, int vocab) {
  Sampler s(sp, vocab);
  Penalties penalties(sp, vocab);
  penalties.SetPrompt(prompt);
  std::vector<float> p0(vocab), p1(vocab), p2(vocab), penalised(vocab);
  const auto probabilities = [&](float* probs) {
    penalties.Apply(target.Logits(0), penalised.data());
    s.Probabilities(penalised.data(), probs);
  };
  std::map<std::vector<int32_t>, double> joint;
  target.Truncate(0);
  target.Forward(prompt, false);
  probabilities(p0.data());
  const int base = target.kv_length();
  for (int a = 0; a < vocab; ++a) {
    if (p0[a] == 0) continue;
    target.Truncate(base);
    target.Forward({&a, 1}, false);
    penalties.Add(a);
    probabilities(p1.data());
    for (int b = 0; b < vocab; ++b) {
      if (p1[b] == 0) continue;
      target.Truncate(base + 1);
      target.Forward({&b, 1}, false);
      penalties.Add(b);
      probabilities(p2.data());
      penalties.Remove(b);
      for (int c = 0; c < vocab; ++c) {
        if (p2[c] > 0) joint[{a, b, c}] = static_cast<double>(p0[a]) * p1[b] * p2[c];
      }
    }
    penalties.Remove(a);
  }
  return joint;
}

// Reproducible sampling is coupled to positions (spec/sampler.h): with the same seed, sampled
// DFlash emits exactly the plain sampled sequence, whatever the block size, the draft's quality and the
// policy's timing-driven choices; another seed gives another sequence.
TEST(Spec, SampledDFlashEqualsPlainSampledForTheSameSeed) {
  ThreadPool pool(2);
  auto rt = MakeRandomTarget(/*vocab=*/97, /*hidden=*/32, /*layers=*/2, /*seed=*/3, 0.5f);
  Qwen3Model target(rt->config, rt->weights.store, Options(0), pool);
  const std::vector<int32_t> prompt = {3, 14, 15, 92, 65, 35};
  GenerateOptions plain = AlwaysSpeculate(120);
  plain.sampling = SamplingParams{0.8, 0, 0.95, 7};
  plain.sampling.spec = SpecSampling::kReproducible;
  const GenerateResult ref = Generate(target, nullptr, prompt, plain);
  ASSERT_EQ(ref.tokens.size(), 120u);
  GenerateOptions other_seed = plain;
  other_seed.sampling.seed = 8;
  target.Truncate(0);
  EXPECT_NE(Generate(target, nullptr, prompt, other_seed).tokens, ref.tokens);
  for (SpecPolicy policy : {SpecPolicy::kAlways, SpecPolicy::kAdaptive}) {
    for (int B : {2, 5, 16}) {
      SCOPED_TRACE(std::string(SpecPolicyName(policy)) + " block " + std::to_string(B));
      GenerateOptions spec = plain;
      spec.policy = policy;
      spec.block_size = B;
      target.Truncate(0);
      CyclingDrafter scripted(ref.tokens, static_cast<int>(prompt.size()), 97);
      const GenerateResult r = Generate(target, &scripted, prompt, spec);
      EXPECT_EQ(r.tokens, ref.tokens);
      EXPECT_GT(r.stats.accepted, 0);
      if (policy == SpecPolicy::kAlways) {  // a draft proposing the plain sequence is never refused
        target.Truncate(0);
        CyclingDrafter perfect(ref.tokens, static_cast<int>(prompt.size()), 97, /*perfect=*/true);
        const GenerateResult all = Generate(target, &perfect, prompt, spec);
        EXPECT_EQ(all.tokens, ref.tokens);
        EXPECT_EQ(all.stats.accepted, all.stats.drafted);
      }
      target.Truncate(0);
      NoisyDrafter noisy(97, 5);
      EXPECT_EQ(Generate(target, &noisy, prompt, spec).tokens, ref.tokens) << "a draft that rarely agrees";
    }
  }
}

// Both ways of accepting sampled drafts (spec/sampler.h) give the target's distribution at every
// drafted position, jointly with the tokens before it, penalties included. The expectation is
// computed with the Sampler and Penalties this loop uses: tests/goldens/sampling checks those
// against transformers' logits processors.
TEST(Spec, SampledDFlashMatchesTargetDistributionAtDraftedPositions) {
  ThreadPool pool(1);
  const int V = 8;
  auto rt = MakeRandomTarget(V, 16, 2, 5, 0.5f);
  Qwen3Model target(rt->config, rt->weights.store, Options(0), pool);
  const std::vector<int32_t> prompt = {1, 2, 3};
  for (const auto& [temp, top_k, top_p, penalised] :
       std::vector<std::tuple<double, int, double, bool>>{{1.0, 0, 1.0, false}, {0.7, 5, 0.9, false}, {1.0, 0, 1.0, true}}) {
    SamplingParams sp{temp, top_k, top_p, 0};
    // Strong penalties on 8 tokens: a generated token's probability moves a lot.
    if (penalised) sp = WithPenalties(sp);
    const auto joint = ExactJoint(target, prompt, sp, V);
    const int trials = 20000;
    NoisyDrafter drafter(V, 11);
    for (SpecSampling mode : {SpecSampling::kRejection, SpecSampling::kReproducible}) {
      SCOPED_TRACE(std::string(SpecSamplingName(mode)) + " temp " + std::to_string(temp) + (penalised ? " penalties" : ""));
      std::map<std::vector<int32_t>, int> seen;
      for (int t = 0; t < trials; ++t) {
        target.Truncate(0);
        GenerateOptions g;
        g.policy = SpecPolicy::kAlways;
        // The first token from prefill, then a cycle of 3 rows: drafts for the 2nd and 3rd tokens.
        g.max_new_tokens = 4;
        g.block_size = 3;
        g.sampling = sp;
        g.sampling.spec = mode;
        g.sampling.seed = 1000 + t;
        const GenerateResult r = Generate(target, &drafter, prompt, g);
        ASSERT_EQ(r.tokens.size(), 4u);
        ASSERT_GE(r.stats.drafted, 2) << "the first cycle drafts two positions";
        seen[{r.tokens.begin(), r.tokens.begin() + 3}]++;
      }
      for (const std::vector<int>& keep : {std::vector<int>{1}, {2}, {1, 2}, {0, 1, 2}}) {
        const auto [stat, df] = ChiSquare(Marginal(seen, keep), Marginal(joint, keep), trials);
        ASSERT_GT(df, 0);
        EXPECT_LT(stat, ChiSquareCritical(df)) << "positions of size " << keep.size();
      }
    }
    // The check has power: the draft's own proposal distribution is rejected by it.
    std::map<std::vector<int32_t>, int> draft_counts;
    Sampler qs(sp, V);
    std::vector<float> q(V);
    qs.Probabilities(drafter.Logits(0), q.data());
    for (int t = 0; t < trials; ++t) draft_counts[{qs.DrawAt(q.data(), t)}]++;
    const auto [stat, df] = ChiSquare(draft_counts, Marginal(joint, {1}), trials);
    EXPECT_GT(stat, ChiSquareCritical(df)) << "chi-square cannot tell q from p";
  }
}

TEST(Spec, BatchInvariantLogitsAcrossVerifyAndPrefillChunks) {
  ThreadPool pool(2);
  auto rt = MakeRandomTarget(97, 64, 3, 9);
  // 70 positions: three key tiles, so rows of one chunk straddle a tile boundary.
  constexpr int kTokens = 70;
  std::vector<int32_t> tokens(kTokens);
  for (int i = 0; i < kTokens; ++i) tokens[i] = (i * 37 + 5) % 97;
  std::vector<std::vector<float>> f32_ref;
  // bf16 on the f32 path and, where the CPU has them, on bf16 dot products (ops.h).
  for (const auto& [kv, dot] : {std::pair{DType::kF32, false}, std::pair{DType::kF16, false},
                                std::pair{DType::kBF16, false}, std::pair{DType::kBF16, true}}) {
    if (dot && !ops::Bf16DotActive()) {
      std::printf("note: this CPU has no bf16 dot products; their attention path is not run\n");
      continue;
    }
    const testing::Bf16DotScope scope(dot);
    SCOPED_TRACE(std::string(DTypeName(kv)) + (dot ? " dot" : ""));
    // Reference: one row at a time (decode).
    Qwen3Model target(rt->config, rt->weights.store, Options(2, 64, kv), pool);
    std::vector<std::vector<float>> ref;
    for (int i = 0; i < kTokens; ++i) {
      target.Forward({&tokens[i], 1}, true);
      ref.emplace_back(target.Logits(0), target.Logits(0) + 97);
    }
    for (int chunk : {2, 3, 7, 16, 40, 64}) {
      target.Truncate(0);
      for (int pos = 0; pos < kTokens; pos += chunk) {
        const int n = std::min(chunk, kTokens - pos);
        target.Forward(std::span<const int32_t>(tokens).subspan(pos, n), true);
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(0, std::memcmp(ref[pos + r].data(), target.Logits(r), 97 * sizeof(float)))
              << "row " << pos + r << " in chunk of " << chunk;
        }
      }
    }
    // A reduced-precision cache changes the logits a little, not a lot (random weights, so
    // this bounds the effect of one rounding per key/value, not model quality). bf16 keeps 3
    // fewer mantissa bits than f16, so its bound is 8x f16's; measured on Zen 5: f16 0.011,
    // bf16 0.055, bf16 dot products (which round queries and weights too) 0.106.
    if (kv == DType::kF32) {
      f32_ref = ref;
      continue;
    }
    double worst = 0;
    bool differs = false;
    for (int i = 0; i < kTokens; ++i) {
      for (int t = 0; t < 97; ++t) {
        worst = std::max(worst, std::fabs(double(ref[i][t]) - f32_ref[i][t]));
        differs |= ref[i][t] != f32_ref[i][t];
      }
    }
    EXPECT_TRUE(differs) << "the cache type must reach the attention kernel";
    EXPECT_LT(worst, kv == DType::kF16 ? 2e-2 : 16e-2);
  }
}

}  // namespace
}  // namespace dflash
