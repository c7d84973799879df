#include "bench/roofline.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace dflash {

double MeasurePrefill(TargetModel& target, int tokens, int repeats) {
  if (tokens < 1 || tokens > target.kv_capacity()) {
    Fail("prefill bench: ", tokens, " tokens do not fit the KV capacity ", target.kv_capacity());
  }
  if (repeats < 1) Fail("prefill bench: repeats must be at least 1");
  const int vocab = target.config().vocab_size;
  std::vector<int32_t> chunk;
  std::vector<double> tok_s;
  for (int rep = 0; rep < repeats; ++rep) {
    target.Truncate(0);
    const auto t0 = std::chrono::steady_clock::now();
    while (target.kv_length() < tokens) {
      const int n = std::min(target.max_rows(), tokens - target.kv_length());
      chunk.resize(n);
      for (int i = 0; i < n; ++i) chunk[i] = static_cast<int32_t>((2654435761u * (target.kv_length() + i)) % vocab);
      target.Forward(chunk, /*all_logits=*/false);
    }
    tok_s.push_back(tokens / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  target.Truncate(0);
  std::sort(tok_s.begin(), tok_s.end());
  return tok_s[tok_s.size() / 2];
}

RooflineResult MeasureRoofline(TargetModel& target, ThreadPool& pool, const RooflineOptions& options,
                               const Progress& progress) {
  RooflineResult r;
  if (progress) progress("measuring read bandwidth", 0, 1);
  r.bandwidth = MeasureReadBandwidth(pool, options.bandwidth_bytes, std::max(options.repeats, 5));
  if (progress) progress("measuring read bandwidth", 1, 1);
  r.prefill_tok_s = MeasurePrefill(target, options.prefill_tokens, options.repeats);
  if (progress) progress("prefill", 1, 1);
  r.verify = MeasureVerifyCost(target, options.contexts, options.rows, options.repeats, progress);
  if (progress) progress("measuring read bandwidth again", 0, 1);
  r.bandwidth_after = MeasureReadBandwidth(pool, options.bandwidth_bytes, std::max(options.repeats, 5));
  r.roofline_gbs = std::max(r.bandwidth.median_gbs, r.bandwidth_after.median_gbs);
  for (const VerifyCostPoint& p : r.verify) {
    if (p.rows != 1) continue;
    DecodePoint d;
    d.context = p.context;
    d.ms = p.ms;
    d.tok_s = 1000.0 / p.ms;
    d.bytes = target.DecodeBytes(p.context);
    d.gbs = static_cast<double>(d.bytes) / (p.ms / 1000.0) / 1e9;
    d.roofline_pct = 100.0 * d.gbs / r.roofline_gbs;
    r.decode.push_back(d);
  }
  return r;
}

}  // namespace dflash
