#include "serve/stop_matcher.h"

#include <algorithm>

namespace dflash::serve {

std::string StopMatcher::Push(std::string_view text) {
  if (stopped_) return {};
  held_.append(text);
  size_t first = std::string::npos;
  for (const std::string& s : stops_) {
    const size_t at = held_.find(s);
    if (at < first) {
      first = at;
      matched_ = s;
    }
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop sequence.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t k = std::min(s.size() - 1, held_.size()); k > hold; --k) {
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopMatcher::Finish() {
  std::string out;
  out.swap(held_);
  return stopped_ ? std::string() : out;
}

}  // namespace dflash::serve
