// Per-sequence state and prefix reuse: Engine::Continue must produce exactly what a fresh
// Generate produces for the same prompt, whatever the sequence held before, and sequences
// stepping concurrently on one engine must not disturb each other.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "spec/engine.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;
const fs::path kPair = fs::path(DFLASH_SOURCE_DIR) / "models" / "dflash-pair";

Engine MakeEngine(bool draft, int prefill_chunk = 64) {
  EngineOptions o;
  o.target_dir = (kPair / "target").string();
  if (draft) o.draft_dir = (kPair / "draft").string();
  o.context = 512;
  o.threads = 1;
  o.prefill_chunk = prefill_chunk;
  return Engine(o);
}

GenerateOptions Greedy(const Engine& e, int n) {
  GenerateOptions g;
  g.max_new_tokens = n;
  g.ignore_stop = true;
  g.block_size = e.has_draft() ? e.draft_config()->block_size : 1;
  g.policy = SpecPolicy::kAlways;
  return g;
}

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(4 + (i * 37 + salt * 101) % 4000);
  return p;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class SequenceTest : public ::testing::TestWithParam<bool> {};

// Turn 1, then turn 2 = turn 1's prompt + its reply + a new message: the second turn reuses
// the first's KV (and draft context) and must equal a fresh generation of the same prompt.
TEST_P(SequenceTest, PrefixReuseIsBitExact) {
  Engine engine = MakeEngine(GetParam());
  const GenerateOptions g = Greedy(engine, 40);
  const std::vector<int32_t> turn1 = Prompt(90, 1);
  Sequence seq = engine.NewSequence();
  const GenerateResult r1 = engine.Continue(seq, turn1, g);
  EXPECT_EQ(r1.stats.cached_tokens, 0);
  const std::vector<int32_t> turn2 = Concat(Concat(turn1, r1.tokens), Prompt(30, 2));
  const GenerateResult r2 = engine.Continue(seq, turn2, g);
  // The last reply token never ran through the target, so it is not cached.
  EXPECT_EQ(r2.stats.cached_tokens, static_cast<int>(turn1.size() + r1.tokens.size()) - 1);
  const GenerateResult fresh = engine.Generate(turn2, g);
  EXPECT_EQ(fresh.stats.cached_tokens, 0);
  EXPECT_EQ(r2.tokens, fresh.tokens);

  // A prompt that diverges early reuses only the shared part, and still matches.
  std::vector<int32_t> fork = turn2;
  fork[20] = fork[20] == 5 ? 6 : 5;
  const GenerateResult r3 = engine.Continue(seq, fork, g);
  EXPECT_EQ(r3.stats.cached_tokens, 20);
  EXPECT_EQ(r3.tokens, engine.Generate(fork, g).tokens);

  // The same prompt again: everything but the last prompt token is reused.
  const GenerateResult r4 = engine.Continue(seq, fork, g);
  EXPECT_EQ(r4.stats.cached_tokens, static_cast<int>(fork.size()) - 1);
  EXPECT_EQ(r4.tokens, r3.tokens);
}

// Stopping at an end token inside an accepted block leaves extra positions in the KV; the
// sequence must forget them, or the next turn would reuse KV of tokens it never saw.
TEST_P(SequenceTest, StopInsideBlockKeepsOnlyWhatWasOutput) {
  Engine engine = MakeEngine(GetParam());
  GenerateOptions g = Greedy(engine, 60);
  const std::vector<int32_t> prompt = Prompt(50, 3);
  const GenerateResult full = engine.Generate(prompt, g);
  ASSERT_GE(full.tokens.size(), 10u);
  g.ignore_stop = false;
  g.stop_tokens = {full.tokens[6]};  // ends the reply within the first cycles
  Sequence seq = engine.NewSequence();
  const GenerateResult r = engine.Continue(seq, prompt, g);
  ASSERT_EQ(r.finish_reason, FinishReason::kStop);
  EXPECT_LE(seq.tokens.size(), prompt.size() + r.tokens.size());
  EXPECT_TRUE(std::equal(seq.tokens.begin(), seq.tokens.end(), Concat(prompt, r.tokens).begin()));
  const std::vector<int32_t> next = Concat(Concat(prompt, r.tokens), Prompt(10, 4));
  g.ignore_stop = true;
  EXPECT_EQ(engine.Continue(seq, next, g).tokens, engine.Generate(next, g).tokens);
}

// Two sequences generating at the same time on one engine: each gets what it gets alone.
TEST_P(SequenceTest, ConcurrentSequencesMatchSequentialOnes) {
  Engine engine = MakeEngine(GetParam());
  const GenerateOptions g = Greedy(engine, 48);
  const std::vector<int32_t> a = Prompt(70, 5), b = Prompt(130, 6);
  const std::vector<int32_t> want_a = engine.Generate(a, g).tokens;
  const std::vector<int32_t> want_b = engine.Generate(b, g).tokens;
  Sequence sa = engine.NewSequence(), sb = engine.NewSequence();
  std::vector<int32_t> got_a, got_b;
  std::thread ta([&] { got_a = engine.Continue(sa, a, g).tokens; });
  std::thread tb([&] { got_b = engine.Continue(sb, b, g).tokens; });
  ta.join();
  tb.join();
  EXPECT_EQ(got_a, want_a);
  EXPECT_EQ(got_b, want_b);
}

INSTANTIATE_TEST_SUITE_P(Modes, SequenceTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "dflash" : "plain"; });

TEST(Sequence, BoundedDraftContextDoesNotReuse) {
  EngineOptions o;
  o.target_dir = (kPair / "target").string();
  o.draft_dir = (kPair / "draft").string();
  o.context = 256;
  o.threads = 1;
  o.draft_window = 32;
  o.draft_sink = 8;
  Engine engine(o);
  const GenerateOptions g = Greedy(engine, 16);
  Sequence seq = engine.NewSequence();
  const std::vector<int32_t> p = Prompt(60, 7);
  engine.Continue(seq, p, g);
  EXPECT_EQ(engine.ReusablePrefix(seq, p), 0);
  EXPECT_EQ(engine.Continue(seq, p, g).stats.cached_tokens, 0);
}

}  // namespace
}  // namespace dflash
