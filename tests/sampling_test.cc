// Sampling: the filters, tiny temperatures and non-finite logits, and speculative rejection
// sampling (spec/sampler.h) checked against exact distributions by chi-square, with power checks
// that deliberately wrong acceptance rules fail.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/json_file.h"
#include "model/qwen3.h"
#include "serve/api_error.h"
#include "serve/request.h"
#include "spec/engine.h"
#include "spec/generate.h"
#include "spec/penalties.h"
#include "spec/sampler.h"
#include "testing/chi_square.h"
#include "testing/random_model.h"

namespace dflash {
namespace {

using testing::ChiSquare;
using testing::ChiSquareCritical;
using testing::Marginal;
using testing::Tuple;

SamplingParams Temperature(double t, uint64_t seed = 0) {
  SamplingParams s;
  s.temperature = t;
  s.seed = seed;
  return s;
}

// A synthetic chain over a small vocabulary: the target's and the draft's distributions at
// position i given the token before it, p[i][prev] and q[i][prev], each a random row.
struct Chain {
  static constexpr int kV = 8, kLength = 4;
  std::vector<std::vector<std::vector<float>>> p, q;  // [position][previous token][token]

  explicit Chain(uint32_t seed) {
    std::mt19937 rng(seed);
    std::gamma_distribution<float> g(0.7f);  // uneven rows, some nearly zero
    auto rows = [&] {
      std::vector<std::vector<std::vector<float>>> t(kLength, std::vector<std::vector<float>>(kV, std::vector<float>(kV)));
      for (auto& at : t) {
        for (auto& row : at) {
          float sum = 0;
          for (float& v : row) sum += v = g(rng);
          for (float& v : row) v /= sum;
        }
      }
      return t;
    };
    p = rows();
    q = rows();
  }

