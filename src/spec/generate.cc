#include "spec/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "spec/penalties.h"

namespace dflash {

namespace {

double SteadyMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Holds the models for one stretch of work (see StepScope).
class Turn {
 public:
  explicit Turn(StepScope* scope) : scope_(scope) {
    if (scope_) scope_->Enter();
  }
  ~Turn() {
    if (scope_) scope_->Leave();
  }
  Turn(const Turn&) = delete;
  Turn& operator=(const Turn&) = delete;

 private:
  StepScope* scope_;
};

// The state of one generation: committed output, the pending token (sampled, not yet run
// through the target), the sampler and its scratch.
class Decoder {
 public:
  Decoder(TargetModel& target, Drafter* drafter, const GenerateOptions& options, const GenerateHooks& hooks)
      : target_(target),
        drafter_(drafter),
        opt_(options),
        hooks_(hooks),
        vocab_(target.config().vocab_size),
        sampler_(options.sampling, vocab_),
        penalties_(options.sampling, vocab_),
        rejection_(!options.sampling.greedy() && options.sampling.spec == SpecSampling::kRejection) {
    const int B = std::max(1, options.block_size);
    result_.stats.accept_hist.assign(B + 1, 0);
    if (!options.sampling.greedy()) probs_.resize(vocab_);
    if (penalties_.active()) penalised_.resize(vocab_);
    if (rejection_ && drafter_ && B > 1) {
      q_.resize(static_cast<size_t>(B - 1) * vocab_);
      residual_.resize(vocab_);
    }
    drafted_.resize(B + 1);  // the block, plus the token after a fully accepted block
  }

  GenerateResult Run(std::span<const int32_t> prompt);

 private:
  double Now() const { return hooks_.clock_ms ? hooks_.clock_ms() : SteadyMs(); }
  double MsSince(double t) const { return Now() - t; }
  // logits with the penalties of the current history applied (spec/penalties.h), in
  // penalised_, or logits themselves when no penalty is set.
  const float* Penalised(const float* logits);
  // Makes the penalties' history the committed tokens plus the block's first `n` drafts: the
  // history of the row that predicts the token after drafted_[n], in the draft and the verify.
  void DraftsInHistory(int n);
  // The token for sequence position `position` (sampling is coupled to it: spec/sampler.h).
  int32_t Pick(const float* logits, int64_t position);
  // The draft's token for position `position` from its logits row j: its own Pick, or under
  // rejection sampling a draw from q (kept in q_ row j for the verdict).
  int32_t Propose(int j, int64_t position);
  // The same for a draft with a candidate selector (DFlash2): the best candidate given the
  // token before, or a draw from softmax(scores / T) over the candidates. The selector's q
  // carries no penalties or filters (z-lab's has none); p does, and rejection stays exact.
  int32_t Select(int j, int64_t position);
  // How many of the block's rows - 1 drafts the target accepts, and the token after them: by
  // equality with the target's own pick (greedy, reproducible sampling) or by rejection sampling.
  int AcceptByMatch(int rows, int pos, int32_t* next);
  int AcceptByRejection(int rows, int pos, int32_t* next);
  bool Commit(std::span<const int32_t> tokens);  // false when generation must end
  bool Prefill(std::span<const int32_t> prompt);  // false when cancelled
  std::span<const int32_t> PlainStep();           // both return the tokens they committed
  // Drafts a block of B, verifies its first `rows` (the pending token and rows - 1 drafts).
  std::span<const int32_t> SpeculativeCycle(int B, int rows);

