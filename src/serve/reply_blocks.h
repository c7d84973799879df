// A reply as the ordered blocks that Anthropic's `content` and the Responses API's `output` show:
// reasoning, text and tool calls. Streamed deltas become block events: a block opens when its
// kind of output starts, grows while that output continues, and closes when another kind starts
// or the reply ends. A tool call arrives whole from the output parser, so it opens, grows by its
// arguments and closes at once. The whole reply is the same machine fed in one delta, so a
// stream's blocks add up to the non-streamed reply's.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/output_parser.h"

namespace dflash::serve {

enum class BlockKind { kReasoning, kText, kToolCall };

struct ReplyBlock {
  BlockKind kind = BlockKind::kText;
  std::string text;           // reasoning or text; a tool call's arguments (JSON text)
  std::string call_id, name;  // tool calls
};

class BlockSequencer {
 public:
  class Sink {
   public:
    virtual ~Sink() = default;
    virtual void Open(int index, const ReplyBlock& block) = 0;  // block.text is empty
    virtual void Grow(int index, const ReplyBlock& block, std::string_view piece) = 0;  // block.text includes piece
    virtual void Close(int index, const ReplyBlock& block) = 0;
  };

  void Push(const OutputDelta& d, Sink& sink);
  void Finish(Sink& sink);  // closes the open block, if any

 private:
  void Add(BlockKind kind, std::string_view text, Sink& sink);
  void CloseOpen(Sink& sink);

  std::optional<ReplyBlock> open_;
  int index_ = -1;
};

// The blocks of a whole reply.
std::vector<ReplyBlock> ReplyBlocks(const ParsedOutput& reply);

}  // namespace dflash::serve
