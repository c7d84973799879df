#include "serve/metrics.h"

#include <cstdio>

namespace dflash::serve {

namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void Header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void Line(std::string& out, const std::string& name, double v, const std::string& labels = "") {
  out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + Num(v) + "\n";
}

// An unlabelled counter: its header and its one sample.
void Counter(std::string& out, const std::string& name, const char* help, double v) {
  Header(out, name, "counter", help);
  Line(out, name, v);
}

}  // namespace

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  counts_[i]++;
  sum_ += v;
  count_++;
}

void Histogram::Render(const std::string& name, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    Line(out, name + "_bucket", static_cast<double>(cumulative), "le=\"" + Num(bounds_[i]) + "\"");
  }
  Line(out, name + "_bucket", static_cast<double>(count_), "le=\"+Inf\"");
  Line(out, name + "_sum", sum_);
  Line(out, name + "_count", static_cast<double>(count_));
}

Metrics::Metrics()
    : latency_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}),
      ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      decode_rate_({1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000}),
      prefill_rate_({10, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000}) {}

void Metrics::CountRequest(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> l(mu_);
  requests_[{endpoint, status}]++;
}

void Metrics::Record(const GenerationRecord& r) {
  std::lock_guard<std::mutex> l(mu_);
  const GenerateStats& s = r.stats;
  finishes_[std::string(FinishReasonName(r.finish_reason))]++;
  timed_out_ += r.timed_out;
  prompt_tokens_ += s.prompt_tokens;
  cached_tokens_ += s.cached_tokens;
  if (!r.cache_tier.empty()) cache_hits_[r.cache_tier]++;
  completion_tokens_ += s.completion_tokens;
  cycles_ += s.cycles;
  drafted_ += s.drafted;
  accepted_ += s.accepted;
  plain_steps_ += s.plain_steps;
  fallbacks_ += s.fallbacks;
  step_experts_ += s.step_experts;
  verify_experts_ += s.verify_experts;
  // accept_hist[k]: cycles that committed k tokens, i.e. accepted drafts 1..k-1.
  const size_t positions = s.accept_hist.size() > 2 ? s.accept_hist.size() - 2 : 0;
  if (accepted_at_.size() < positions) {
    accepted_at_.resize(positions, 0);
    offered_at_.resize(positions, 0);
  }
  for (size_t k = 1; k < s.accept_hist.size(); ++k) {
    for (size_t j = 0; j + 1 < k && j < positions; ++j) accepted_at_[j] += s.accept_hist[k];
  }
  for (size_t j = 0; j < positions; ++j) offered_at_[j] += s.cycles;
  latency_.Observe(r.wall_s);
  if (s.completion_tokens > 0) ttft_.Observe(s.ttft_ms / 1000.0);
  if (s.completion_tokens > 1) decode_rate_.Observe(s.decode_tok_s());
  if (s.prompt_tokens > s.cached_tokens && s.prefill_ms > 0) prefill_rate_.Observe(s.prefill_tok_s());
}