  std::map<Tuple, double> Exact() const {
    std::map<Tuple, double> joint;
    for (int code = 0; code < 1 << (3 * kLength); ++code) {
      Tuple t;
      double pr = 1;
      int prev = 0;
      for (int i = 0; i < kLength; ++i) {
        t.push_back((code >> (3 * i)) & 7);
        pr *= p[i][prev][t.back()];
        prev = t.back();
      }
      joint[t] = pr;
    }
    return joint;
  }
};

// An acceptance rule: the verdict on `draft` (drawn from q) at `position`.
using Rule = std::function<Verdict(const Sampler&, const float* p, const float* q, int32_t draft, int64_t position)>;

Verdict Rejection(const Sampler& s, const float* p, const float* q, int32_t draft, int64_t position) {
  std::vector<float> residual(Chain::kV);
  return s.AcceptOrResample(p, q, draft, position, residual.data());
}

// One generation of the chain the way the decoding loop runs it: a cycle drafts up to
// `drafts` tokens from q, each after the draft's previous one, then verifies them in order with
// `rule`; the first rejection ends the cycle with the rule's token, and a fully accepted cycle
// adds a bonus token drawn from p.
Tuple RunChain(const Chain& c, const Sampler& s, int drafts, const Rule& rule) {
  Tuple out;
  int prev = 0;
  while (static_cast<int>(out.size()) < Chain::kLength) {
    const int pos = static_cast<int>(out.size());
    const int n = std::min(drafts, Chain::kLength - pos);
    Tuple drafted;
    for (int j = 0, dp = prev; j < n; ++j) dp = drafted.emplace_back(s.DrawAt(c.q[pos + j][dp].data(), pos + j, Stream::kDraft));
    bool all = true;
    for (int j = 0; j < n && all; ++j) {
      const Verdict v = rule(s, c.p[pos + j][prev].data(), c.q[pos + j][prev].data(), drafted[j], pos + j);
      out.push_back(prev = v.token);
      all = v.accepted;
    }
    if (all && static_cast<int>(out.size()) < Chain::kLength) {
      const int at = static_cast<int>(out.size());
      out.push_back(prev = s.DrawAt(c.p[at][prev].data(), at));
    }
  }
  return out;
}

// Chi-square of `trials` seeded runs under `rule` against the exact joint and its marginals;
// returns whether every check passed.
bool MatchesTarget(const Chain& c, const Rule& rule, int trials, std::string* worst) {
  std::map<Tuple, int> seen;
  for (int t = 0; t < trials; ++t) {
    Sampler s(Temperature(1.0, 7000 + t), Chain::kV);
    seen[RunChain(c, s, /*drafts=*/2, rule)]++;
  }
  const auto exact = c.Exact();
  bool ok = true;
  for (const std::vector<int>& keep : {std::vector<int>{0}, {1}, {2}, {3}, {0, 1}, {1, 2}, {0, 1, 2, 3}}) {
    const auto [stat, df] = ChiSquare(Marginal(seen, keep), Marginal(exact, keep), trials);
    if (stat >= ChiSquareCritical(df)) {
      ok = false;
      *worst += "positions";
      for (int i : keep) *worst += " " + std::to_string(i);
      *worst += ": chi2 " + std::to_string(stat) + " df " + std::to_string(df) + "; ";
    }
  }
  return ok;
}

TEST(Sampling, RejectionSamplingHasTheTargetDistributionAtEveryDraftedPosition) {
  const Chain chain(21);
  const int trials = 200000;
  std::string why;
  EXPECT_TRUE(MatchesTarget(chain, Rejection, trials, &why)) << why;

  // Power: the same test rejects rules that are wrong in the usual ways.
  const Rule accept_always = [](const Sampler&, const float*, const float*, int32_t d, int64_t) {
    return Verdict{true, d};
  };
  const Rule resample_from_p = [](const Sampler& s, const float* p, const float* q, int32_t d, int64_t pos) {
    const Verdict v = Rejection(s, p, q, d, pos);
    return v.accepted ? v : Verdict{false, s.DrawAt(p, pos, Stream::kResidual)};
  };
  std::string ignored;
  EXPECT_FALSE(MatchesTarget(chain, accept_always, trials, &ignored)) << "accepting every draft passed";
  EXPECT_FALSE(MatchesTarget(chain, resample_from_p, trials, &ignored)) << "resampling from p, not p - q, passed";
}

// A draft is accepted with probability sum_x min(p(x), q(x)).
TEST(Sampling, FirstDraftAcceptanceIsTheOverlapOfPAndQ) {
  const Chain chain(5);
  const float* p = chain.p[0][0].data();
  const float* q = chain.q[0][0].data();
  double overlap = 0;
  for (int x = 0; x < Chain::kV; ++x) overlap += std::min(p[x], q[x]);
  const int trials = 100000;
  int accepted = 0;
  for (int t = 0; t < trials; ++t) {
    Sampler s(Temperature(1.0, t), Chain::kV);
    accepted += Rejection(s, p, q, s.DrawAt(q, 0, Stream::kDraft), 0).accepted;
  }
  const double sigma = std::sqrt(overlap * (1 - overlap) / trials);
  EXPECT_NEAR(static_cast<double>(accepted) / trials, overlap, 4.5 * sigma);
  ASSERT_GT(overlap, 0.2);
  ASSERT_LT(overlap, 0.9) << "p and q too alike to tell the rule from accepting everything";
}

TEST(Sampling, RejectionAcceptsWhenPIsQAndNeverWhereTheTargetHasNoMass) {
  const std::vector<float> p = {0.5f, 0.5f, 0, 0}, q = {0.25f, 0.25f, 0.25f, 0.25f};
  std::vector<float> residual(4);
  for (int t = 0; t < 1000; ++t) {
    Sampler s(Temperature(1.0, t), 4);
    EXPECT_TRUE(s.AcceptOrResample(q.data(), q.data(), t % 4, t, residual.data()).accepted);
    const Verdict v = s.AcceptOrResample(p.data(), q.data(), 2 + t % 2, t, residual.data());
    EXPECT_FALSE(v.accepted);
    EXPECT_LT(v.token, 2) << "the residual max(0, p - q) has mass on tokens 0 and 1 only";
  }
}

// 1 / 1e-39 overflows float32: before temperatures this small were greedy, every probability
// was NaN and the draw fell through to the last token id.
TEST(Sampling, TemperaturesBelowTheEpsilonAreGreedy) {
  EXPECT_TRUE(Temperature(1e-39).greedy());
  EXPECT_TRUE(Temperature(0.99e-5).greedy());
  EXPECT_FALSE(Temperature(SamplingParams::kGreedyBelow).greedy());
  const std::vector<float> logits = {0.1f, 2.0f, 1.9f, -3.0f};
  std::vector<float> probs(4);
  Sampler tiny(Temperature(1e-39), 4);
  tiny.Probabilities(logits.data(), probs.data());
  EXPECT_EQ(probs, (std::vector<float>{0, 1, 0, 0}));
  Sampler smallest(Temperature(SamplingParams::kGreedyBelow), 4);
  smallest.Probabilities(logits.data(), probs.data());
  for (float v : probs) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(probs[1], 1.0f) << "a logit gap of 0.1 at T = 1e-5 leaves nothing to the runner-up";

  ThreadPool pool(1);
  auto rt = testing::MakeRandomTarget(97, 32, 2, 3, 0.5f);
  TargetOptions o;
  o.kv_capacity = 128;
  o.max_rows = 16;
  Qwen3Model target(rt->config, rt->weights.store, o, pool);
  GenerateOptions g;
  g.max_new_tokens = 20;
  g.block_size = 1;
  const std::vector<int32_t> prompt = {3, 14, 15};
  const GenerateResult greedy = Generate(target, nullptr, prompt, g);
  g.sampling = Temperature(1e-39, 9);
  target.Truncate(0);
  EXPECT_EQ(Generate(target, nullptr, prompt, g).tokens, greedy.tokens);
}

TEST(Sampling, NonFiniteLogitsAndProbabilitiesAreErrors) {
  Sampler s(Temperature(0.8), 4);
  std::vector<float> probs(4);
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    const std::vector<float> logits = {0.5f, bad, 1.0f, 0.0f};
    try {
      s.Probabilities(logits.data(), probs.data());
      ADD_FAILURE() << "no error for logit " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("non-finite logit"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("token id 1"), std::string::npos) << e.what();
    }
    EXPECT_THROW(Sampler::Argmax(logits.data(), 4), Error) << "greedy, logit " << bad;
  }
  const std::vector<float> nan_probs = {0.5f, NAN, 0.5f, 0.0f}, zero = {0, 0, 0, 0};
  EXPECT_THROW(s.DrawAt(nan_probs.data(), 0), Error);
  EXPECT_THROW(s.DrawAt(zero.data(), 0), Error);
}

TEST(Sampling, MinPDropsTokensBelowAFractionOfTheLikeliest) {
  SamplingParams sp = Temperature(1.0);
  sp.min_p = 0.2;  // floor 0.2 * 0.5 = 0.1: 0.05 goes
  Sampler s(sp, 4);
  const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  std::vector<float> probs(4);
  s.Probabilities(logits.data(), probs.data());
  EXPECT_NEAR(probs[0], 0.15 / 0.95, 1e-6);
  EXPECT_NEAR(probs[1], 0.5 / 0.95, 1e-6);
  EXPECT_EQ(probs[2], 0.0f);
  EXPECT_NEAR(probs[3], 0.3 / 0.95, 1e-6);
  sp.min_p = 1.0;  // only the likeliest stays
  Sampler top(sp, 4);
  top.Probabilities(logits.data(), probs.data());
  EXPECT_EQ(probs, (std::vector<float>{0, 1, 0, 0}));
  sp.min_p = 1.5;
  EXPECT_THROW(ValidateSampling(sp), Error);
}

// The filters and the penalties against transformers' logits processors (goldens written by
// tools/make_sampling_goldens.py; presence and frequency in plain torch, as OpenAI define them).
// The cases keep clear of ties and of near-decisions at the filter boundaries, where our rule
// (spec/sampler.h) and transformers' may differ.
TEST(Sampling, FiltersAndPenaltiesMatchTransformersGoldens) {
  const Json doc = ReadJsonFile(std::string(DFLASH_SOURCE_DIR) + "/tests/goldens/sampling/filters.json");
  const int V = doc["vocab"].get<int>();
  ASSERT_GE(doc["cases"].size(), 10u);
  for (const Json& c : doc["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const Json& pj = c["params"];
    SamplingParams sp;
    sp.temperature = pj["temperature"].get<double>();
    sp.top_k = pj["top_k"].get<int>();
    sp.top_p = pj["top_p"].get<double>();
    sp.min_p = pj["min_p"].get<double>();
    sp.repetition_penalty = pj["repetition_penalty"].get<double>();
    sp.presence_penalty = pj["presence_penalty"].get<double>();
    sp.frequency_penalty = pj["frequency_penalty"].get<double>();
    const auto logits = c["logits"].get<std::vector<float>>();
    const auto want_penalised = c["penalised"].get<std::vector<float>>();
    const auto want_probs = c["probs"].get<std::vector<float>>();
    ASSERT_EQ(logits.size(), static_cast<size_t>(V));

    Penalties penalties(sp, V);
    EXPECT_EQ(penalties.active(), sp.penalised());
    penalties.SetPrompt(c["prompt"].get<std::vector<int32_t>>());
    for (int32_t t : c["generated"].get<std::vector<int32_t>>()) penalties.Add(t);
    std::vector<float> penalised(V), probs(V);
    penalties.Apply(logits.data(), penalised.data());
    for (int t = 0; t < V; ++t) {
      EXPECT_NEAR(penalised[t], want_penalised[t], 1e-6 * std::max(1.0f, std::fabs(want_penalised[t]))) << "token " << t;
    }
    Sampler sampler(sp, V);
    sampler.Probabilities(penalised.data(), probs.data());
    int kept = 0;
    for (int t = 0; t < V; ++t) {
      EXPECT_EQ(probs[t] > 0, want_probs[t] > 0) << "token " << t << " kept by one filter, not the other";
      EXPECT_NEAR(probs[t], want_probs[t], 2e-6) << "token " << t;
      kept += probs[t] > 0;
    }
    EXPECT_EQ(kept, c["kept"].get<int>());
  }
}

// The history a verify row sees grows and shrinks with the drafts before it: Remove undoes Add.
TEST(Sampling, PenaltyHistoryAddsAndRemovesTokens) {
  SamplingParams sp;
  sp.presence_penalty = 0.5;
  sp.frequency_penalty = 0.25;
  sp.repetition_penalty = 2.0;
  Penalties pen(sp, 4);
  pen.SetPrompt(std::vector<int32_t>{3});
  const std::vector<float> logits = {1.0f, -1.0f, 2.0f, -2.0f};
  std::vector<float> out(4);
  pen.Apply(logits.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{1.0f, -1.0f, 2.0f, -4.0f})) << "the prompt: repetition only";
  pen.Add(0);
  pen.Add(0);
  pen.Add(1);
  pen.Apply(logits.data(), out.data());
  // 0: 1 / 2 - 0.25 * 2 - 0.5; 1: -1 * 2 - 0.25 - 0.5.
  EXPECT_EQ(out, (std::vector<float>{-0.5f, -2.75f, 2.0f, -4.0f}));
  pen.Remove(0);
  pen.Remove(1);
  pen.Apply(logits.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{-0.25f, -1.0f, 2.0f, -4.0f}));
  EXPECT_THROW(pen.Remove(1), Error) << "removing a token the history does not hold";
  EXPECT_THROW(pen.Add(4), Error) << "a token outside the vocabulary";
  EXPECT_FALSE(Penalties(SamplingParams{}, 4).active());
}

