// Reading the golden files that tools/make_*fixtures.py wrote from transformers and z-lab's
// dflash, and the comparisons every golden test makes against them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "draft/dflash_draft.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/target.h"
#include "spec/engine.h"
#include "spec/sampler.h"
#include "files.h"

namespace dflash::testing {

inline const fs::path kGoldensDir = kTestsDir / "goldens";

// A golden file's tensors as f32 / i32 vectors; a missing tensor or another dtype is an Error.
class Golden {
 public:
  explicit Golden(const fs::path& file) : store_(file.string()) { AddSafetensorsFile(file.string(), store_); }
  std::vector<float> F32(const std::string& name) const { return Values<float>(name, DType::kF32); }
  std::vector<int32_t> I32(const std::string& name) const { return Values<int32_t>(name, DType::kI32); }
  const Tensor& Get(const std::string& name) const {
    const Tensor* t = store_.Find(name);
    if (!t) throw Error("golden tensor '" + name + "' missing");
    return *t;
  }

 private:
  template <class T>
  std::vector<T> Values(const std::string& name, DType want) const {
    const Tensor& t = Get(name);
    if (t.dtype != want) throw Error("golden tensor '" + name + "' has dtype " + std::string(DTypeName(t.dtype)));
    const auto* p = reinterpret_cast<const T*>(t.data);
    return std::vector<T>(p, p + t.numel());
  }

  TensorStore store_;
};

inline float MaxAbsDiff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// The keys of a manifest's JSON object, in order: the parameters of a golden test suite.
inline std::vector<std::string> Keys(const Json& obj) {
  std::vector<std::string> k;
  for (auto it = obj.begin(); it != obj.end(); ++it) k.push_back(it.key());
  return k;
}

// "qwen3-tiny" -> "qwen3_tiny": gtest names allow only alphanumerics and '_'.
inline std::string ParamName(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

// How far one prompt's prefill is from transformers': the largest difference over every
// position's logits ("<key>.logits", [T][V]) and over every layer's output ("<key>.hidden",
// [L+1][T][H], hidden_states[l + 1] being layer l's, the last one final-normed). `model` must
// capture every layer.
struct PromptDiff {
  float logits = 0, hidden = 0;
};
inline PromptDiff PrefillDiff(TargetModel& model, const Golden& g, const std::string& key) {
  const DecoderConfig& d = model.config();
  const std::vector<int32_t> ids = g.I32(key + ".ids");
  const std::vector<float> logits = g.F32(key + ".logits"), hidden = g.F32(key + ".hidden");
  const size_t T = ids.size(), V = d.vocab_size, H = d.hidden_size;
  model.Truncate(0);
  model.Forward(ids, /*all_logits=*/true);
  PromptDiff worst;
  for (size_t t = 0; t < T; ++t) {
    worst.logits = std::max(worst.logits, MaxAbsDiff(model.Logits(t), &logits[t * V], V));
    for (int l = 0; l < d.num_layers; ++l) {
      worst.hidden = std::max(worst.hidden, MaxAbsDiff(model.Features(t) + l * H, &hidden[((l + 1) * T + t) * H], H));
    }
  }
  return worst;
}

// One block [anchor, MASK x (B-1)] after the golden's context: z-lab's draft logits
// ("block.logits", [B-1][V]) and ours, within `tolerance`. The engine's drafter must be a
// DFlashDraft.
inline void ExpectDraftBlockLogitsMatch(Engine& engine, const Golden& g, float tolerance) {
  const std::vector<int32_t> ctx = g.I32("block.context");
  const std::vector<float> ref = g.F32("block.logits");
  const int n = static_cast<int>(ctx.size());
  const int B = engine.draft_config()->block_size;
  const size_t V = engine.target_config().decoder.vocab_size;
  ASSERT_EQ(ref.size(), (B - 1) * V);

  engine.target().Truncate(0);
  engine.target().Forward(ctx, /*all_logits=*/false);
  const int32_t anchor = Sampler::Argmax(engine.target().Logits(0), V);
  ASSERT_EQ(anchor, g.I32("block.anchor")[0]);
  DFlashDraft& draft = *static_cast<DFlashDraft*>(engine.drafter());
  draft.TruncateContext(0);
  draft.AppendContext(engine.target().Features(0), n, 0);
  draft.Propose(anchor, n, B, B - 1);
  float worst = 0;
  for (int j = 0; j < B - 1; ++j) worst = std::max(worst, MaxAbsDiff(draft.Logits(j), &ref[j * V], V));
  EXPECT_LT(worst, tolerance);
}

// Our tokens per commit (the sink's batches: [0] the prefill's token, then one per cycle) against
// z-lab's acceptance_lengths, over the cycles that start at least `block` tokens before
// max_new_tokens. Later blocks are clamped to what is left, and z-lab's loop leaves one token
// more (it counts the prefill's token against max_length, we do not), so its last blocks are
// a row longer than ours; under bidirectional block attention that changes their drafts.
// Returns how many cycles were compared.
inline int ExpectUnclampedCyclesMatch(const std::vector<int>& per_commit, const std::vector<int32_t>& zlab,
                                      int max_new_tokens, int block) {
  int committed = per_commit.empty() ? 0 : per_commit[0], compared = 0;
  for (size_t c = 0; c < zlab.size() && c + 1 < per_commit.size(); ++c) {
    if (max_new_tokens - committed < block) break;
    EXPECT_EQ(per_commit[c + 1], zlab[c]) << "cycle " << c;
    committed += per_commit[c + 1];
    ++compared;
  }
  return compared;
}

// DFlash greedy (block 16, always speculating) from the golden's prompt 1 equals transformers'
// plain greedy continuation ("greedy"), with cycles that really speculated.
inline void ExpectDflashGreedyEqualsGolden(Engine& engine, const Golden& g) {
  const std::vector<int32_t> greedy = g.I32("greedy");
  GenerateOptions go;
  go.max_new_tokens = static_cast<int>(greedy.size());
  go.ignore_stop = true;
  go.block_size = 16;
  go.policy = SpecPolicy::kAlways;
  const GenerateResult r = engine.Generate(g.I32("prompt1.ids"), go);
  EXPECT_EQ(r.tokens, greedy);
  EXPECT_GT(r.stats.cycles, 0);
}

}  // namespace dflash::testing
