// DFlash2's candidate selector (z-lab dflash 0.1.0, CandidateSelector). A DFlash2 draft does not
// propose from its logits row by row: it keeps each row's top-k logits as candidates and scores
// candidate c of row j, given the token p chosen for row j - 1 (the anchor for row 0), as
//   logit(c) + sum_r predecessor[p][r] * hidden_projection(h_j)[r] * successor[c][r]
// so the chain of proposals is decided position by position. Greedy drafting takes each row's
// best score; sampled drafting draws from softmax(scores / T) over the candidates (no top-k or
// top-p), which is then the draft distribution q of rejection sampling.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/tensor_store.h"
#include "model/config.h"

namespace dflash {

class CandidateSelector {
 public:
  // Loads candidate_selector.{predecessor,successor}_codebook (with or without ".weight", as
  // published files name them either way) and candidate_selector.hidden_projection.weight.
  CandidateSelector(const DraftConfig& config, const TensorStore& store, int vocab, int max_rows);
  // The codebooks' names in both spellings: tables read a row at a time, so load-time
  // quantisation may leave them unquantised (QuantizeMatrices' row_lookups).
  static std::span<const std::string> CodebookNames();

  int top_k() const { return top_k_; }
  // Row j's candidates from its logits ([n][vocab]) and final-normed hidden state ([n][H]),
  // j < n: the top-k logits, highest first (the lower id first among equal logits).
  void Prepare(const float* hidden, const float* logits, int n, ThreadPool& pool);
  // Row j's candidate ids (top_k of them, from the last Prepare).
  std::span<const int32_t> Candidates(int j) const;
  // Their scores given `previous`, the token chosen for row j - 1 (the anchor for j = 0).
  std::span<const float> Score(int j, int32_t previous);

 private:
  int vocab_, hidden_, rank_, top_k_, rows_ = 0;
  WeightRef predecessor_, successor_, projection_;
  std::vector<float> projected_;   // [rows][rank] hidden_projection of each row
  std::vector<int32_t> ids_;       // [rows][top_k] candidates, highest logit first
  std::vector<float> unary_;       // [rows][top_k] their logits
  std::vector<float> scores_;      // [top_k] the last Score
  std::vector<float> mixed_, code_;  // [rank] predecessor code x projected row; a successor code
  std::vector<int32_t> order_;     // [vocab] top-k scratch
};

}  // namespace dflash
