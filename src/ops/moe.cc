#include "ops/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "ops/ops.h"

namespace dflash::ops {

void RouteTopK(const float* logits, int64_t M, int num_experts, int top_k, bool renormalize,
               int32_t* experts, float* weights) {
  if (top_k < 1 || top_k > num_experts) Fail("RouteTopK: top_k ", top_k, " is outside [1, ", num_experts, "]");
  for (int64_t m = 0; m < M; ++m) {
    const float* z = logits + m * num_experts;
    int32_t* ids = experts + m * top_k;
    float* w = weights + m * top_k;
    // Softmax as torch computes it: exp(z - max) / sum. The top-k of the probabilities is the
    // top-k of the logits, so the choice is made on the logits and only k probabilities are
    // normalised.
    const float max = *std::max_element(z, z + num_experts);
    float sum = 0;
    for (int e = 0; e < num_experts; ++e) sum += std::exp(z[e] - max);
    // Selection by insertion: top_k and num_experts are small (8 of 128 for Qwen3-30B-A3B).
    int chosen = 0;
    for (int e = 0; e < num_experts; ++e) {
      int at = chosen;
      while (at > 0 && z[ids[at - 1]] < z[e]) --at;  // strict: an equal logit keeps the lower id first
      if (at >= top_k) continue;
      for (int i = std::min(chosen, top_k - 1); i > at; --i) ids[i] = ids[i - 1];
      ids[at] = e;
      chosen = std::min(chosen + 1, top_k);
    }
    float chosen_sum = 0;
    for (int j = 0; j < top_k; ++j) {
      w[j] = std::exp(z[ids[j]] - max) / sum;
      chosen_sum += w[j];
    }
    if (renormalize) {
      for (int j = 0; j < top_k; ++j) w[j] /= chosen_sum;
    }
  }
}

ExpertScratch::ExpertScratch(int64_t max_rows, int top_k, int num_experts, int64_t hidden, int64_t intermediate)
    : max_rows(max_rows), hidden(hidden), intermediate(intermediate), top_k(top_k), num_experts(num_experts) {
  const size_t slots = static_cast<size_t>(max_rows) * top_k;
  first.resize(num_experts + 1);
  next.resize(num_experts);
  slot.resize(slots);
  x.resize(slots * hidden);
  gate.resize(slots * intermediate);
  up.resize(slots * intermediate);
  out.resize(slots * hidden);
}

int MixExperts(const float* x, int64_t M, std::span<const ExpertWeights> experts, const int32_t* ids,
               const float* weights, ExpertScratch& s, float* y, ThreadPool& pool) {
  const int64_t H = s.hidden, I = s.intermediate, k = s.top_k, slots = M * k;
  if (M > s.max_rows) Fail("MixExperts: ", M, " rows, scratch holds ", s.max_rows);
  if (static_cast<int>(experts.size()) != s.num_experts) {
    Fail("MixExperts: ", experts.size(), " experts, scratch made for ", s.num_experts);
  }
  // Counting sort of the slots by expert; inside an expert, slots stay in row order.
  std::fill(s.first.begin(), s.first.end(), 0);
  for (int64_t i = 0; i < slots; ++i) {
    if (ids[i] < 0 || ids[i] >= s.num_experts) Fail("MixExperts: expert id ", ids[i], " out of range");
    ++s.first[ids[i] + 1];
  }
  for (int e = 0; e < s.num_experts; ++e) s.first[e + 1] += s.first[e];
  std::copy(s.first.begin(), s.first.end() - 1, s.next.begin());
  for (int64_t i = 0; i < slots; ++i) {
    const int32_t at = s.next[ids[i]]++;
    s.slot[i] = at;
    std::memcpy(s.x.data() + at * H, x + i / k * H, H * sizeof(float));
  }
  int touched = 0;
  for (int e = 0; e < s.num_experts; ++e) {
    const int64_t begin = s.first[e], n = s.first[e + 1] - begin;
    if (n == 0) continue;
    ++touched;
    const ExpertWeights& w = experts[e];
    float* gate = s.gate.data() + begin * I;
    float* up = s.up.data() + begin * I;
    const MatMulOutput gate_up[] = {{&w.gate, nullptr, gate}, {&w.up, nullptr, up}};
    MatMulShared(s.x.data() + begin * H, n, gate_up, pool);
    // Row by row, as the dense MLP does: an element's result never depends on where in a
    // longer vector it sat.
    for (int64_t r = 0; r < n; ++r) SiluMul(gate + r * I, up + r * I, I, gate + r * I);
    MatMul(gate, n, w.down, nullptr, s.out.data() + begin * H, pool);
  }
  // Each row sums its experts' outputs in its own choice order, never in the grouped order.
  pool.ParallelFor(M, [&](int64_t m) {
    float* ym = y + m * H;
    const float* w = weights + m * k;
    const float* first = s.out.data() + static_cast<int64_t>(s.slot[m * k]) * H;
    for (int64_t h = 0; h < H; ++h) ym[h] = w[0] * first[h];
    for (int64_t j = 1; j < k; ++j) {
      const float* o = s.out.data() + static_cast<int64_t>(s.slot[m * k + j]) * H;
      for (int64_t h = 0; h < H; ++h) ym[h] += w[j] * o[h];
    }
  });
  return touched;
}

}  // namespace dflash::ops