std::string Metrics::Render(const PoolGauges& pool) const {
  std::lock_guard<std::mutex> l(mu_);
  std::string out;
  Header(out, "dflash_requests_total", "counter", "HTTP requests by endpoint and status.");
  for (const auto& [key, n] : requests_) {
    Line(out, "dflash_requests_total", static_cast<double>(n),
         "endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"");
  }
  Header(out, "dflash_generations_total", "counter", "Finished generations by finish reason.");
  for (const auto& [reason, n] : finishes_) {
    Line(out, "dflash_generations_total", static_cast<double>(n), "finish_reason=\"" + reason + "\"");
  }
  Counter(out, "dflash_generations_timed_out_total", "Generations stopped by the request timeout.", static_cast<double>(timed_out_));
  Counter(out, "dflash_prompt_tokens_total", "Prompt tokens, cached or prefilled.", static_cast<double>(prompt_tokens_));
  Counter(out, "dflash_prompt_cached_tokens_total", "Prompt tokens reused from the prefix cache.", static_cast<double>(cached_tokens_));
  Header(out, "dflash_cache_hits_total", "counter", "Requests that reused a cached prefix, by the tier it came from.");
  for (const char* tier : {"ram", "disk"}) {
    const auto n = cache_hits_.find(tier);
    Line(out, "dflash_cache_hits_total", n == cache_hits_.end() ? 0.0 : static_cast<double>(n->second),
         std::string("tier=\"") + tier + "\"");
  }
  Counter(out, "dflash_completion_tokens_total", "Generated tokens.", static_cast<double>(completion_tokens_));
  Counter(out, "dflash_spec_cycles_total", "DFlash draft + verify cycles.", static_cast<double>(cycles_));
  Counter(out, "dflash_spec_drafted_tokens_total", "Drafted tokens offered to verification.", static_cast<double>(drafted_));
  Counter(out, "dflash_spec_accepted_tokens_total", "Drafted tokens accepted.", static_cast<double>(accepted_));
  Counter(out, "dflash_spec_plain_steps_total", "Plain decode steps taken although a draft was loaded (adaptive policy).", static_cast<double>(plain_steps_));
  Counter(out, "dflash_spec_fallbacks_total", "Switches from DFlash to plain decoding by the adaptive policy.", static_cast<double>(fallbacks_));
  Header(out, "dflash_experts_read_total", "counter",
         "MoE targets: distinct routed experts read, summed over sparse layers, by plain steps and verify passes.");
  Line(out, "dflash_experts_read_total", static_cast<double>(step_experts_), "pass=\"step\"");
  Line(out, "dflash_experts_read_total", static_cast<double>(verify_experts_), "pass=\"verify\"");
  Header(out, "dflash_spec_position_accepted_total", "counter",
         "Cycles whose drafted token at block position N was accepted (position 1 = first drafted token).");
  for (size_t j = 0; j < accepted_at_.size(); ++j) {
    Line(out, "dflash_spec_position_accepted_total", static_cast<double>(accepted_at_[j]),
         "position=\"" + std::to_string(j + 1) + "\"");
  }
  Header(out, "dflash_spec_position_offered_total", "counter", "Cycles that drafted a token at block position N.");
  for (size_t j = 0; j < offered_at_.size(); ++j) {
    Line(out, "dflash_spec_position_offered_total", static_cast<double>(offered_at_[j]),
         "position=\"" + std::to_string(j + 1) + "\"");
  }
  Header(out, "dflash_request_duration_seconds", "histogram", "Wall time of generation requests.");
  latency_.Render("dflash_request_duration_seconds", out);
  Header(out, "dflash_time_to_first_token_seconds", "histogram", "Prefill until the first token.");
  ttft_.Render("dflash_time_to_first_token_seconds", out);
  Header(out, "dflash_decode_tokens_per_second", "histogram", "Decode speed per request.");
  decode_rate_.Render("dflash_decode_tokens_per_second", out);
  Header(out, "dflash_prefill_tokens_per_second", "histogram", "Prefill speed per request (uncached tokens).");
  prefill_rate_.Render("dflash_prefill_tokens_per_second", out);
  Header(out, "dflash_slots", "gauge", "Sequence slots.");
  Line(out, "dflash_slots", pool.slots);
  Header(out, "dflash_slots_busy", "gauge", "Slots generating now.");
  Line(out, "dflash_slots_busy", pool.busy);
  Header(out, "dflash_requests_queued", "gauge", "Requests waiting for a slot.");
  Line(out, "dflash_requests_queued", pool.queued);
  Header(out, "dflash_saved_sequences", "gauge", "Sequences kept beyond the slots (--cache-ram).");
  Line(out, "dflash_saved_sequences", pool.saved);
  Header(out, "dflash_sequence_bytes", "gauge",
         "Bytes of one sequence's caches: KV, a hybrid's recurrent state with its copies and checkpoints, draft context.");
  Line(out, "dflash_sequence_bytes", static_cast<double>(pool.sequence_bytes));
  Header(out, "dflash_cache_reserved_bytes", "gauge", "Bytes of every slot's and saved sequence's caches.");
  Line(out, "dflash_cache_reserved_bytes", static_cast<double>(pool.sequence_bytes) * (pool.slots + pool.saved));
  return out;
}

}  // namespace dflash::serve
