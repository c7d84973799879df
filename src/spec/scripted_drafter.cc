#include "spec/scripted_drafter.h"

#include <algorithm>

#include "core/error.h"

namespace dflash {

namespace {
// A proposal's logit: far enough above the others' 0 that any temperature's softmax puts all
// its mass there, so coupled sampling draws it as greedy does.
constexpr float kHot = 1e4f;
}  // namespace

void CheckProfile(const AcceptanceProfile& profile, const std::string& where) {
  if (profile.accept_at_depth.empty()) Fail(where, ": accept_at_depth is empty");
  for (size_t d = 0; d < profile.accept_at_depth.size(); ++d) {
    const double p = profile.accept_at_depth[d];
    if (!(p >= 0 && p <= 1)) Fail(where, ": accept_at_depth[", d, "] = ", p, " is not a probability in [0, 1]");
  }
}

ScriptedDrafter::ScriptedDrafter(Drafter& inner, std::span<const int32_t> reference, const AcceptanceProfile& profile,
                                 int vocab, uint32_t seed)
    : inner_(inner),
      reference_(reference),
      profile_(profile),
      vocab_(vocab),
      rng_(seed),
      logits_(static_cast<size_t>(inner.max_block()) * vocab, 0.0f),
      hot_(inner.max_block(), -1),
      scripted_hist_(inner.max_block(), 0) {
  CheckProfile(profile_, "acceptance profile '" + profile_.name + "'");
  if (vocab < 2) Fail("scripted drafter: a vocabulary of ", vocab, " tokens has no mismatching token");
}

double ScriptedDrafter::AcceptAt(int depth) const {
  const std::vector<double>& a = profile_.accept_at_depth;
  return a[std::min<size_t>(depth - 1, a.size() - 1)];
}

void ScriptedDrafter::SetRow(int j, int32_t token) {
  float* row = logits_.data() + static_cast<size_t>(j) * vocab_;
  if (hot_[j] >= 0) row[hot_[j]] = 0.0f;
  row[token] = kHot;
  hot_[j] = token;
}

void ScriptedDrafter::Propose(int32_t anchor, int pos, int block, int proposals) {
  inner_.Propose(anchor, pos, block, proposals);  // the real pass, for its cost; its logits are unused
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  // Drafts past the reference cannot match, so the script stops there.
  const int known = std::clamp(static_cast<int>(reference_.size()) - pos - 1, 0, proposals);
  int matched = 0;
  while (matched < known && uniform(rng_) < AcceptAt(matched + 1)) ++matched;
  for (int j = 0; j < proposals; ++j) {
    const int32_t truth = j < known ? reference_[pos + 1 + j] : 0;
    // Row j matches the reference before the sampled mismatch and differs from it after.
    SetRow(j, j < matched ? truth : (truth + 1) % vocab_);
  }
  scripted_hist_[std::min(matched, static_cast<int>(scripted_hist_.size()) - 1)]++;
}

}  // namespace dflash