  TargetModel& target_;
  Drafter* drafter_;
  const GenerateOptions& opt_;
  const GenerateHooks& hooks_;
  const int vocab_;
  Sampler sampler_;
  Penalties penalties_;
  int drafts_in_history_ = 0;  // drafted_[1, n] are in penalties_' history besides the committed tokens
  const bool rejection_;  // sampled with SpecSampling::kRejection
  GenerateResult result_;
  int32_t pending_ = -1;
  double last_draft_ms_ = 0, last_verify_ms_ = 0;  // the latest cycle's, for the policy
  std::vector<int32_t> drafted_;      // [B+1] block: pending + drafted tokens, then the next
  std::vector<float> probs_;          // [V] the distribution a sampled Pick draws from
  std::vector<float> penalised_;      // [V] penalties: the row being picked from, penalised
  std::vector<float> q_;              // [B-1][V] rejection sampling: the draft's distributions
  std::vector<float> residual_;       // [V] rejection sampling: max(0, p - q)
};

const float* Decoder::Penalised(const float* logits) {
  if (!penalties_.active()) return logits;
  penalties_.Apply(logits, penalised_.data());
  return penalised_.data();
}

void Decoder::DraftsInHistory(int n) {
  for (; drafts_in_history_ < n; ++drafts_in_history_) penalties_.Add(drafted_[drafts_in_history_ + 1]);
  for (; drafts_in_history_ > n; --drafts_in_history_) penalties_.Remove(drafted_[drafts_in_history_]);
}

int32_t Decoder::Pick(const float* logits, int64_t position) {
  logits = Penalised(logits);
  if (sampler_.params().greedy()) return Sampler::Argmax(logits, vocab_);
  sampler_.Probabilities(logits, probs_.data());
  return sampler_.DrawAt(probs_.data(), position);
}

int32_t Decoder::Propose(int j, int64_t position) {
  if (drafter_->selector_top_k() > 0) return Select(j, position);
  if (!rejection_) return Pick(drafter_->Logits(j), position);
  float* q = q_.data() + static_cast<size_t>(j) * vocab_;
  sampler_.Probabilities(Penalised(drafter_->Logits(j)), q);
  return sampler_.DrawAt(q, position, Stream::kDraft);
}

int32_t Decoder::Select(int j, int64_t position) {
  const Drafter::Candidates row = drafter_->SelectAfter(j, drafted_[j]);
  if (sampler_.params().greedy()) {
    return row.ids[Sampler::Argmax(row.scores.data(), static_cast<int>(row.scores.size()))];
  }
  if (!rejection_) {
    sampler_.SelectorProbabilities(row.ids, row.scores, probs_.data());
    return sampler_.DrawAt(probs_.data(), position);
  }
  float* q = q_.data() + static_cast<size_t>(j) * vocab_;
  sampler_.SelectorProbabilities(row.ids, row.scores, q);
  return sampler_.DrawAt(q, position, Stream::kDraft);
}

int Decoder::AcceptByMatch(int rows, int pos, int32_t* next) {
  // A draft is accepted while it is the token the target picks at its position (greedy or
  // coupled sampling alike: spec/sampler.h), and the target's pick where they part is the next.
  int accepted = 0;
  DraftsInHistory(0);
  *next = Pick(target_.Logits(0), pos + 1);
  while (accepted < rows - 1 && *next == drafted_[accepted + 1]) {
    ++accepted;
    DraftsInHistory(accepted);
    *next = Pick(target_.Logits(accepted), pos + 1 + accepted);
  }
  return accepted;
}

int Decoder::AcceptByRejection(int rows, int pos, int32_t* next) {
  for (int i = 0; i < rows - 1; ++i) {
    DraftsInHistory(i);
    sampler_.Probabilities(Penalised(target_.Logits(i)), probs_.data());
    const float* q = q_.data() + static_cast<size_t>(i) * vocab_;
    const Verdict v = sampler_.AcceptOrResample(probs_.data(), q, drafted_[i + 1], pos + 1 + i, residual_.data());
    if (!v.accepted) {
      *next = v.token;
      return i;
    }
  }
  DraftsInHistory(rows - 1);
  *next = Pick(target_.Logits(rows - 1), pos + rows);  // every draft accepted: the bonus, from p
  return rows - 1;
}

bool Decoder::Commit(std::span<const int32_t> tokens) {
  const size_t before = result_.tokens.size();
  const std::optional<FinishReason> end = CommitTokens(tokens, opt_, hooks_.sink, result_.tokens);
  for (size_t i = before; i < result_.tokens.size(); ++i) penalties_.Add(result_.tokens[i]);
  if (end) result_.finish_reason = *end;
  return !end;
}

bool Decoder::Prefill(std::span<const int32_t> prompt) {
  const int n = static_cast<int>(prompt.size());
  const int chunk = target_.max_rows();
  if (drafter_ && drafter_->max_append() < chunk) Fail("draft context append size below the prefill chunk");
  for (int pos = result_.stats.cached_tokens; pos < n; pos += chunk) {
    const int rows = std::min(chunk, n - pos);
    {
      Turn turn(hooks_.scope);
      target_.Forward(prompt.subspan(pos, rows), /*all_logits=*/false);
      if (drafter_) drafter_->AppendContext(target_.Features(0), rows, pos);
      // The logits live in the model's scratch: read them before another sequence's turn.
      if (pos + rows == n) {
        pending_ = Pick(target_.Logits(0), n);
        target_.Checkpoint();  // where the next request's prompt most likely departs
      }
    }
    if (hooks_.progress && !hooks_.progress(pos + rows, n)) return false;
  }
  return true;
}

std::span<const int32_t> Decoder::PlainStep() {
  const int pos = target_.kv_length();
  target_.Forward({&pending_, 1}, /*all_logits=*/false);
  result_.stats.steps++;
  result_.stats.step_experts += target_.experts_read();
  if (drafter_) drafter_->AppendContext(target_.Features(0), 1, pos);
  pending_ = Pick(target_.Logits(0), pos + 1);
  return {&pending_, 1};
}

std::span<const int32_t> Decoder::SpeculativeCycle(int B, int rows) {
  GenerateStats& st = result_.stats;
  const int pos = target_.kv_length();

  const double t0 = Now();
  drafter_->Propose(pending_, pos, B, rows - 1);
  drafted_[0] = pending_;
  for (int j = 0; j < rows - 1; ++j) {
    DraftsInHistory(j);
    drafted_[j + 1] = Propose(j, pos + 1 + j);
  }
  last_draft_ms_ = MsSince(t0);

  const double t1 = Now();
  target_.Forward({drafted_.data(), static_cast<size_t>(rows)}, /*all_logits=*/true);
  st.verify_experts += target_.experts_read();
  int32_t next;
  const int accepted = rejection_ ? AcceptByRejection(rows, pos, &next) : AcceptByMatch(rows, pos, &next);
  DraftsInHistory(0);  // Commit adds the tokens the cycle commits
  // Keep the KV of the pending token and the accepted drafts; the rest was speculative.
  target_.Truncate(pos + accepted + 1);
  drafter_->AppendContext(target_.Features(0), accepted + 1, pos);
  last_verify_ms_ = MsSince(t1);

  st.draft_ms += last_draft_ms_;
  st.verify_ms += last_verify_ms_;
  st.cycles++;
  st.verified_rows += rows;
  st.drafted += rows - 1;
  st.accepted += accepted;
  st.accept_hist[accepted + 1]++;
  drafted_[accepted + 1] = next;
  pending_ = next;
  return {drafted_.data() + 1, static_cast<size_t>(accepted + 1)};
}

// A MoE target's experts as the policy's cost model takes them: their share of a decode step
// is their share of its bytes (a decode step is memory-bound), at the context decoding starts.
plan::ExpertCosts ExpertCostsOf(const TargetModel& target, int context) {
  const ExpertShape e = target.expert_shape();
  if (e.sparse_layers == 0) return {};
  return {e.experts, e.top_k, static_cast<double>(e.decode_bytes) / target.DecodeBytes(context), 0.0};
}

GenerateResult Decoder::Run(std::span<const int32_t> prompt) {
  GenerateStats& st = result_.stats;
  const int n = static_cast<int>(prompt.size());
  if (n == 0) Fail("the prompt is empty");
  if (opt_.max_new_tokens < 1) Fail("max tokens must be at least 1, got ", opt_.max_new_tokens);
  if (opt_.block_size < 1) Fail("block size must be at least 1, got ", opt_.block_size);
  if (drafter_ && opt_.block_size > drafter_->max_block()) {
    Fail("block size ", opt_.block_size, " exceeds the draft's maximum ", drafter_->max_block());
  }
  if (n >= target_.kv_capacity()) {
    Fail("prompt of ", n, " tokens does not fit the context of ", target_.kv_capacity(), " tokens");
  }
  {
    Turn turn(hooks_.scope);
    if (target_.kv_length() >= n) Fail("internal: cached prefix covers the whole prompt");
    st.cached_tokens = target_.kv_length();
  }
  st.prompt_tokens = n;
  penalties_.SetPrompt(prompt);

  const double start = Now();
  const bool prefilled = Prefill(prompt);
  st.prefill_ms = MsSince(start);
  if (!prefilled) {
    result_.finish_reason = FinishReason::kCancelled;
    return std::move(result_);
  }
  st.ttft_ms = MsSince(start);
  const double decode_start = Now();
  bool running = Commit({&pending_, 1});
  const bool speculate = drafter_ && opt_.block_size > 1;
  SpeculationController policy(opt_.policy, opt_.block_size, ExpertCostsOf(target_, target_.kv_length()));
  const int sparse_layers = target_.expert_shape().sparse_layers;
  while (running) {
    std::span<const int32_t> committed;
    {
      Turn turn(hooks_.scope);
      const int remaining = opt_.max_new_tokens - static_cast<int>(result_.tokens.size());
      const int room = target_.kv_capacity() - target_.kv_length();
      if (room < 1) {
        result_.finish_reason = FinishReason::kLength;
        break;
      }
      const int B = std::min({opt_.block_size, remaining, room});
      const int rows = speculate ? std::min(policy.NextRows(), B) : 1;
      const double step_start = Now();
      if (rows > 1) {
        committed = SpeculativeCycle(B, rows);
        const double distinct = sparse_layers > 0 ? double(target_.experts_read()) / sparse_layers : -1;
        policy.OnCycle(last_draft_ms_, last_verify_ms_, rows, static_cast<int>(committed.size()) - 1, distinct);
      } else {
        committed = PlainStep();
        if (speculate) {
          policy.OnPlainStep(MsSince(step_start));
          st.plain_steps++;
        }
      }
    }
    running = Commit(committed);
  }
  st.decode_ms = MsSince(decode_start);
  st.fallbacks = policy.fallbacks();
  st.probes = policy.probes();
  st.completion_tokens = static_cast<int>(result_.tokens.size());
  return std::move(result_);
}

}  // namespace

std::string_view FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kToolCalls: return "tool_calls";
  }
  Fail("internal: finish reason ", static_cast<int>(r), " has no name");
}

