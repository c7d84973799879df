// dflash: the command-line front end. Dispatches to a sub-command; errors from anywhere below
// arrive as dflash::Error with a message that names the file, field or value at fault.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>

#include "commands.h"
#include "core/error.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"generate", dflash::app::Generate, "generate text, plain or with DFlash speculative decoding"},
    {"bench", dflash::app::Bench, "plain vs DFlash on the same prompts, in one run"},
    {"tokenize", dflash::app::Tokenize, "text to token ids with a tokenizer.json"},
    {"detokenize", dflash::app::Detokenize, "token ids to text"},
    {"template", dflash::app::Template, "render a model's chat template over a conversation"},
    {"serve", dflash::app::Serve, "OpenAI-compatible HTTP server (chat, completions, metrics)"},
    {"trace", dflash::app::Trace, "record an agent session, replay it against a server, compare replays"},
    {"plan", dflash::app::Plan, "which published pair fits this machine, setup commands, predicted tok/s"},
    {"doctor", dflash::app::Doctor, "machine facts, defaults, and whether a model will load (weights unread)"},
};

void PrintUsage(FILE* out) {
  std::fprintf(out, "usage: dflash <command> [options]\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
  std::fprintf(out, "\nRun 'dflash <command> --help' for a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0) {
    PrintUsage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const Command& c : kCommands) {
    if (std::string_view(argv[1]) != c.name) continue;
    try {
      return c.run(argc - 2, argv + 2);
    } catch (const dflash::Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "error: unknown command '%s'\n\n", argv[1]);
  PrintUsage(stderr);
  return 2;
}
