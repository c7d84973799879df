// Committed token ids -> what a client is shown, in the same steps whether it streams or not:
// detokenise (never half a character), drop the stop tokens' text, cut at `stop` sequences,
// then (chat) split into content, reasoning and tool calls with OutputStreamParser. The deltas
// add up to the final message exactly.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "serve/stop_matcher.h"
#include "text/output_parser.h"
#include "text/tokenizer.h"

namespace dflash::serve {

class ReplyStream {
 public:
  // `chat`: the format to parse (nullopt: plain completion text). `forced_prefix`: assistant
  // text the prompt already ends with (a forced tool call opening), parsed as output.
  ReplyStream(const text::Tokenizer& tokenizer, std::vector<int32_t> stop_tokens, std::vector<std::string> stop,
              std::optional<OutputFormat> chat, const std::string& forced_prefix = "");

  OutputDelta Push(std::span<const int32_t> ids);
  OutputDelta Finish();
  bool stopped() const { return stop_.stopped(); }  // a stop sequence ended the text
  const std::string& stop_sequence() const { return stop_.matched(); }  // which one
  const std::string& text() const { return text_; }  // the raw text shown (after any cut)

 private:
  OutputDelta Feed(const std::string& text, bool final);

  text::StreamDecoder decoder_;
  std::vector<int32_t> stop_tokens_;
  StopMatcher stop_;
  std::optional<OutputStreamParser> parser_;
  std::string text_;
};

}  // namespace dflash::serve
