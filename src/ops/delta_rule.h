// The gated delta rule of Gated DeltaNet (Qwen3.5's linear-attention layers), in its recurrent
// form: one state update per row, in row order, so a row's result never depends on how many
// rows ran together (a prefill chunk, a verify block or a decode step give the same bits).
#pragma once

#include <cstdint>

namespace dflash::ops {

// The largest head dimension GatedDeltaRule takes (its per-row scratch lives on the stack).
inline constexpr int kMaxDeltaRuleDim = 1024;

// One value head over n rows; the state S is [dk][dv] f32 (S[i] is key dim i's row). Row t:
//   S = decay_t * S;   S += k_t (x) (beta_t * (v_t - S^T k_t));   out_t = S^T q_t
// The first row reads `state_in`, every write goes to `state` (they may be the same buffer).
// q, k: row t at q + t * qk_stride ([dk]); v: v + t * v_stride ([dv]); decay, beta: one per row,
// gb_stride apart. q null: only the state is wanted (out unused).
void GatedDeltaRule(const float* state_in, float* state, int dk, int dv, int n, const float* q, const float* k,
                    int64_t qk_stride, const float* v, int64_t v_stride, const float* decay, const float* beta,
                    int64_t gb_stride, float* out, int64_t out_stride);

}  // namespace dflash::ops