TEST(Sampling, PenaltiesOutOfRangeAreErrorsNamingTheField) {
  const auto message = [](SamplingParams sp) {
    try {
      ValidateSampling(sp);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (double bad : {-2.5, 2.01, double(NAN)}) {
    SamplingParams sp;
    sp.presence_penalty = bad;
    EXPECT_NE(message(sp).find("presence_penalty must be in [-2, 2]"), std::string::npos) << message(sp);
    sp = SamplingParams{};
    sp.frequency_penalty = bad;
    EXPECT_NE(message(sp).find("frequency_penalty must be in [-2, 2]"), std::string::npos) << message(sp);
  }
  for (double bad : {0.0, -1.0, double(INFINITY), double(NAN)}) {
    SamplingParams sp;
    sp.repetition_penalty = bad;
    EXPECT_NE(message(sp).find("repetition_penalty must be a finite number > 0"), std::string::npos) << message(sp);
  }
}

TEST(Sampling, ParsesSpecSamplingNamesAndRejectsOthers) {
  EXPECT_EQ(ParseSpecSampling("rejection"), SpecSampling::kRejection);
  EXPECT_EQ(ParseSpecSampling("reproducible"), SpecSampling::kReproducible);
  EXPECT_THROW(ParseSpecSampling("exact"), Error);
  EXPECT_EQ(SamplingParams{}.spec, SpecSampling::kRejection) << "rejection sampling is the default";
}

// Passes a draft through, keeping each cycle's position and the draft's distribution q for the
// first drafted token.
class FirstRowRecorder : public Drafter {
 public:
  FirstRowRecorder(Drafter& inner, const SamplingParams& sp, int vocab) : inner_(inner), sampler_(sp, vocab), vocab_(vocab) {}
  int max_block() const override { return inner_.max_block(); }
  int max_append() const override { return inner_.max_append(); }
  void AppendContext(const float* features, int n, int pos) override { inner_.AppendContext(features, n, pos); }
  void Propose(int32_t anchor, int pos, int block, int proposals) override {
    inner_.Propose(anchor, pos, block, proposals);
    positions.push_back(pos);
    q0.emplace_back(vocab_);
    sampler_.Probabilities(inner_.Logits(0), q0.back().data());
  }
  const float* Logits(int j) const override { return inner_.Logits(j); }

  std::vector<int> positions;
  std::vector<std::vector<float>> q0;

 private:
  Drafter& inner_;
  Sampler sampler_;
  int vocab_;
};

struct AcceptanceCheck {
  double observed = 0, expected = 0, sigma = 0;  // first-draft acceptance rates over the cycles
};

// Generates on the shipped pair with `mode` and compares the share of cycles whose first draft
// was accepted with the mean of sum_x min(p(x), q(x)) over those cycles, p being the target's
// distribution after the committed tokens (recomputed afterwards: logits are batch-invariant).
AcceptanceCheck FirstDraftAcceptance(SpecSampling mode) {
  const std::string pair = std::string(DFLASH_SOURCE_DIR) + "/models/dflash-pair";
  EngineOptions eo;
  eo.target_dir = pair + "/target";
  eo.draft_dir = pair + "/draft";
  eo.threads = 2;
  eo.context = 1024;
  Engine engine(eo);
  const int V = engine.target_config().decoder.vocab_size;
  GenerateOptions g;
  g.policy = SpecPolicy::kAlways;
  g.block_size = 4;
  g.max_new_tokens = 300;
  g.ignore_stop = true;
  g.sampling = Temperature(1.0, 17);
  g.sampling.spec = mode;
  const std::vector<int32_t> prompt = {924, 54, 2130, 608, 412, 1100, 587, 1337, 2947, 86, 593, 36};
  TargetModel& target = engine.target();
  FirstRowRecorder recorder(*engine.drafter(), g.sampling, V);
  const GenerateResult r = Generate(target, &recorder, prompt, g);

  std::vector<int32_t> all = prompt;
  all.insert(all.end(), r.tokens.begin(), r.tokens.end());
  std::vector<std::vector<float>> p_rows(all.size());
  Sampler sampler(g.sampling, V);
  target.Truncate(0);
  for (size_t at = 0; at < all.size(); at += target.max_rows()) {
    const size_t n = std::min<size_t>(target.max_rows(), all.size() - at);
    target.Forward({all.data() + at, n}, /*all_logits=*/true);
    for (size_t i = 0; i < n; ++i) {
      p_rows[at + i].resize(V);
      sampler.Probabilities(target.Logits(static_cast<int>(i)), p_rows[at + i].data());
    }
  }
  AcceptanceCheck c;
  double variance = 0;
  for (size_t k = 0; k < recorder.positions.size(); ++k) {
    const std::vector<float>& p = p_rows[recorder.positions[k]];  // predicts position pos + 1
    double overlap = 0;
    for (int x = 0; x < V; ++x) overlap += std::min(p[x], recorder.q0[k][x]);
    c.expected += overlap;
    variance += overlap * (1 - overlap);
  }
  const int cycles = r.stats.cycles;
  EXPECT_EQ(static_cast<size_t>(cycles), recorder.positions.size());
  c.observed = static_cast<double>(cycles - r.stats.accept_hist[1]) / cycles;
  c.expected /= cycles;
  c.sigma = std::sqrt(variance) / cycles;
  return c;
}

// Rejection sampling accepts the first draft with probability sum_x min(p, q), measured on the
// shipped pair at T = 1; the coupled reproducible rule accepts measurably less.
TEST(Sampling, ShippedPairFirstDraftAcceptanceIsSumOfMinPQ) {
  const AcceptanceCheck rejection = FirstDraftAcceptance(SpecSampling::kRejection);
  EXPECT_NEAR(rejection.observed, rejection.expected, 4.5 * rejection.sigma)
      << "sigma " << rejection.sigma;
  const AcceptanceCheck coupled = FirstDraftAcceptance(SpecSampling::kReproducible);
  EXPECT_LT(coupled.observed, coupled.expected - 4.5 * coupled.sigma) << "the coupled rule accepts as much";
  std::printf("first-draft acceptance at T=1: rejection %.3f (sum min(p,q) %.3f, sigma %.3f); reproducible %.3f "
              "(sum min(p,q) %.3f)\n", rejection.observed, rejection.expected, rejection.sigma, coupled.observed,
              coupled.expected);
}

// Requests choose the acceptance rule and min_p; a bad value is a 400 naming the field.
TEST(Sampling, RequestsCarrySpecSamplingAndMinP) {
  const serve::OJson base = {{"model", "x"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  serve::OJson body = base;
  body["spec_sampling"] = "reproducible";
  body["min_p"] = 0.05;
  const serve::ChatRequest r = serve::ParseChatRequest(body);
  EXPECT_EQ(r.spec_sampling, SpecSampling::kReproducible);
  EXPECT_EQ(r.min_p, 0.05);
  EXPECT_FALSE(serve::ParseChatRequest(base).spec_sampling.has_value()) << "unset: the server's default";
  for (const serve::OJson& bad : {serve::OJson("exact"), serve::OJson(1)}) {
    body["spec_sampling"] = bad;
    try {
      serve::ParseChatRequest(body);
      ADD_FAILURE() << "accepted spec_sampling " << bad.dump();
    } catch (const serve::ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.Body()["error"]["param"], "spec_sampling");
    }
  }
}

// Requests carry the penalties under OpenAI's names, transformers' repetition_penalty and
// llama.cpp's repeat_penalty; a bad value is a 400 naming the field.
TEST(Sampling, RequestsCarryPenalties) {
  const serve::OJson base = {{"model", "x"}, {"prompt", "hi"}};
  serve::OJson body = base;
  body["presence_penalty"] = 0.5;
  body["frequency_penalty"] = -1.5;
  body["repetition_penalty"] = 1.1;
  serve::CompletionRequest r = serve::ParseCompletionRequest(body);
  EXPECT_EQ(r.presence_penalty, 0.5);
  EXPECT_EQ(r.frequency_penalty, -1.5);
  EXPECT_EQ(r.repetition_penalty, 1.1);
  body = base;
  body["repeat_penalty"] = 1.2;
  EXPECT_EQ(serve::ParseCompletionRequest(body).repetition_penalty, 1.2);
  EXPECT_FALSE(serve::ParseCompletionRequest(base).repetition_penalty.has_value()) << "unset: the server's default";
  const std::vector<std::pair<std::string, serve::OJson>> bad = {
      {"presence_penalty", 2.5}, {"frequency_penalty", -3}, {"repetition_penalty", 0},
      {"repeat_penalty", -1}, {"presence_penalty", "high"}};
  for (const auto& [field, value] : bad) {
    body = base;
    body[field] = value;
    try {
      serve::ParseCompletionRequest(body);
      ADD_FAILURE() << "accepted " << field << " = " << value.dump();
    } catch (const serve::ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.Body()["error"]["param"], field);
    }
  }
  body = base;
  body["repetition_penalty"] = 1.1;
  body["repeat_penalty"] = 1.2;
  EXPECT_THROW(serve::ParseCompletionRequest(body), serve::ApiError) << "two different values under both names";
}

// generation_config.json's repetition_penalty is a default for greedy decoding too (transformers
// applies it whether or not do_sample is set); a bad one is an error naming the file.
TEST(Sampling, GenerationConfigSuppliesTheRepetitionPenalty) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "dflash_sampling_genconfig";
  std::filesystem::create_directories(dir);
  const auto write = [](const std::filesystem::path& file, const char* text) { std::ofstream(file) << text; };
  write(dir / "config.json", R"({"eos_token_id": 2})");
  write(dir / "generation_config.json", R"({"repetition_penalty": 1.05})");
  ModelSource source;
  source.path = dir.string();
  GenerationDefaults d = LoadGenerationDefaults(source);
  EXPECT_EQ(d.sampling.repetition_penalty, 1.05);
  EXPECT_TRUE(d.sampling.greedy());
  write(dir / "generation_config.json", R"({"repetition_penalty": 0})");
  try {
    LoadGenerationDefaults(source);
    ADD_FAILURE() << "accepted repetition_penalty 0";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("repetition_penalty"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dflash
