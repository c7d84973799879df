// Pearson's chi-square goodness of fit, for the tests that check sampled output against an exact
// distribution: counts keyed by a tuple of tokens against the tuple's probability.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace dflash::testing {

using Tuple = std::vector<int32_t>;

// Chi-square critical value for `df` degrees of freedom at p = 1e-4 (Wilson-Hilferty): a
// correct sampler fails one check in 10,000.
inline double ChiSquareCritical(int df) {
  const double z = 3.719, a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

// The statistic of observed counts against expected probabilities, pooling cells with expected
// count < 5. Returns {statistic, degrees of freedom}.
inline std::pair<double, int> ChiSquare(const std::map<Tuple, int>& counts, const std::map<Tuple, double>& probs,
                                        int trials) {
  double stat = 0, pooled_e = 0, pooled_o = 0;
  int cells = 0;
  for (const auto& [key, p] : probs) {
    const double e = p * trials;
    auto it = counts.find(key);
    const double o = it == counts.end() ? 0 : it->second;
    if (e < 5) {
      pooled_e += e;
      pooled_o += o;
      continue;
    }
    stat += (o - e) * (o - e) / e;
    ++cells;
  }
  if (pooled_e > 0) {
    stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / std::max(pooled_e, 1e-9);
    ++cells;
  }
  return {stat, cells - 1};
}

// The marginal of the tuple elements `keep`, of a distribution or of counts.
template <typename T>
std::map<Tuple, T> Marginal(const std::map<Tuple, T>& joint, const std::vector<int>& keep) {
  std::map<Tuple, T> m;
  for (const auto& [key, v] : joint) {
    Tuple k;
    for (int i : keep) k.push_back(key[i]);
    m[k] += v;
  }
  return m;
}

}  // namespace dflash::testing
