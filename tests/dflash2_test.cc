// DFlash2 drafts (z-lab dflash 0.1.0's DFlash2DraftModel: dynamic convolutions in every layer and
// a candidate selector) against the package itself: tests/fixtures/dflash2-tiny was saved by it
// over qwen3-tiny, tests/goldens/dflash2-tiny.safetensors holds its outputs
// (tools/make_dflash2_fixtures.py). Then the properties the loop must keep with such a draft:
// greedy and reproducible sampling equal plain decoding, rejection sampling has the target's
// distribution, and broken files are refused by name. The goldens and losslessness are checked
// for the safetensors draft and for the GGUF llama.cpp's convert_hf_to_gguf.py makes of it
// (tests/goldens/gguf/dflash2-tiny.llamacpp.gguf, tools/make_llamacpp_dflash_gguf.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "draft/dflash2_selector.h"
#include "io/gguf.h"
#include "io/quantize_store.h"
#include "io/safetensors.h"
#include "spec/engine.h"
#include "testing/chi_square.h"
#include "testing/files.h"
#include "testing/goldens.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;
using testing::ChiSquare;
using testing::ChiSquareCritical;
using testing::Golden;
using testing::kFixturesDir;
using testing::kGoldensDir;
using testing::Marginal;
using testing::Tuple;

constexpr float kTolerance = 2e-4f;  // golden_test's: f32 transformers against our f32 path

const Json& Manifest() {
  static const Json m = ReadJsonFile((kGoldensDir / "dflash2_manifest.json").string());
  return m;
}
Golden DraftGolden() { return Golden(kGoldensDir / "dflash2-tiny.safetensors"); }
const fs::path kLlamaCppGguf = kGoldensDir / "gguf" / "dflash2-tiny.llamacpp.gguf";

EngineOptions Options(const fs::path& draft = kFixturesDir / "dflash2-tiny") {
  EngineOptions eo;
  eo.target_dir = (kFixturesDir / Manifest()["target"].get<std::string>()).string();
  eo.draft_dir = draft.string();
  eo.context = 128;
  eo.kv_type = DType::kF32;  // the goldens are f32 torch runs
  eo.prefill_chunk = 64;
  eo.threads = 2;
  return eo;
}

// The draft after Propose on the golden block: [anchor, MASK x (B-1)] after prompt 2.
Drafter& ProposeGoldenBlock(Engine& engine, const Golden& g) {
  const std::vector<int32_t> ctx = g.I32("block.context");
  const int n = static_cast<int>(ctx.size());
  const int B = engine.draft_config()->block_size;
  engine.target().Truncate(0);
  engine.target().Forward(ctx, /*all_logits=*/false);
  DFlashDraft& draft = *static_cast<DFlashDraft*>(engine.drafter());
  draft.TruncateContext(0);
  draft.AppendContext(engine.target().Features(0), n, 0);
  draft.Propose(g.I32("block.anchor")[0], n, B, B - 1);
  return draft;
}

std::set<int32_t> AsSet(std::span<const int32_t> ids) { return {ids.begin(), ids.end()}; }

// The same draft as z-lab's safetensors directory and as llama.cpp's f32 GGUF conversion of it.
class Dflash2Forms : public ::testing::TestWithParam<fs::path> {};
INSTANTIATE_TEST_SUITE_P(Files, Dflash2Forms,
                         ::testing::Values(kFixturesDir / "dflash2-tiny", kLlamaCppGguf),
                         [](const auto& info) { return info.index == 0 ? "Safetensors" : "LlamaCppGguf"; });

// The convolutions and the rest of the layer: the unary logits of every row.
TEST_P(Dflash2Forms, BlockLogitsMatchZlab) {
  Engine engine(Options(GetParam()));
  ASSERT_TRUE(engine.draft_config()->dflash2());
  testing::ExpectDraftBlockLogitsMatch(engine, DraftGolden(), kTolerance);
}

// Greedy selection: each row's candidates (as a set: torch.topk(sorted=False) has no order) and
// the path, each row's best score given the token chosen before it. The fixture's pairwise term
// changes 12 of the 15 rows against plain argmax, so ignoring it fails here.
TEST_P(Dflash2Forms, GreedyPathAndCandidatesMatchZlab) {
  Engine engine(Options(GetParam()));
  const Golden g = DraftGolden();
  Drafter& draft = ProposeGoldenBlock(engine, g);
  const int k = draft.selector_top_k();
  ASSERT_EQ(k, 6);
  const std::vector<int32_t> path = g.I32("greedy.path"), cands = g.I32("greedy.candidates");
  int32_t previous = g.I32("block.anchor")[0];
  for (size_t j = 0; j < path.size(); ++j) {
    const Drafter::Candidates row = draft.SelectAfter(static_cast<int>(j), previous);
    EXPECT_EQ(AsSet(row.ids), AsSet(std::span(cands).subspan(j * k, k))) << "row " << j;
    previous = row.ids[Sampler::Argmax(row.scores.data(), k)];
    EXPECT_EQ(previous, path[j]) << "row " << j;
    previous = path[j];  // stay on z-lab's path after a mismatch
  }
}

