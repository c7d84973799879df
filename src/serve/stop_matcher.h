// OpenAI `stop` sequences over text that arrives in pieces: the output ends before the first
// occurrence of any of them, and a suffix that could still turn into one is held back, so a
// stream never shows text that the final answer drops.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dflash::serve {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // The text now certain to come before any stop sequence. After a match it returns the text
  // before the match, stopped() turns true and later pushes return nothing.
  std::string Push(std::string_view text);
  std::string Finish();  // what was held back (no stop sequence completed)
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }  // the stop sequence found, once stopped

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace dflash::serve
