#include "serve/reply_blocks.h"

namespace dflash::serve {

void BlockSequencer::CloseOpen(Sink& sink) {
  if (!open_) return;
  sink.Close(index_, *open_);
  open_.reset();
}

void BlockSequencer::Add(BlockKind kind, std::string_view text, Sink& sink) {
  if (text.empty()) return;
  if (open_ && open_->kind != kind) CloseOpen(sink);
  if (!open_) {
    open_.emplace().kind = kind;
    sink.Open(++index_, *open_);
  }
  open_->text += text;
  sink.Grow(index_, *open_, text);
}

void BlockSequencer::Push(const OutputDelta& d, Sink& sink) {
  Add(BlockKind::kReasoning, d.reasoning_content, sink);
  Add(BlockKind::kText, d.content, sink);
  for (const ToolCall& call : d.tool_calls) {
    CloseOpen(sink);
    open_.emplace(ReplyBlock{BlockKind::kToolCall, "", call.id, call.name});
    sink.Open(++index_, *open_);
    open_->text = call.arguments;
    sink.Grow(index_, *open_, call.arguments);
    CloseOpen(sink);
  }
}

void BlockSequencer::Finish(Sink& sink) { CloseOpen(sink); }

std::vector<ReplyBlock> ReplyBlocks(const ParsedOutput& reply) {
  struct Collect final : BlockSequencer::Sink {
    std::vector<ReplyBlock> blocks;
    void Open(int, const ReplyBlock&) override {}
    void Grow(int, const ReplyBlock&, std::string_view) override {}
    void Close(int, const ReplyBlock& b) override { blocks.push_back(b); }
  } collect;
  BlockSequencer s;
  s.Push(OutputDelta{reply.content, reply.reasoning_content, reply.tool_calls, 0}, collect);
  s.Finish(collect);
  return std::move(collect.blocks);
}

}  // namespace dflash::serve
