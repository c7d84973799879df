// Scripted acceptance: real-shape DFlash speed without a trained draft. The real draft network
// runs every cycle (its cost is real), but its proposals are replaced by the reference tokens
// (the plain run's own output) up to a first mismatch sampled from a per-depth acceptance
// curve, after which it proposes tokens the reference does not have. Verification is real, so
// the target accepts exactly the scripted prefix and the output stays identical to plain
// decoding; only the acceptance is modelled. `dflash bench --acceptance` uses it; every result
// it produces says the acceptance was scripted.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "spec/drafter.h"

namespace dflash {

// accept_at_depth[d - 1]: the probability that draft d is accepted given drafts 1..d-1 were;
// depths past the list repeat its last value.
struct AcceptanceProfile {
  std::string name;
  std::string source;  // where the figures come from, in words
  std::vector<double> accept_at_depth;
};

// Throws Error naming `where` and the depth when the curve is empty or a value lies outside [0, 1].
void CheckProfile(const AcceptanceProfile& profile, const std::string& where);

class ScriptedDrafter final : public Drafter {
 public:
  // `reference` is the whole token sequence greedy decoding produces (prompt, then output),
  // indexed by position; `inner` and `reference` must outlive the drafter. Proposals for
  // positions past the reference are mismatches. Only greedy (or coupled, reproducible)
  // decoding accepts exactly the scripted prefix: the proposals are one-hot logits.
  ScriptedDrafter(Drafter& inner, std::span<const int32_t> reference, const AcceptanceProfile& profile,
                  int vocab, uint32_t seed);

  int max_block() const override { return inner_.max_block(); }
  int max_append() const override { return inner_.max_append(); }
  void AppendContext(const float* features, int n, int pos) override { inner_.AppendContext(features, n, pos); }
  void Propose(int32_t anchor, int pos, int block, int proposals) override;
  const float* Logits(int j) const override { return logits_.data() + static_cast<size_t>(j) * vocab_; }

  // [k] = Propose calls whose script matched exactly k drafts, for any number of proposals.
  const std::vector<int>& scripted_hist() const { return scripted_hist_; }

 private:
  double AcceptAt(int depth) const;  // depth >= 1
  void SetRow(int j, int32_t token);

  Drafter& inner_;
  std::span<const int32_t> reference_;
  AcceptanceProfile profile_;
  int vocab_;
  std::mt19937_64 rng_;
  std::vector<float> logits_;  // [max_block][vocab], one-hot rows
  std::vector<int32_t> hot_;   // the token each row is hot at (-1: none yet)
  std::vector<int> scripted_hist_;
};

}  // namespace dflash
