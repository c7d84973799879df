// The decoding loop for one sequence: prefill, then either plain steps or DFlash cycles
// (draft a block, verify it in one target pass, accept a prefix, crop the KV cache).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "model/target.h"
#include "spec/drafter.h"
#include "spec/policy.h"
#include "spec/sampler.h"

namespace dflash {

struct GenerateOptions {
  int max_new_tokens = 128;
  std::vector<int32_t> stop_tokens;  // generation ends after emitting one of these
  bool ignore_stop = false;          // --no-eos: always generate max_new_tokens
  int block_size = 16;               // tokens drafted per cycle, the most verified (1 = plain decoding)
  SpecPolicy policy = SpecPolicy::kAdaptive;  // when a draft is given: speculate always, or while it wins
  SamplingParams sampling;
};

struct GenerateStats {
  int prompt_tokens = 0;
  int cached_tokens = 0;    // prompt tokens whose KV was already present (prefix reuse)
  int completion_tokens = 0;
  int cycles = 0;           // DFlash verify passes
  int verified_rows = 0;    // rows those passes verified (the policy may verify less than a block)
  int drafted = 0;          // drafted tokens offered to verification
  int accepted = 0;         // drafted tokens accepted
  int plain_steps = 0;      // decode steps run plainly although a draft was given (policy)
  int fallbacks = 0;        // times the adaptive policy switched from DFlash to plain
  int probes = 0;           // cycles the adaptive policy ran to test DFlash again after a fallback
  // A MoE target's distinct routed experts read, summed over sparse layers and passes: by the
  // verify passes, and by the plain decode steps (a step reads top_k per sparse layer).
  int64_t verify_experts = 0, step_experts = 0;
  int steps = 0;            // plain decode steps (with or without a draft)
  std::vector<int> accept_hist;  // [k] = cycles that committed k tokens (k = a + 1)
  double prefill_ms = 0, ttft_ms = 0, decode_ms = 0, draft_ms = 0, verify_ms = 0;

  double tokens_per_cycle() const;  // z-lab's tau over DFlash cycles
  double acceptance() const;        // accepted / drafted
  double prefill_tok_s() const;
  double decode_tok_s() const;      // tokens after the first / decode time
};

// Why a generation ended: a stop token, max_new_tokens or a full context, or the caller
// cancelling. The decoding loop ends with the first three; a server whose reply parsed as tool
// calls reports kToolCalls where the loop said kStop.
enum class FinishReason { kStop, kLength, kCancelled, kToolCalls };
// The name the APIs give it (OpenAI's finish_reason, the CLI's JSON, metrics): "stop",
// "length", "cancelled", "tool_calls".
std::string_view FinishReasonName(FinishReason r);

struct GenerateResult {
  std::vector<int32_t> tokens;
  FinishReason finish_reason = FinishReason::kStop;
  GenerateStats stats;
};

// Called with each batch of newly committed tokens; return false to cancel.
using TokenSink = std::function<bool(std::span<const int32_t>)>;
// Called after each prefill chunk with the prompt positions done so far and the prompt's
// length; return false to cancel (a client that went away during a long prompt).
using PrefillProgress = std::function<bool(int done, int total)>;

// Brackets every stretch of the loop that touches the models (a prefill chunk, a plain step, a
// DFlash cycle): several sequences can then share one model pair, each taking its turn and
// binding its own caches in Enter(). Sinks are called outside the turn.
class StepScope {
 public:
  virtual ~StepScope() = default;
  virtual void Enter() = 0;
  virtual void Leave() = 0;
};

struct GenerateHooks {
  TokenSink sink;
  PrefillProgress progress;
  StepScope* scope = nullptr;  // null: the caller owns the models outright
  // Milliseconds on some clock, for the timings and the adaptive policy (null: steady_clock).
  // Tests drive the policy with a scripted cost model through it.
  std::function<double()> clock_ms;
};

// Generates after `prompt`. The target's KV cache may already hold a prefix of the prompt
// (prefix reuse): that prefix must also be in the drafter's context. drafter may be null
// (plain decoding); block_size 1 also decodes plainly.
GenerateResult Generate(TargetModel& target, Drafter* drafter, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const TokenSink& sink = {});
GenerateResult Generate(TargetModel& target, Drafter* drafter, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const GenerateHooks& hooks);

// The loop's commit step, for it and for anything that emits tokens as it would (the server's
// scripted replies): appends `tokens` to `output` up to and including the first stop token
// (unless options.ignore_stop) and never past options.max_new_tokens, and hands what it
// appended to `sink` (when set). Returns why generation ends there, or nullopt while it goes on.
std::optional<FinishReason> CommitTokens(std::span<const int32_t> tokens, const GenerateOptions& options,
                                         const TokenSink& sink, std::vector<int32_t>& output);

}  // namespace dflash
