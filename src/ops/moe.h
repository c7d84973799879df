// Mixture-of-experts kernels: a router's top-k choice, and the experts' MLPs run grouped by
// expert so that a pass reads each touched expert's weights once, however many rows chose it.
// Like every kernel here they are batch-invariant (ops.h): a row's result is bitwise the same
// whichever other rows share the pass and its experts.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace dflash::ops {

// One expert's SwiGLU MLP, down(silu(gate x) * up x): [I, H], [I, H], [H, I].
struct ExpertWeights {
  WeightRef gate, up, down;
};

// For each of M rows of `num_experts` router logits: softmax, then the top_k largest
// probabilities (largest first, equal ones by lower expert id), divided by their sum when
// `renormalize`. experts, weights: [M][top_k].
void RouteTopK(const float* logits, int64_t M, int num_experts, int top_k, bool renormalize,
               int32_t* experts, float* weights);

// MixExperts' buffers for passes of up to max_rows rows, allocated once by the pass's owner.
// "Slots" are (row, choice) pairs, max_rows * top_k of them, held in expert order.
struct ExpertScratch {
  ExpertScratch(int64_t max_rows, int top_k, int num_experts, int64_t hidden, int64_t intermediate);
  int64_t max_rows, hidden, intermediate;
  int top_k, num_experts;
  std::vector<int32_t> first;        // [E + 1] each expert's first slot, in expert order
  std::vector<int32_t> next;         // [E] the next free slot of each expert while grouping
  std::vector<int32_t> slot;         // [R * k] where choice (row * k + j) sits in expert order
  std::vector<float> x, gate, up, out;  // [R * k][H], [R * k][I], [R * k][I], [R * k][H]
};

// y[m] = sum over j < top_k, in j order, of weights[m][j] * expert ids[m][j] applied to x[m];
// x, y: [M][H] (y may alias x: x is gathered first). The rows that chose an expert are
// gathered and its three matrices run once over all of them with MatMul's batch-invariant kernels. Returns how many
// distinct experts the pass touched: how many experts' weights it read.
int MixExperts(const float* x, int64_t M, std::span<const ExpertWeights> experts, const int32_t* ids,
               const float* weights, ExpertScratch& scratch, float* y, ThreadPool& pool);

}  // namespace dflash::ops