// Sampled selection: given the path z-lab drew (torch.multinomial), each row's q =
// softmax(scores / T) over the candidates, keyed by candidate id.
TEST_P(Dflash2Forms, SampledQRowsMatchZlabOnItsPath) {
  Engine engine(Options(GetParam()));
  const Golden g = DraftGolden();
  Drafter& draft = ProposeGoldenBlock(engine, g);
  const int k = draft.selector_top_k();
  const int V = engine.target_config().decoder.vocab_size;
  SamplingParams sp;
  sp.temperature = Manifest()["temperature"].get<double>();
  Sampler sampler(sp, V);
  std::vector<float> q(V);
  const std::vector<int32_t> path = g.I32("sampled.path"), cands = g.I32("sampled.candidates");
  const std::vector<float> ref = g.F32("sampled.q");
  int32_t previous = g.I32("block.anchor")[0];
  float worst = 0;
  for (size_t j = 0; j < path.size(); ++j) {
    const Drafter::Candidates row = draft.SelectAfter(static_cast<int>(j), previous);
    sampler.SelectorProbabilities(row.ids, row.scores, q.data());
    double mass = 0;
    for (int c = 0; c < k; ++c) {
      const int32_t id = cands[j * k + c];
      worst = std::max(worst, std::fabs(q[id] - ref[j * k + c]));
      mass += q[id];
    }
    EXPECT_NEAR(mass, 1.0, 1e-5) << "row " << j << ": q has mass off z-lab's candidates";
    EXPECT_GT(q[path[j]], 0) << "row " << j;
    previous = path[j];
  }
  EXPECT_LT(worst, 1e-4f);  // the scores carry the logits' 2e-4
}

// z-lab's greedy dflash_generate with the DFlash2 draft: the same tokens, the same tokens per
// cycle while blocks are whole (testing/goldens.h), and plain greedy decoding's tokens.
TEST_P(Dflash2Forms, GreedySpeculativeOutputMatchesZlabAndPlain) {
  Engine engine(Options(GetParam()));
  const Golden g = DraftGolden();
  const std::vector<int32_t> prompt = Manifest()["prompt"].get<std::vector<int32_t>>();
  GenerateOptions go;
  go.max_new_tokens = Manifest()["spec_new"].get<int>();
  go.ignore_stop = true;
  go.block_size = engine.draft_config()->block_size;
  go.policy = SpecPolicy::kAlways;
  std::vector<int> per_commit;
  const GenerateResult r = engine.Generate(prompt, go, [&](std::span<const int32_t> t) {
    per_commit.push_back(static_cast<int>(t.size()));
    return true;
  });
  EXPECT_EQ(r.tokens, g.I32("spec.output"));
  const std::vector<int32_t> zlab = g.I32("spec.acceptance_lengths");
  EXPECT_GE(testing::ExpectUnclampedCyclesMatch(per_commit, zlab, go.max_new_tokens, go.block_size), 20);
  GenerateOptions plain = go;
  plain.block_size = 1;
  EXPECT_EQ(engine.Generate(prompt, plain).tokens, r.tokens);
}

// Lossless with the selector: greedy and reproducible sampling give plain decoding's tokens for
// any block size and policy, penalties included (the selector's q carries none; p does).
TEST_P(Dflash2Forms, GreedyAndReproducibleSamplingEqualPlain) {
  Engine engine(Options(GetParam()));
  const std::vector<int32_t> prompt = {3, 141, 59, 26, 53, 58, 97, 200, 17};
  SamplingParams greedy, sampled;
  sampled.temperature = 0.9;
  sampled.top_p = 0.95;
  sampled.seed = 11;
  sampled.spec = SpecSampling::kReproducible;
  SamplingParams penalised = sampled;
  penalised.repetition_penalty = 1.3;
  penalised.presence_penalty = 0.5;
  for (const SamplingParams& sp : {greedy, sampled, penalised}) {
    GenerateOptions plain;
    plain.max_new_tokens = 60;
    plain.ignore_stop = true;
    plain.block_size = 1;
    plain.sampling = sp;
    const GenerateResult ref = engine.Generate(prompt, plain);
    for (SpecPolicy policy : {SpecPolicy::kAlways, SpecPolicy::kAdaptive}) {
      for (int B : {2, 7, 16}) {
        SCOPED_TRACE("T " + std::to_string(sp.temperature) + " policy " + std::string(SpecPolicyName(policy)) +
                     " block " + std::to_string(B));
        GenerateOptions spec = plain;
        spec.block_size = B;
        spec.policy = policy;
        const GenerateResult r = engine.Generate(prompt, spec);
        EXPECT_EQ(r.tokens, ref.tokens);
        if (policy == SpecPolicy::kAlways) {
          EXPECT_GT(r.stats.cycles, 0);
        }
      }
    }
  }
}