std::optional<FinishReason> CommitTokens(std::span<const int32_t> tokens, const GenerateOptions& options,
                                         const TokenSink& sink, std::vector<int32_t>& output) {
  // Never past max_new_tokens: the loop sizes its steps to fit, a script may not.
  const int64_t room = std::max<int64_t>(0, int64_t{options.max_new_tokens} - static_cast<int64_t>(output.size()));
  size_t n = std::min<size_t>(tokens.size(), room);
  bool stop = false;
  if (!options.ignore_stop) {
    const auto is_stop = [&](int32_t t) {
      return std::find(options.stop_tokens.begin(), options.stop_tokens.end(), t) != options.stop_tokens.end();
    };
    const auto first_stop = std::find_if(tokens.begin(), tokens.begin() + n, is_stop);
    stop = first_stop != tokens.begin() + n;
    if (stop) n = first_stop - tokens.begin() + 1;
  }
  output.insert(output.end(), tokens.begin(), tokens.begin() + n);
  if (sink && !sink(tokens.first(n))) return FinishReason::kCancelled;
  if (stop) return FinishReason::kStop;
  if (output.size() >= static_cast<size_t>(options.max_new_tokens)) return FinishReason::kLength;
  return std::nullopt;
}

double GenerateStats::tokens_per_cycle() const {
  int cyc = 0, toks = 0;
  for (size_t k = 0; k < accept_hist.size(); ++k) {
    cyc += accept_hist[k];
    toks += static_cast<int>(k) * accept_hist[k];
  }
  return cyc ? static_cast<double>(toks) / cyc : 0.0;
}
double GenerateStats::acceptance() const { return drafted ? static_cast<double>(accepted) / drafted : 0.0; }
double GenerateStats::prefill_tok_s() const {
  const int n = prompt_tokens - cached_tokens;
  return prefill_ms > 0 ? n / (prefill_ms / 1000.0) : 0.0;
}
double GenerateStats::decode_tok_s() const {
  return decode_ms > 0 && completion_tokens > 1 ? (completion_tokens - 1) / (decode_ms / 1000.0) : 0.0;
}

GenerateResult Generate(TargetModel& target, Drafter* drafter, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const GenerateHooks& hooks) {
  Decoder decoder(target, drafter, options, hooks);
  return decoder.Run(prompt);
}

GenerateResult Generate(TargetModel& target, Drafter* drafter, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const TokenSink& sink) {
  GenerateHooks hooks;
  hooks.sink = sink;
  return Generate(target, drafter, prompt, options, hooks);
}

}  // namespace dflash
