// The decoding loop's commit step (CommitTokens), which the server's scripted replies share:
// where output ends and why, and the names the APIs give the reasons.
#include <gtest/gtest.h>

#include "spec/generate.h"

namespace dflash {
namespace {

GenerateOptions Options(int max_new_tokens) {
  GenerateOptions o;
  o.max_new_tokens = max_new_tokens;
  o.stop_tokens = {7, 9};
  return o;
}

// Commits `tokens` into `out`, recording what the sink saw.
std::optional<FinishReason> Commit(std::vector<int32_t> tokens, const GenerateOptions& o, std::vector<int32_t>& out,
                                   std::vector<int32_t>* seen = nullptr, bool keep_going = true) {
  const TokenSink sink = [&](std::span<const int32_t> ids) {
    if (seen) seen->insert(seen->end(), ids.begin(), ids.end());
    return keep_going;
  };
  return CommitTokens(tokens, o, sink, out);
}

TEST(CommitTokens, GoesOnUntilAStopTokenWhichTheOutputKeeps) {
  const GenerateOptions o = Options(100);
  std::vector<int32_t> out, seen;
  EXPECT_EQ(Commit({1, 2, 3}, o, out, &seen), std::nullopt);
  EXPECT_EQ(Commit({4, 9, 5, 7}, o, out, &seen), FinishReason::kStop);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 3, 4, 9}));
  EXPECT_EQ(seen, out);
}

TEST(CommitTokens, IgnoreStopCommitsStopTokens) {
  GenerateOptions o = Options(100);
  o.ignore_stop = true;
  std::vector<int32_t> out;
  EXPECT_EQ(Commit({7, 9, 1}, o, out), std::nullopt);
  EXPECT_EQ(out, (std::vector<int32_t>{7, 9, 1}));
}

TEST(CommitTokens, NeverPastMaxNewTokens) {
  const GenerateOptions o = Options(4);
  std::vector<int32_t> out, seen;
  EXPECT_EQ(Commit({1, 2, 3}, o, out, &seen), std::nullopt);
  EXPECT_EQ(Commit({4, 5, 6}, o, out, &seen), FinishReason::kLength);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(seen, out);
  // A stop token beyond the limit is not reached: the output ends for length.
  std::vector<int32_t> cut;
  EXPECT_EQ(Commit({1, 2, 3, 4, 7}, o, cut), FinishReason::kLength);
  EXPECT_EQ(cut.size(), 4u);
}

TEST(CommitTokens, ASinkThatCancelsWinsOverAStop) {
  const GenerateOptions o = Options(100);
  std::vector<int32_t> out, seen;
  EXPECT_EQ(Commit({1, 7}, o, out, &seen, /*keep_going=*/false), FinishReason::kCancelled);
  EXPECT_EQ(seen, (std::vector<int32_t>{1, 7}));
}

TEST(CommitTokens, NamesAreTheApis) {
  EXPECT_EQ(FinishReasonName(FinishReason::kStop), "stop");
  EXPECT_EQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_EQ(FinishReasonName(FinishReason::kCancelled), "cancelled");
  EXPECT_EQ(FinishReasonName(FinishReason::kToolCalls), "tool_calls");
}

}  // namespace
}  // namespace dflash