// Rejection sampling with the selector's q (softmax over its candidates) keeps the target's
// distribution at both drafted positions. The target's top-k of 3 keeps the exact joint small
// (27 triples); the selector's 6 candidates often fall outside it, so the residual over the
// candidates is exercised as well as acceptance.
TEST(Dflash2, RejectionSamplingHasTheTargetDistribution) {
  Engine engine(Options());
  const int V = engine.target_config().decoder.vocab_size;
  const std::vector<int32_t> prompt = {3, 141, 59, 26};
  SamplingParams sp;
  sp.temperature = 1.0;
  sp.top_k = 3;
  Sampler sampler(sp, V);
  // The exact joint of the first three generated tokens under plain sampling.
  TargetModel& target = engine.target();
  const auto probs_after = [&](const std::vector<int32_t>& tokens) {
    target.Truncate(0);
    target.Forward(tokens, /*all_logits=*/false);
    std::vector<float> p(V);
    sampler.Probabilities(target.Logits(0), p.data());
    return p;
  };
  std::map<Tuple, double> joint;
  const std::vector<float> p0 = probs_after(prompt);
  for (int32_t a = 0; a < V; ++a) {
    if (p0[a] == 0) continue;
    std::vector<int32_t> pa = prompt;
    pa.push_back(a);
    const std::vector<float> p1 = probs_after(pa);
    for (int32_t b = 0; b < V; ++b) {
      if (p1[b] == 0) continue;
      std::vector<int32_t> pb = pa;
      pb.push_back(b);
      const std::vector<float> p2 = probs_after(pb);
      for (int32_t c = 0; c < V; ++c) {
        if (p2[c] > 0) joint[{a, b, c}] = static_cast<double>(p0[a]) * p1[b] * p2[c];
      }
    }
  }
  ASSERT_EQ(joint.size(), 27u);
  const int trials = 6000;
  std::map<Tuple, int> seen;
  int accepted = 0, drafted = 0;
  for (int t = 0; t < trials; ++t) {
    GenerateOptions g;
    g.policy = SpecPolicy::kAlways;
    g.max_new_tokens = 4;  // the prefill's token, then a cycle of 3 rows: drafts for tokens 2 and 3
    g.block_size = 3;
    g.ignore_stop = true;
    g.sampling = sp;
    g.sampling.seed = 5000 + t;
    const GenerateResult r = engine.Generate(prompt, g);
    ASSERT_EQ(r.tokens.size(), 4u);
    ASSERT_GE(r.stats.drafted, 2);  // the first cycle drafts tokens 2 and 3
    accepted += r.stats.accepted;
    drafted += r.stats.drafted;
    seen[{r.tokens.begin(), r.tokens.begin() + 3}]++;
  }
  // The random draft rarely meets the target's top 3 (about 2.5% of drafts accepted), but often
  // enough that accepted drafts are part of what the chi-square sees.
  EXPECT_GT(accepted, 200) << "of " << drafted << " drafts";
  EXPECT_LT(accepted, drafted) << "every draft accepted: the residual is never drawn";
  for (const std::vector<int>& keep : {std::vector<int>{1}, {2}, {1, 2}, {0, 1, 2}}) {
    const auto [stat, df] = ChiSquare(Marginal(seen, keep), Marginal(joint, keep), trials);
    ASSERT_GT(df, 0);
    EXPECT_LT(stat, ChiSquareCritical(df)) << "positions of size " << keep.size();
  }
}

