// Scripted acceptance (spec/scripted_drafter.h): the scripted run's output equals plain greedy
// decoding's, the target accepts exactly the scripted prefixes, and the accept histogram follows
// the requested per-depth curve within sampling error (chi-square at p = 1e-4).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "draft/dflash_draft.h"
#include "model/qwen3.h"
#include "plan/acceptance_profile.h"
#include "plan/cost_model.h"
#include "spec/generate.h"
#include "spec/scripted_drafter.h"
#include "testing/chi_square.h"
#include "testing/random_model.h"

namespace dflash {
namespace {

using testing::ChiSquare;
using testing::ChiSquareCritical;
using testing::Tuple;

const std::string kRoot = DFLASH_SOURCE_DIR;

// P(exactly k of `proposals` drafts accepted) under the curve.
std::map<Tuple, double> ExactAccepted(const std::vector<double>& curve, int proposals) {
  std::map<Tuple, double> probs;
  double reach = 1;
  for (int k = 0; k <= proposals; ++k) {
    const double next = k < proposals ? curve[std::min<size_t>(k, curve.size() - 1)] : 0;
    probs[{k}] = reach * (1 - next);
    reach *= next;
  }
  return probs;
}

void ExpectFits(const std::map<Tuple, int>& counts, const std::vector<double>& curve, int proposals, int trials) {
  const auto [stat, df] = ChiSquare(counts, ExactAccepted(curve, proposals), trials);
  ASSERT_GT(df, 2);
  EXPECT_LT(stat, ChiSquareCritical(df)) << "df " << df << " over " << trials << " cycles";
}

// A drafter that only counts its passes: the script alone decides the proposals.
class CountingDrafter final : public Drafter {
 public:
  int max_block() const override { return 16; }
  int max_append() const override { return 64; }
  void AppendContext(const float*, int, int) override {}
  void Propose(int32_t, int, int, int) override { ++passes; }
  const float* Logits(int) const override { return nullptr; }
  int passes = 0;
};

TEST(ScriptedAcceptance, FirstMismatchFollowsTheCurve) {
  const AcceptanceProfile profile{"test", "test", {0.95, 0.9, 0.8, 0.7, 0.6, 0.5}};
  const int vocab = 11;
  std::vector<int32_t> reference(64);
  for (size_t i = 0; i < reference.size(); ++i) reference[i] = static_cast<int32_t>((i * 7) % vocab);
  CountingDrafter inner;
  ScriptedDrafter scripted(inner, reference, profile, vocab, /*seed=*/3);
  constexpr int kTrials = 20000, kProposals = 15;
  std::map<Tuple, int> counts;
  for (int t = 0; t < kTrials; ++t) {
    scripted.Propose(reference[20], 20, 16, kProposals);
    int k = 0;
    while (k < kProposals && Sampler::Argmax(scripted.Logits(k), vocab) == reference[21 + k]) ++k;
    for (int j = k; j < kProposals; ++j) {
      ASSERT_NE(Sampler::Argmax(scripted.Logits(j), vocab), reference[21 + j]) << "row " << j << " after a mismatch";
    }
    counts[{k}]++;
  }
  EXPECT_EQ(inner.passes, kTrials);  // the real draft ran every time
  ExpectFits(counts, profile.accept_at_depth, kProposals, kTrials);
  // Proposals past the reference's end are mismatches.
  scripted.Propose(reference[60], 60, 16, kProposals);
  for (int j = 3; j < kProposals; ++j) EXPECT_NE(scripted.Logits(j)[0], 1e4f) << j;
}

struct Pair {
  ThreadPool pool{2};
  std::unique_ptr<testing::RandomTarget> rt = testing::MakeRandomTarget(97, 32, 4, 2);
  std::unique_ptr<testing::RandomDraft> rd = testing::MakeRandomDraft(rt->config, 2, {0, 2, 3}, {6, 0}, 3);
  std::unique_ptr<Qwen3Model> target;
  std::unique_ptr<DFlashDraft> draft;
  Pair() {
    TargetOptions o;
    o.kv_capacity = 2048;
    o.kv_type = DType::kF16;
    o.capture_layers = {0, 2, 3};
    target = std::make_unique<Qwen3Model>(rt->config, rt->weights.store, o, pool);
    DraftOptions d;
    d.context_capacity = 2048;
    d.max_append = o.max_rows;
    draft = std::make_unique<DFlashDraft>(rd->config, rd->weights.store, *target, d, pool);
  }
  void Reset() {
    target->Truncate(0);
    draft->TruncateContext(0);
  }
};

TEST(ScriptedAcceptance, OutputIsPlainAndAcceptHistogramFollowsTheProfile) {
  Pair pair;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back((i * 13 + 5) % 97);
  GenerateOptions plain;
  plain.max_new_tokens = 1500;
  plain.ignore_stop = true;
  plain.block_size = 1;
  const GenerateResult ref = Generate(*pair.target, nullptr, prompt, plain);
  std::vector<int32_t> reference = prompt;
  reference.insert(reference.end(), ref.tokens.begin(), ref.tokens.end());

  const AcceptanceProfile profile{"test", "test", {0.9, 0.85, 0.8, 0.7, 0.6, 0.5, 0.4}};
  for (SpecPolicy policy : {SpecPolicy::kAlways, SpecPolicy::kAdaptive}) {
    SCOPED_TRACE(std::string(SpecPolicyName(policy)));
    pair.Reset();
    ScriptedDrafter scripted(*pair.draft, reference, profile, 97, /*seed=*/7);
    GenerateOptions spec = plain;
    spec.block_size = 16;
    spec.policy = policy;
    const GenerateResult out = Generate(*pair.target, &scripted, prompt, spec);
    EXPECT_EQ(out.tokens, ref.tokens);
    // The target accepted exactly what was scripted: cycles committing k + 1 tokens = scripts
    // that matched k drafts.
    std::vector<int> expected(out.stats.accept_hist.size(), 0);
    for (size_t k = 0; k < scripted.scripted_hist().size(); ++k) expected[k + 1] = scripted.scripted_hist()[k];
    EXPECT_EQ(out.stats.accept_hist, expected);
    if (policy != SpecPolicy::kAlways) continue;
    // Every cycle but the last few (cut to the tokens left) offered 15 drafts.
    std::map<Tuple, int> counts;
    for (size_t k = 1; k < out.stats.accept_hist.size(); ++k) counts[{static_cast<int>(k) - 1}] = out.stats.accept_hist[k];
    ASSERT_GT(out.stats.cycles, 300);
    ExpectFits(counts, profile.accept_at_depth, 15, out.stats.cycles);
  }
}

TEST(ScriptedAcceptance, BuiltinProfilesComeFromTheRegistry) {
  const plan::Registry r = plan::LoadRegistry(kRoot + "/data/pairs.json");
  for (const std::string& name : plan::BuiltinProfileNames()) {
    const AcceptanceProfile p = plan::LoadAcceptanceProfile(name, r, 16);
    EXPECT_EQ(p.name, name);
    EXPECT_EQ(p.accept_at_depth.size(), 15u);
    EXPECT_NE(p.source.find("pairs.json"), std::string::npos) << p.source;
  }
  const double agent_tau = (r.agent.tokens_per_cycle_lo + r.agent.tokens_per_cycle_hi) / 2;
  EXPECT_NEAR(plan::ExpectedTokens(plan::LoadAcceptanceProfile("agent", r, 16).accept_at_depth, 16), agent_tau, 1e-9);
  EXPECT_NEAR(plan::ExpectedTokens(plan::LoadAcceptanceProfile("code", r, 16).accept_at_depth, 16), r.default_tau.code, 1e-9);
}

TEST(ScriptedAcceptance, ProfileFilesAreCheckedByField) {
  const plan::Registry r = plan::LoadRegistry(kRoot + "/data/pairs.json");
  const std::string path = ::testing::TempDir() + "/profile.json";
  auto load_error = [&](const std::string& text) {
    std::ofstream(path) << text;
    try {
      plan::LoadAcceptanceProfile(path, r, 16);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::ofstream(path) << R"({"name": "mine", "accept_at_depth": [0.9, 0.5]})";
  const AcceptanceProfile ok = plan::LoadAcceptanceProfile(path, r, 16);
  EXPECT_EQ(ok.name, "mine");
  EXPECT_EQ(ok.accept_at_depth, (std::vector<double>{0.9, 0.5}));
  EXPECT_NE(load_error(R"({"accept_at_depth": [0.9, 1.5]})").find("accept_at_depth[1] = 1.5"), std::string::npos);
  EXPECT_NE(load_error(R"({"accept_at_depth": []})").find("empty"), std::string::npos);
  EXPECT_NE(load_error(R"({"accept_at_depth": ["x"]})").find("accept_at_depth[0] must be a number"), std::string::npos);
  EXPECT_NE(load_error(R"({"name": 3, "accept_at_depth": [0.5]})").find("\"name\" must be a string"), std::string::npos);
  EXPECT_NE(load_error("[1]").find("must be a JSON object"), std::string::npos);
  try {
    plan::LoadAcceptanceProfile("no-such-profile", r, 16);
    ADD_FAILURE() << "unknown profile accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("neither a built-in"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dflash
