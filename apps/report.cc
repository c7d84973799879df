#include "report.h"

#include <unistd.h>

namespace dflash::app {

Json ResultJson(const GenerateResult& r, const std::string& mode) {
  const GenerateStats& s = r.stats;
  Json j;
  j["tokens"] = r.tokens;
  j["prompt_tokens"] = s.prompt_tokens;
  j["completion_tokens"] = s.completion_tokens;
  j["finish_reason"] = FinishReasonName(r.finish_reason);
  j["mode"] = mode;
  j["ttft_ms"] = s.ttft_ms;
  j["prefill_tok_s"] = s.prefill_tok_s();
  j["decode_tok_s"] = s.decode_tok_s();
  if (mode == "dflash") {
    j["cycles"] = s.cycles;
    j["verified_rows"] = s.verified_rows;
    j["tokens_per_cycle"] = s.tokens_per_cycle();
    j["acceptance"] = s.acceptance();
    j["accept_hist"] = s.accept_hist;
    j["plain_steps"] = s.plain_steps;
    j["fallbacks"] = s.fallbacks;
    j["draft_ms"] = s.draft_ms;
    j["verify_ms"] = s.verify_ms;
  }
  return j;
}

std::string EarlyStopNote(const GenerateResult& r, int max_new_tokens, int context) {
  const int n = static_cast<int>(r.tokens.size());
  if (r.finish_reason != FinishReason::kLength || n >= max_new_tokens) return "";
  return "stopped after " + std::to_string(n) + " of " + std::to_string(max_new_tokens) + " tokens: the prompt (" +
         std::to_string(r.stats.prompt_tokens) + " tokens) and the output filled the context of " +
         std::to_string(context) + " positions (raise --ctx)";
}

void PrintStats(FILE* out, const GenerateResult& r, const std::string& mode) {
  const GenerateStats& s = r.stats;
  std::fprintf(out, "[%s] prompt %d tok, %.1f tok/s prefill, ttft %.1f ms | %d tok, %.2f tok/s decode | finish: %s",
               mode.c_str(), s.prompt_tokens, s.prefill_tok_s(), s.ttft_ms, s.completion_tokens,
               s.decode_tok_s(), std::string(FinishReasonName(r.finish_reason)).c_str());
  if (mode == "dflash") {
    std::fprintf(out, " | tau %.2f, acceptance %.2f over %d cycles of %.1f verified rows (draft %.0f ms, verify %.0f ms)",
                 s.tokens_per_cycle(), s.acceptance(), s.cycles, s.cycles ? double(s.verified_rows) / s.cycles : 0.0,
                 s.draft_ms, s.verify_ms);
    if (s.plain_steps > 0) {
      std::fprintf(out, " | %d plain steps after %d fallback(s): DFlash was losing", s.plain_steps, s.fallbacks);
    }
  }
  std::fprintf(out, "\n");
}

double Speedup(const GenerateResult& plain, const GenerateResult& dflash) {
  const auto per_token = [](const GenerateResult& r) {
    return r.stats.completion_tokens > 1 ? r.stats.decode_ms / (r.stats.completion_tokens - 1) : 0.0;
  };
  const double d = per_token(dflash);
  return d > 0 ? per_token(plain) / d : 0.0;
}

void PrintComparison(FILE* out, const GenerateResult& plain, const GenerateResult& dflash, const SamplingParams& sampling) {
  PrintStats(out, plain, "ar");
  PrintStats(out, dflash, "dflash");
  std::fprintf(out, "speedup %.2fx (time per output token, plain / DFlash)", Speedup(plain, dflash));
  if (sampling.same_tokens_as_plain()) {
    std::fprintf(out, "; outputs %s (checked: %s DFlash must emit plain decoding's tokens)\n",
                 plain.tokens == dflash.tokens ? "identical" : "DIFFER (bug!)",
                 sampling.greedy() ? "greedy" : "with reproducible sampling,");
  } else {
    std::fprintf(out, "; rejection sampling: the outputs are two samples of the target's distribution, not compared "
                      "here (the test suite checks that distribution by chi-square: "
                      "Spec.SampledDFlashMatchesTargetDistributionAtDraftedPositions)\n");
  }
}

void ShowStatus(const std::string& text, bool last) {
  static const bool terminal = isatty(fileno(stderr));
  if (!terminal) return;
  // Trailing blanks cover the end of a longer line before it.
  std::fprintf(stderr, "\r%s   %s", text.c_str(), last ? "\n" : "");
  std::fflush(stderr);
}

void ShowProgress(const std::string& what, int done, int total) {
  ShowStatus(what + " " + std::to_string(done) + "/" + std::to_string(total), done == total);
}

}  // namespace dflash::app