// Q8_0 at load (--draft-quant / --target-quant q8_0): the fixture's codebooks have rows of
// selector_rank = 8, not whole blocks of 32. They are read a row at a time, so they stay f32;
// every other matrix is quantised, and speculation stays lossless in both file forms.
TEST_P(Dflash2Forms, QuantisedDraftKeepsPartialCodebooksAndStaysLossless) {
  ThreadPool pool(2);
  const fs::path path = GetParam();
  TensorStore store = path == kLlamaCppGguf ? LoadGguf(path.string()).store : LoadSafetensorsDir(path.string());
  EXPECT_EQ(QuantizeMatrices(store, DType::kQ8_0, pool, CandidateSelector::CodebookNames()),
            1 + 2 * (7 + 2) + 1);  // fc, per layer 7 projections + 2 kernel projections, hidden_projection
  for (const std::string& name : store.Names()) {
    const Tensor& t = *store.Find(name);
    const bool codebook = name.find("_codebook") != std::string::npos;
    if (t.shape.size() == 2) {
      EXPECT_EQ(t.dtype, codebook ? DType::kF32 : DType::kQ8_0) << name;
    }
  }
  TensorStore plain_store = path == kLlamaCppGguf ? LoadGguf(path.string()).store : LoadSafetensorsDir(path.string());
  testing::ExpectMentions(testing::ErrorOf([&] { QuantizeMatrices(plain_store, DType::kQ8_0, pool); }),
                          {"_codebook", "rows of 8 elements"});

  // The draft alone quantised: its greedy drafts still meet the f32 target's tokens (so the
  // quantised selector is exercised, not only the rejection path); then both quantised.
  for (const bool target_too : {false, true}) {
    EngineOptions eo = Options(path);
    eo.draft_quant = DType::kQ8_0;
    if (target_too) eo.target_quant = DType::kQ8_0;
    Engine engine(eo);
    const std::vector<int32_t> prompt = Manifest()["prompt"].get<std::vector<int32_t>>();
    SamplingParams greedy, reproducible;
    reproducible.temperature = 0.9;
    reproducible.seed = 3;
    reproducible.spec = SpecSampling::kReproducible;
    for (const SamplingParams& sp : {greedy, reproducible}) {
      SCOPED_TRACE("target q8_0 " + std::to_string(target_too) + " T " + std::to_string(sp.temperature));
      GenerateOptions plain;
      plain.max_new_tokens = 40;
      plain.ignore_stop = true;
      plain.block_size = 1;
      plain.sampling = sp;
      GenerateOptions spec = plain;
      spec.block_size = engine.draft_config()->block_size;
      spec.policy = SpecPolicy::kAlways;
      const GenerateResult r = engine.Generate(prompt, spec);
      EXPECT_EQ(r.tokens, engine.Generate(prompt, plain).tokens);
      EXPECT_GT(r.stats.cycles, 0);
      if (!target_too && sp.temperature == 0) {
        EXPECT_GT(r.stats.accepted, 0) << "of " << r.stats.drafted;
      }
    }
  }
}

class Dflash2BadInput : public testing::ScratchDirTest {};

TEST_F(Dflash2BadInput, CodebooksLoadWithOrWithoutWeightSuffix) {
  // The fixture names the predecessor codebook without ".weight" and the successor with it;
  // the swapped spelling gives the same block.
  const fs::path draft = CopyFixture("dflash2-tiny");
  testing::EditSafetensorsHeader(draft / "model.safetensors", [](Json& h) {
    h["candidate_selector.predecessor_codebook.weight"] = h["candidate_selector.predecessor_codebook"];
    h.erase("candidate_selector.predecessor_codebook");
    h["candidate_selector.successor_codebook"] = h["candidate_selector.successor_codebook.weight"];
    h.erase("candidate_selector.successor_codebook.weight");
  });
  Engine engine(Options(draft));
  const Golden g = DraftGolden();
  Drafter& d = ProposeGoldenBlock(engine, g);
  EXPECT_EQ(d.SelectAfter(0, g.I32("block.anchor")[0]).ids[0], [&] {
    Engine reference(Options());
    Drafter& r = ProposeGoldenBlock(reference, g);
    return r.SelectAfter(0, g.I32("block.anchor")[0]).ids[0];
  }());
}

TEST_F(Dflash2BadInput, TopKBeyondTheVocabularyIsRefusedByName) {
  const fs::path draft = CopyFixture("dflash2-tiny");
  testing::EditJsonFile(draft / "config.json", [](Json& c) { c["dflash_config"]["selector_top_k"] = 257; });
  testing::ExpectMentions(testing::ErrorOf([&] { Engine e(Options(draft)); }),
                          {"config.json", "selector_top_k 257", "vocabulary (256)"});
}

TEST_F(Dflash2BadInput, MissingKernelProjectionIsRefusedByName) {
  const fs::path draft = CopyFixture("dflash2-tiny");
  testing::EditSafetensorsHeader(draft / "model.safetensors",
                                 [](Json& h) { h.erase("layers.1.mlp_conv.kernel_projection.weight"); });
  testing::ExpectMentions(testing::ErrorOf([&] { Engine e(Options(draft)); }),
                          {"layers.1.mlp_conv.kernel_projection.weight"});
}

TEST_F(Dflash2BadInput, GroupSizeThatDoesNotDivideTheHiddenSizeIsRefused) {
  const fs::path draft = CopyFixture("dflash2-tiny");
  testing::EditJsonFile(draft / "config.json", [](Json& c) { c["dflash_config"]["conv_group_size"] = 24; });
  testing::ExpectMentions(testing::ErrorOf([&] { Engine e(Options(draft)); }),
                          {"config.json", "conv_group_size", "24", "hidden_size 64"});
}

}  // namespace
}  // namespace dflash
