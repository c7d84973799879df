// The speculation controller's decisions on scripted costs: the verify length it picks from the
// measured acceptance and cost curve, falling back when no length beats plain steps, backing off,
// probing again cheaply, and refreshing t_step while winning.
#include <gtest/gtest.h>

#include "core/error.h"
#include "spec/policy.h"

namespace dflash {
namespace {

using C = SpeculationController;
constexpr int kBlock = 16;

// A scripted machine: a plain step costs `step`, a draft pass `draft`, a verify of r rows
// step * (1 + slope * (r - 1)); the draft's proposals agree with the target for `agree` tokens.
struct Machine {
  double step = 10, draft = 2, slope = 0.1;
  int agree = kBlock;
  double VerifyMs(int rows) const { return step * (1 + slope * (rows - 1)); }
  // Runs one decision of c; returns the tokens it committed.
  int Run(C& c) const {
    const int rows = c.NextRows();
    if (rows == 1) {
      c.OnPlainStep(step);
      return 1;
    }
    const int accepted = std::min(agree, rows - 1);
    c.OnCycle(draft, VerifyMs(rows), rows, accepted);
    return accepted + 1;
  }
};

TEST(Policy, FirstStepIsPlainThenProbesShortAndGrowsWhileAllIsAccepted) {
  C c(SpecPolicy::kAdaptive, kBlock);
  Machine m;
  EXPECT_EQ(c.NextRows(), 1);  // nothing to compare against yet
  m.Run(c);
  EXPECT_EQ(c.NextRows(), C::kProbeRows);
  m.Run(c);
  EXPECT_EQ(c.NextRows(), 2 * C::kProbeRows) << "all drafts accepted: verify further";
  m.Run(c);
  EXPECT_EQ(c.NextRows(), kBlock);
  for (int i = 0; i < 20; ++i) m.Run(c);
  EXPECT_EQ(c.NextRows(), kBlock) << "a draft that always agrees is verified in full";
  EXPECT_EQ(c.fallbacks(), 0);
}

TEST(Policy, VerifyLengthFollowsWhereTheDraftStopsAgreeing) {
  C c(SpecPolicy::kAdaptive, kBlock);
  Machine m;
  m.agree = 5;  // drafts 1..5 agree, draft 6 never does
  for (int i = 0; i < 20; ++i) m.Run(c);
  // The pending token and the 5 agreeing drafts: the target's token after them comes free, and
  // verifying draft 6 or beyond only adds cost. A deeper verify now and then re-checks that.
  int at_six = 0;
  for (int i = 0; i < 40; ++i) {
    at_six += c.NextRows() == 6;
    m.Run(c);
  }
  EXPECT_GE(at_six, 34);
  EXPECT_GT(c.ExpectedTokens(6), 5.5);
  EXPECT_LT(c.ExpectedTokens(16) - c.ExpectedTokens(6), 0.5);
}

TEST(Policy, SteepVerifyCostShortensTheVerify) {
  Machine cheap, steep;
  cheap.agree = steep.agree = 3;
  steep.slope = 1.5;  // each extra row costs 1.5 plain steps: only short verifies can pay
  C a(SpecPolicy::kAdaptive, kBlock), b(SpecPolicy::kAdaptive, kBlock);
  for (int i = 0; i < 40; ++i) cheap.Run(a), steep.Run(b);
  EXPECT_GE(a.NextRows(), 4);
  EXPECT_LT(b.NextRows(), a.NextRows());
}

TEST(Policy, LosingDraftFallsBackAndProbesRarelyEnoughToCostLittle) {
  C c(SpecPolicy::kAdaptive, kBlock);
  Machine m;
  m.agree = 0;
  m.draft = 15;  // a probe costs ~2.6 plain steps and commits one token
  double plain_ms = 0, ms = 0;
  int tokens = 0, cycles = 0;
  while (tokens < 4000) {
    const int rows = c.NextRows();
    cycles += rows > 1;
    ms += rows == 1 ? m.step : m.draft + m.VerifyMs(rows);
    tokens += m.Run(c);
    plain_ms = tokens * m.step;
  }
  EXPECT_GE(c.fallbacks(), 1);
  EXPECT_LE(cycles, 12) << "probes back off";
  EXPECT_LT(ms / plain_ms, 1.02) << "probing costs at most a few percent over plain decoding";
}

TEST(Policy, BackoffDoublesAndAWinningProbeResetsIt) {
  C c(SpecPolicy::kAdaptive, kBlock);
  Machine m;
  m.agree = 0;
  m.draft = 30;  // clearly losing
  m.Run(c);      // plain
  for (int k = 0; k < C::kLossesToFallBack; ++k) m.Run(c);  // the first time: a second loss confirms
  ASSERT_EQ(c.fallbacks(), 1);
  int plain = 0;
  while (c.NextRows() == 1) m.Run(c), ++plain;
  EXPECT_GE(plain, C::kMinBackoff);
  m.Run(c);  // the probe loses again
  int plain2 = 0;
  while (c.NextRows() == 1) m.Run(c), ++plain2;
  EXPECT_GE(plain2, 2 * C::kMinBackoff);
  EXPECT_GE(plain2, plain);
  // The draft agrees again: the probe wins, is fresh (not blended with the losing stretch).
  m.agree = kBlock;
  m.draft = 2;
  m.Run(c);
  EXPECT_GT(c.NextRows(), 1);
  EXPECT_EQ(c.fallbacks(), 2);
}

// A probe after a back-off that is descheduled (its draft and verify take 50 times as long) is
// one slow sample, not a regime change: the draft still agrees, so speculation goes on.
TEST(Policy, OneSlowProbeDoesNotStopSpeculation) {
  C c(SpecPolicy::kAdaptive, kBlock);
  Machine m;
  for (int i = 0; i < 10; ++i) m.Run(c);  // winning: the averages are those of a healthy machine
  m.agree = 0;
  while (c.fallbacks() == 0) m.Run(c);
  while (c.NextRows() == 1) m.Run(c);
  m.agree = kBlock;
  const int rows = c.NextRows();
  c.OnCycle(50 * m.draft, 50 * m.VerifyMs(rows), rows, rows - 1);
  EXPECT_GT(c.NextRows(), 1) << "one slow probe switched speculation off";
  EXPECT_EQ(c.fallbacks(), 1);
}

TEST(Policy, RefreshesStepCostWhileWinning) {
  C c(SpecPolicy::kAdaptive, kBlock);
  Machine m;
  m.Run(c);
  for (int i = 0; i < C::kRefreshCycles; ++i) {
    ASSERT_GT(c.NextRows(), 1) << "cycle " << i;
    m.Run(c);
  }
  EXPECT_EQ(c.NextRows(), 1) << "a refresh step is due";
  m.Run(c);
  EXPECT_GT(c.NextRows(), 1);
}

TEST(Policy, AlwaysVerifiesTheWholeBlockAndNeverFallsBack) {
  C c(SpecPolicy::kAlways, kBlock);
  EXPECT_EQ(c.NextRows(), kBlock);
  c.OnPlainStep(1.0);
  for (int i = 0; i < 200; ++i) c.OnCycle(50.0, 50.0, kBlock, 0);
  EXPECT_EQ(c.NextRows(), kBlock);
  EXPECT_EQ(c.fallbacks(), 0);
}

TEST(Policy, RejectsImpossibleCycles) {
  C c(SpecPolicy::kAdaptive, kBlock);
  EXPECT_THROW(c.OnCycle(1, 1, kBlock + 1, 0), Error);
  EXPECT_THROW(c.OnCycle(1, 1, 4, 4), Error);
  EXPECT_THROW(c.OnCycle(1, 1, 1, 0), Error);
}

TEST(Policy, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(ParseSpecPolicy("always"), SpecPolicy::kAlways);
  EXPECT_EQ(ParseSpecPolicy("adaptive"), SpecPolicy::kAdaptive);
  EXPECT_THROW(ParseSpecPolicy("sometimes"), Error);
}

}  // namespace
}  // namespace dflash
