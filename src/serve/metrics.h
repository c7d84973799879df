// Server counters and histograms in Prometheus' text format (GET /metrics): requests by
// endpoint and status, tokens, latency / TTFT / tok/s histograms, and speculative counters,
// including how often the draft's token at each block position was accepted.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "spec/generate.h"

namespace dflash::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void Observe(double v);
  // Appends the _bucket, _sum and _count lines of `name`.
  void Render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // [i]: observations <= bounds_[i] and > bounds_[i-1]; last: +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// What one finished generation adds.
struct GenerationRecord {
  GenerateStats stats;
  FinishReason finish_reason = FinishReason::kStop;
  bool timed_out = false;
  double wall_s = 0;
  std::string cache_tier;  // where the reused prefix came from: "ram", "disk", or empty (none)
};

// The slot pool at the time of a scrape.
struct PoolGauges {
  int slots = 0, busy = 0, queued = 0, saved = 0;
  size_t sequence_bytes = 0;  // one slot's or saved sequence's caches (SlotPool::sequence_bytes)
};

class Metrics {
 public:
  Metrics();
  void CountRequest(const std::string& endpoint, int status);
  void Record(const GenerationRecord& r);
  std::string Render(const PoolGauges& pool) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, uint64_t> finishes_;
  uint64_t timed_out_ = 0;
  uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, completion_tokens_ = 0;
  std::map<std::string, uint64_t> cache_hits_;  // by tier
  uint64_t cycles_ = 0, drafted_ = 0, accepted_ = 0, plain_steps_ = 0, fallbacks_ = 0;
  uint64_t step_experts_ = 0, verify_experts_ = 0;  // a MoE target's distinct experts read
  std::vector<uint64_t> accepted_at_;  // [j]: cycles whose drafted token j+1 was accepted
  std::vector<uint64_t> offered_at_;   // [j]: cycles that drafted a token at position j+1
  Histogram latency_, ttft_, decode_rate_, prefill_rate_;
};

}  // namespace dflash::serve
