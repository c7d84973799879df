#include "draft/dflash2_selector.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/error.h"
#include "ops/ops.h"

namespace dflash {

namespace {

// z-lab's package maps both names on load; published files use either.
const Tensor& Codebook(const TensorStore& store, const std::string& name, int64_t vocab, int64_t rank) {
  const std::string stem = "candidate_selector." + name;
  const std::string key = store.Find(stem) ? stem : stem + ".weight";
  return store.Require(key, {vocab, rank});
}

}  // namespace

std::span<const std::string> CandidateSelector::CodebookNames() {
  static const std::string kNames[] = {
      "candidate_selector.predecessor_codebook", "candidate_selector.predecessor_codebook.weight",
      "candidate_selector.successor_codebook", "candidate_selector.successor_codebook.weight"};
  return kNames;
}

CandidateSelector::CandidateSelector(const DraftConfig& config, const TensorStore& store, int vocab, int max_rows)
    : vocab_(vocab),
      hidden_(config.decoder.hidden_size),
      rank_(config.selector_rank),
      top_k_(config.selector_top_k) {
  if (top_k_ < 1 || top_k_ > vocab) Fail(store.origin(), ": selector_top_k ", top_k_, " outside [1, ", vocab, "]");
  predecessor_ = AsWeight(Codebook(store, "predecessor_codebook", vocab, rank_));
  successor_ = AsWeight(Codebook(store, "successor_codebook", vocab, rank_));
  projection_ = AsWeight(store.Require("candidate_selector.hidden_projection.weight", {rank_, hidden_}));
  projected_.resize(static_cast<size_t>(max_rows) * rank_);
  ids_.resize(static_cast<size_t>(max_rows) * top_k_);
  unary_.resize(static_cast<size_t>(max_rows) * top_k_);
  scores_.resize(top_k_);
  mixed_.resize(rank_);
  code_.resize(rank_);
  order_.resize(vocab);
}

void CandidateSelector::Prepare(const float* hidden, const float* logits, int n, ThreadPool& pool) {
  ops::MatMul(hidden, n, projection_, nullptr, projected_.data(), pool);
  for (int j = 0; j < n; ++j) {
    const float* row = logits + static_cast<size_t>(j) * vocab_;
    std::iota(order_.begin(), order_.end(), 0);
    const auto higher = [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); };
    std::partial_sort(order_.begin(), order_.begin() + top_k_, order_.end(), higher);
    for (int c = 0; c < top_k_; ++c) {
      ids_[static_cast<size_t>(j) * top_k_ + c] = order_[c];
      unary_[static_cast<size_t>(j) * top_k_ + c] = row[order_[c]];
    }
  }
  rows_ = n;
}

std::span<const int32_t> CandidateSelector::Candidates(int j) const {
  if (j < 0 || j >= rows_) Fail("draft: selector row ", j, " outside the ", rows_, " prepared");
  return {ids_.data() + static_cast<size_t>(j) * top_k_, static_cast<size_t>(top_k_)};
}

std::span<const float> CandidateSelector::Score(int j, int32_t previous) {
  const std::span<const int32_t> ids = Candidates(j);
  if (previous < 0 || previous >= vocab_) Fail("draft: selector predecessor ", previous, " outside the vocabulary");
  ops::DequantizeRow(predecessor_, previous, mixed_.data());
  const float* h = projected_.data() + static_cast<size_t>(j) * rank_;
  for (int r = 0; r < rank_; ++r) mixed_[r] *= h[r];
  for (int c = 0; c < top_k_; ++c) {
    ops::DequantizeRow(successor_, ids[c], code_.data());
    float dot = 0;
    for (int r = 0; r < rank_; ++r) dot += mixed_[r] * code_[r];
    scores_[c] = unary_[static_cast<size_t>(j) * top_k_ + c] + dot;
  }
  return scores_;
}

}  // namespace dflash
