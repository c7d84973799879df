// dflash generate: one prompt in, tokens out, plain or with DFlash; --json for scripts,
// --compare to run both modes on the same prompt and report the speedup.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "core/error.h"
#include "io/json_file.h"
#include "model_flags.h"
#include "report.h"

namespace dflash::app {

namespace {

std::vector<int32_t> ReadPromptIds(const std::string& ids, const std::string& file) {
  std::string text = ids;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) Fail(file, ": cannot open prompt file");
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  std::vector<int32_t> out;
  for (int v : ParseIntList(text, "--prompt-ids")) out.push_back(v);
  return out;
}

}  // namespace

int Generate(int argc, char** argv) {
  ModelFlags mf;
  std::string prompt_ids, prompt_file;
  bool json = false, compare = false;
  Args args("generate", "Generate from a prompt with a target model, optionally accelerated by a DFlash draft.\n"
                        "Greedy DFlash output is identical to plain greedy output; sampled output has the\n"
                        "target's distribution.");
  mf.Declare(args);
  args.Option("--prompt-ids", &prompt_ids, "1,2,3", "prompt as token ids (no tokenizer needed)");
  args.Option("--prompt-file", &prompt_file, "FILE", "file holding comma-separated prompt token ids");
  args.Flag("--json", &json, "print one JSON object with the tokens and statistics");
  args.Flag("--compare", &compare, "run plain decoding and DFlash on the same prompt and compare");
  if (!args.Parse(argc, argv)) return 0;
  if (prompt_ids.empty() && prompt_file.empty()) Fail("give a prompt: --prompt-ids or --prompt-file");
  const std::vector<int32_t> prompt = ReadPromptIds(prompt_ids, prompt_file);

  if (compare && mf.draft.empty()) Fail("--compare needs a draft (-d DIR)");
  if (compare) mf.mode = "dflash";
  dflash::Engine engine(mf.Engine());
  const GenerateOptions gen = mf.Generation(args, engine);

  if (compare) {
    GenerateOptions plain = gen;
    plain.block_size = 1;
    // Untimed warm-up of both modes, so that neither timing pays the first touch of the weights.
    GenerateOptions warm = gen;
    warm.max_new_tokens = std::min(gen.max_new_tokens, 8);
    engine.Generate(prompt, warm);
    warm.block_size = 1;
    engine.Generate(prompt, warm);
    const GenerateResult base = engine.Generate(prompt, plain);
    const GenerateResult spec = engine.Generate(prompt, gen);
    if (json) {
      Json j;
      j["plain"] = ResultJson(base, "ar");
      j["dflash"] = ResultJson(spec, "dflash");
      j["identical"] = base.tokens == spec.tokens;
      j["speedup"] = Speedup(base, spec);
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      PrintComparison(stdout, base, spec, gen.sampling.greedy());
    }
    return 0;
  }

  const std::string mode = gen.block_size > 1 ? "dflash" : "ar";
  const GenerateResult r = engine.Generate(prompt, gen);
  if (json) {
    std::printf("%s\n", ResultJson(r, mode).dump().c_str());
  } else {
    std::string ids;
    for (size_t i = 0; i < r.tokens.size(); ++i) ids += (i ? "," : "") + std::to_string(r.tokens[i]);
    std::printf("%s\n", ids.c_str());
    PrintStats(stderr, r, mode);
  }
  return 0;
}

}  // namespace dflash::app
