// The speculation controller's decisions on scripted costs: fall back when tau / t_cycle
// loses to 1 / t_step, back off exponentially, probe again, and refresh t_step while winning.
#include <gtest/gtest.h>

#include "core/error.h"
#include "spec/policy.h"

namespace dflash {
namespace {

using C = SpeculationController;

TEST(Policy, FirstStepIsPlainThenSpeculatesWhileWinning) {
  C c(SpecPolicy::kAdaptive);
  EXPECT_FALSE(c.Speculate());  // nothing to compare against yet
  c.OnPlainStep(10.0);
  for (int i = 0; i < C::kRefreshCycles; ++i) {
    ASSERT_TRUE(c.Speculate()) << "cycle " << i;
    c.OnCycle(25.0, 5);  // 5 tokens per 25 ms beats 1 per 10 ms
  }
  EXPECT_FALSE(c.Speculate()) << "a refresh step is due";
  c.OnPlainStep(10.0);
  EXPECT_TRUE(c.Speculate());
  EXPECT_EQ(c.fallbacks(), 0);
}

TEST(Policy, LosingDraftFallsBackWithDoublingBackoff) {
  C c(SpecPolicy::kAdaptive);
  c.OnPlainStep(10.0);
  int expected_backoff = C::kMinBackoff;
  for (int round = 1; round <= 4; ++round) {
    // The first fallback waits for kLossesToFallBack losses; each probe after a back-off is
    // judged on kProbeCycles.
    for (int k = 0; k < (round == 1 ? C::kLossesToFallBack : C::kProbeCycles); ++k) {
      ASSERT_TRUE(c.Speculate());
      c.OnCycle(30.0, 2);  // 2 tokens per 30 ms loses to 1 per 10 ms
    }
    EXPECT_EQ(c.fallbacks(), round);
    for (int s = 0; s < expected_backoff; ++s) {
      ASSERT_FALSE(c.Speculate()) << "round " << round << " step " << s;
      c.OnPlainStep(10.0);
    }
    EXPECT_TRUE(c.Speculate()) << "probe after the back-off";
    expected_backoff *= 2;
  }
}

TEST(Policy, WinningProbeResetsBackoff) {
  C c(SpecPolicy::kAdaptive);
  c.OnPlainStep(10.0);
  for (int k = 0; k < C::kLossesToFallBack; ++k) c.OnCycle(30.0, 1);
  for (int s = 0; s < C::kMinBackoff; ++s) c.OnPlainStep(10.0);
  // The draft agrees again (fresh probe, not blended with the old losing average).
  for (int k = 0; k < C::kLossesToFallBack; ++k) c.OnCycle(30.0, 8);
  EXPECT_TRUE(c.Speculate());
  EXPECT_DOUBLE_EQ(c.tau(), 8.0);
  EXPECT_EQ(c.fallbacks(), 1);
}

TEST(Policy, AlwaysNeverFallsBack) {
  C c(SpecPolicy::kAlways);
  EXPECT_TRUE(c.Speculate());
  c.OnPlainStep(1.0);
  for (int i = 0; i < 200; ++i) c.OnCycle(100.0, 1);
  EXPECT_TRUE(c.Speculate());
  EXPECT_EQ(c.fallbacks(), 0);
}

TEST(Policy, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(ParseSpecPolicy("always"), SpecPolicy::kAlways);
  EXPECT_EQ(ParseSpecPolicy("adaptive"), SpecPolicy::kAdaptive);
  EXPECT_THROW(ParseSpecPolicy("sometimes"), Error);
}

}  // namespace
}  // namespace dflash
