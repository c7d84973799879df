#include "bench/verify_cost.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace dflash {

namespace {

// Deterministic filler tokens: the cost of a pass does not depend on which tokens they are.
std::vector<int32_t> FillerTokens(int n, int vocab, int offset) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = static_cast<int32_t>((1103515245u * (i + offset) + 12345u) % vocab);
  return t;
}

double TimeForwardMs(TargetModel& target, std::span<const int32_t> tokens) {
  const auto t0 = std::chrono::steady_clock::now();
  target.Forward(tokens, /*all_logits=*/true);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

PassMacs CountPassMacs(const DecoderConfig& c, int context, int rows, const MoeConfig& moe) {
  const double H = c.hidden_size, I = c.intermediate_size, hd = c.head_dim;
  const double q_dim = c.num_heads * hd, kv_dim = c.num_kv_heads * hd;
  const double attention_matrices = H * (q_dim + 2 * kv_dim) + q_dim * H;
  // Per row of a sparse layer: the router, top_k experts and the shared expert with its gate.
  const double sparse_mlp = H * moe.num_experts + 3.0 * moe.top_k * moe.intermediate_size * H +
                            (moe.shared_intermediate_size > 0 ? 3.0 * moe.shared_intermediate_size * H + H : 0);
  PassMacs m;
  m.matmul = rows * (c.num_layers * attention_matrices + static_cast<double>(c.vocab_size) * H);
  for (int l = 0; l < c.num_layers; ++l) {
    const bool sparse = moe.num_experts > 0 && moe.sparse[l];
    (sparse ? m.experts : m.matmul) += rows * (sparse ? sparse_mlp : 3 * I * H);
  }
  for (int l = 0; l < c.num_layers; ++l) {
    // A hybrid's linear-attention layers read no KV (their state work is the linear_attn stage).
    if (!c.layer_linear.empty() && c.layer_linear[l]) continue;
    const int window = c.layer_window.empty() ? 0 : c.layer_window[l];
    for (int r = 0; r < rows; ++r) {
      const int keys = context + r + 1;
      m.attention += 2.0 * c.num_heads * hd * (window > 0 ? std::min(keys, window) : keys);
    }
  }
  return m;
}

std::vector<VerifyCostPoint> MeasureVerifyCost(TargetModel& target, std::vector<int> contexts,
                                               std::vector<int> rows, int repeats,
                                               const Progress& progress, bool profile) {
  std::sort(contexts.begin(), contexts.end());
  std::sort(rows.begin(), rows.end());
  if (rows.empty() || rows.front() != 1) rows.insert(rows.begin(), 1);  // the reference pass
  if (repeats < 1) Fail("verify cost: repeats must be at least 1");
  const int vocab = target.config().vocab_size;
  for (int r : rows) {
    if (r < 1 || r > target.max_rows()) Fail("verify cost: ", r, " rows exceed the target's max rows per pass (", target.max_rows(), ")");
  }
  if (!contexts.empty() && contexts.back() + rows.back() > target.kv_capacity()) {
    Fail("verify cost: context ", contexts.back(), " + ", rows.back(), " rows exceeds the KV capacity ",
         target.kv_capacity(), " (raise --ctx)");
  }
  std::vector<VerifyCostPoint> points;
  for (int ctx : contexts) {
    target.FillSyntheticKv(ctx);
    std::vector<std::vector<int32_t>> blocks;
    for (int r : rows) {
      blocks.push_back(FillerTokens(r, vocab, ctx + 7));
      TimeForwardMs(target, blocks.back());  // warm-up
      target.Truncate(ctx);
    }
    // Row counts take turns, round by round, so that a machine whose speed drifts over seconds
    // (shared hosts do) slows every row count alike instead of whichever was timed then.
    std::vector<VerifyCostPoint> at_ctx(rows.size());
    std::vector<std::vector<double>> times(rows.size());
    for (int i = 0; i < repeats; ++i) {
      for (size_t k = 0; k < rows.size(); ++k) {
        target.set_profile(profile ? &at_ctx[k].stages : nullptr);
        times[k].push_back(TimeForwardMs(target, blocks[k]));
        target.set_profile(nullptr);
        target.Truncate(ctx);
      }
      if (progress) progress("timing rounds", i + 1, repeats);
    }
    for (size_t k = 0; k < rows.size(); ++k) {
      VerifyCostPoint& p = at_ctx[k];
      for (double& ms : p.stages.ms) ms /= repeats;
      p.stages.experts_read /= repeats;
      std::sort(times[k].begin(), times[k].end());
      p.context = ctx;
      p.rows = rows[k];
      p.ms = times[k][times[k].size() / 2];
      p.ms_min = times[k].front();
      p.ms_max = times[k].back();
      p.ratio = p.ms / at_ctx[0].ms;  // rows[0] is 1
      points.push_back(p);
    }
  }
  target.Truncate(0);
  return points;
}

}  // namespace dflash
