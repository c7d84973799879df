#include "plan/analytic_costs.h"

#include <algorithm>

#include "core/error.h"

namespace dflash::plan {

namespace {

// Attention multiply-adds of one row over `positions` keys: scores and value sums.
double AttentionMacs(const ModelShape& s, int64_t positions) {
  const int64_t full = s.full_attention_layers - s.sliding_layers;
  const double per_layer = 2.0 * s.heads * s.head_dim;
  return per_layer * (full * double(positions) + s.sliding_layers * double(std::min<int64_t>(positions, s.sliding_window)));
}

double Seconds(double bytes, double macs, const WeightFormat& f, const MachineRates& m) {
  const double gmacs = f.int8_kernels && m.int8_gmacs > 0 ? m.int8_gmacs : m.f32_gmacs;
  return bytes / (m.bandwidth_gbs * 1e9) + macs / (gmacs * 1e9 * kComputeEfficiency);
}

}  // namespace

StepCosts AnalyticCosts(const ModelShape& target, const ModelShape& draft, const WeightFormat& format,
                        int64_t context, int kv_bytes, const MachineRates& machine) {
  if (!(machine.bandwidth_gbs > 0) || !(machine.f32_gmacs > 0)) {
    Fail("cost model: bandwidth (", machine.bandwidth_gbs, " GB/s) and compute peak (", machine.f32_gmacs,
         " GMAC/s) must be positive");
  }
  const ParamCount tp = CountParams(target), dp = CountParams(draft);
  // A step reads its active layers, the LM head (the tied embedding when there is none) and
  // one embedding row, the KV at the context and the recurrent state; it multiplies each
  // weight once per row.
  const double head = tp.lm_head > 0 ? tp.lm_head : tp.embedding;
  const double step_weights = tp.layers_per_token + head;
  const double step_bytes = step_weights * format.bytes_per_weight + KvCacheBytes(target, context, kv_bytes) +
                            RecurrentStateBytes(target);
  const double row_macs = step_weights + AttentionMacs(target, context);
  const double step_s = Seconds(step_bytes, row_macs, format, machine);
  const double row_s = Seconds(0, row_macs, format, machine);

  // A draft pass: its own layers and the shared LM head once for the block, block rows of work,
  // attention over its context cache (f32) plus the block.
  const int block = std::max(draft.block_size, 2);
  const double draft_cache = 2.0 * draft.layers * draft.kv_heads * draft.head_dim * 4.0 * double(context);
  const double draft_bytes = (dp.layers_per_token + head) * format.bytes_per_weight + draft_cache;
  const double draft_row_macs = dp.layers_per_token + head + AttentionMacs(draft, context + block);
  const double draft_s = Seconds(draft_bytes, block * draft_row_macs, format, machine);
  // The loop's own work: a pick reads a row of f32 logits; an append multiplies one row of
  // captured features by the draft's fc and each layer's K and V projections.
  const double pick_s = 4.0 * target.vocab / (machine.bandwidth_gbs * 1e9);
  const double append_weights = double(draft.capture_layers) * draft.hidden * draft.hidden +
                                2.0 * draft.layers * draft.hidden * draft.kv_heads * draft.head_dim;
  const double append_s = Seconds(append_weights * format.bytes_per_weight, append_weights, format, machine);
  // A MoE verify's rows read distinct experts (cost_model.h): the experts' share of a step is
  // the time their top_k reads take, and the per-row slope applies to the rest.
  ExpertCosts moe;
  if (target.moe) {
    const MoeShape& m = *target.moe;
    const double expert_bytes =
        double(target.layers) * m.experts_per_token * 3.0 * target.hidden * m.expert_intermediate * format.bytes_per_weight;
    moe = {m.experts, m.experts_per_token, std::min(0.95, expert_bytes / (machine.bandwidth_gbs * 1e9) / step_s), 0.0};
  }
  return {step_s * 1e3, draft_s * 1e3, row_s / (step_s * (1 - moe.share)), pick_s * 1e3, append_s * 1e3, moe};
}

std::vector<std::string> AnalyticAssumptions() {
  return {
      "a decode step reads every active weight, the LM head, the KV cache at the context and any recurrent state "
      "once, at the measured streaming bandwidth",
      "matrix and attention work runs at " + std::to_string(int(kComputeEfficiency * 100)) +
          "% of the measured compute peak (int8 peak for q8_0/q4_0/q4_k, f32 otherwise), added to the read time",
      "a verify of k rows costs t_step * (1 + slope * (k - 1)): the weights are read once, the work grows per row; "
      "on a MoE target the routed experts' share s of a step becomes s * D(k) / top_k, D(k) = E (1 - (1 - top_k/E)^k) "
      "distinct experts under uniform routing (the worst case)",
      "a draft pass reads the draft and the shared LM head once and computes a whole block of rows",
      "the loop's own work: a pick reads a row of logits, a draft-context append reads the draft's fc and K/V "
      "projections once per plain step or cycle",
      "acceptance falls geometrically with draft depth, matched to the reported tau at the full block",
      "tau comes from z-lab's GPU runs (greedy, thinking off); acceptance does not depend on the hardware, but "
      "does on the prompts",
  };
}

}  // namespace dflash::plan
