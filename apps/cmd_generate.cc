// dflash generate: one prompt in, tokens out, plain or with DFlash; --json for scripts,
// --compare to run both modes on the same prompt and report the speedup.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "commands.h"
#include "core/error.h"
#include "io/json_file.h"
#include "model_flags.h"
#include "open_tokenizer.h"
#include "report.h"
#include "text/chat_prompt.h"
#include "text/tokenizer.h"

namespace dflash::app {

namespace {

using text::StreamDecoder;

std::string ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(path, ": cannot open ", what);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// --prompt-ids: "1,2,3", or "@FILE" for a file holding such a list.
std::vector<int32_t> ParsePromptIds(const std::string& spec) {
  const bool from_file = spec.starts_with("@");
  const std::string text = from_file ? ReadFile(spec.substr(1), "prompt ids file") : spec;
  std::vector<int32_t> out;
  for (int v : ParseIntList(text, from_file ? "--prompt-ids " + spec : "--prompt-ids")) out.push_back(v);
  return out;
}

nlohmann::ordered_json ParseJsonArg(const std::string& text, const std::string& what) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    Fail(what, ": malformed JSON: ", e.what());
  }
}

// --chat: the prompt (or --messages FILE) as a conversation through the model's own template.
ChatPrompt BuildChat(const std::string& prompt_text, const std::string& system, const std::string& messages_file,
                     const std::string& kwargs_text, ModelText& model_text) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!messages_file.empty()) {
    messages = ParseJsonArg(ReadFile(messages_file, "messages file"), messages_file);
    if (!messages.is_array()) Fail(messages_file, ": expected a JSON array of messages");
  } else {
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    messages.push_back({{"role", "user"}, {"content", prompt_text}});
  }
  const auto kwargs = kwargs_text.empty() ? nlohmann::ordered_json::object() : ParseJsonArg(kwargs_text, "--chat-kwargs");
  if (!kwargs.is_object()) Fail("--chat-kwargs: expected a JSON object, got ", kwargs.dump());
  return model_text.Chat(messages, kwargs);
}

// The notes that are not empty, as a JSON array.
Json Notes(std::initializer_list<std::string> notes) {
  Json out = Json::array();
  for (const std::string& n : notes) {
    if (!n.empty()) out.push_back(n);
  }
  return out;
}

// Weights of a Qwen3-style decoder (embedding, layers, untied LM head), norms included.
int64_t ParameterCount(const DecoderConfig& c) {
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t attention = h * q * 2 + h * kv * 2 + 2 * c.head_dim;
  const int64_t mlp = 3 * h * c.intermediate_size;
  const int64_t embedding = int64_t{c.vocab_size} * h;
  return embedding * (c.tie_word_embeddings ? 1 : 2) + c.num_layers * (attention + mlp + 2 * h) + h;
}

// --compare's header: what the run shows, above the output (make run's demo). A model as small as
// the shipped demo pair loops on its own greedy text; what it shows is speed and exactness.
void PrintCompareHeader(const ModelFlags& mf, const dflash::Engine& engine, bool same_tokens) {
  const int64_t params = ParameterCount(engine.target_config().decoder);
  std::printf("Comparing plain decoding with DFlash speculative decoding on the same prompt.\n"
              "target: %s (%.1fM parameters); draft: %s\n"
              "Below: DFlash's output, then each mode's speed, the speedup and tau (tokens per DFlash cycle)%s\n",
              mf.model.c_str(), params / 1e6, mf.draft.c_str(),
              same_tokens ? ",\nand whether the two outputs are identical: DFlash must emit exactly plain decoding's tokens."
                          : ".");
  if (params < 100'000'000) {
    std::printf("A model this small repeats itself: judge the speed and the identical output, not the text.\n");
  }
  std::printf("\n");
}

// One generation from an empty sequence, with prefill progress on a terminal. The streamed
// text starts after the prefill so that the progress line does not overwrite it.
GenerateResult Run(dflash::Engine& engine, Sequence& seq, std::span<const int32_t> prompt,
                   const GenerateOptions& gen, const TokenSink& sink = {}) {
  seq.tokens.clear();
  GenerateHooks hooks;
  hooks.sink = sink;
  hooks.progress = [](int done, int total) {
    ShowProgress("prefill", done, total);
    return true;
  };
  return engine.Continue(seq, prompt, gen, hooks);
}

void PrintEarlyStop(const std::string& note) {
  if (!note.empty()) std::fprintf(stderr, "note: %s\n", note.c_str());
}

}  // namespace

int Generate(int argc, char** argv) {
  ModelFlags mf;
  std::string prompt_text, prompt_ids, prompt_file, tokenizer_dir, system, messages_file, chat_kwargs;
  bool json = false, compare = false, chat = false;
  Args args("generate", "Generate from a prompt with a target model, optionally accelerated by a DFlash draft.\n"
                        "Greedy DFlash output is identical to plain greedy output; sampled output has the\n"
                        "target's distribution.");
  mf.Declare(args);
  args.Option("-p,--prompt", &prompt_text, "TEXT", "prompt text (needs the model's tokenizer.json, a GGUF tokenizer, or --tokenizer)");
  args.Option("-f,--prompt-file", &prompt_file, "FILE", "prompt text read from FILE, as --prompt (for token ids use --prompt-ids @FILE)");
  args.Option("--prompt-ids", &prompt_ids, "1,2,3|@FILE", "prompt as token ids, or @FILE holding them (no tokenizer needed)");
  args.Option("--tokenizer", &tokenizer_dir, "DIR", "tokenizer directory or .gguf (default: the model's own)");
  args.Flag("--chat", &chat, "wrap the prompt as a user message in the model's chat template");
  args.Option("--system", &system, "TEXT", "system message for --chat");
  args.Option("--messages", &messages_file, "FILE", "JSON array of chat messages (implies --chat)");
  args.Option("--chat-kwargs", &chat_kwargs, "JSON", "chat template variables, e.g. '{\"enable_thinking\":false}'");
  args.Flag("--json", &json, "print one JSON object with the tokens and statistics");
  args.Flag("--compare", &compare, "run plain decoding and DFlash on the same prompt and compare");
  if (!args.Parse(argc, argv)) return 0;
  if (!messages_file.empty()) chat = true;
  if (prompt_text.empty() + prompt_ids.empty() + prompt_file.empty() + messages_file.empty() != 3) {
    Fail("give exactly one prompt: --prompt, --prompt-file, --prompt-ids or --messages");
  }
  if (!prompt_file.empty()) prompt_text = ReadFile(prompt_file, "prompt file");
  if (chat && prompt_text.empty() && messages_file.empty()) Fail("--chat needs --prompt TEXT, --prompt-file or --messages FILE");
  if (!chat && (!system.empty() || !chat_kwargs.empty())) Fail("--system and --chat-kwargs need --chat");
  if (compare && mf.draft.empty()) Fail("--compare needs a draft (-d DIR)");
  if (compare) mf.mode = "dflash";
  const EngineOptions engine_options = mf.Engine();  // flags and paths checked before any loading

  ModelText model_text(tokenizer_dir, mf.model);
  std::vector<int32_t> prompt;
  std::optional<ChatPrompt> chat_prompt;
  if (chat) {
    chat_prompt = BuildChat(prompt_text, system, messages_file, chat_kwargs, model_text);
    prompt = chat_prompt->ids;
    prompt_text = chat_prompt->text;
  } else if (prompt_text.empty()) {
    prompt = ParsePromptIds(prompt_ids);
  } else {
    prompt = model_text.Encode(prompt_text);
  }
  const std::optional<text::Tokenizer>& tok = model_text.tokenizer();

  ShowStatus("loading " + mf.model + (mf.draft.empty() ? "" : " and " + mf.draft) + " ...", false);
  dflash::Engine engine(engine_options);
  ShowStatus("loaded " + mf.model + (mf.draft.empty() ? "" : " and " + mf.draft), true);
  const std::string context_warning = WarnIfContextUntrained(engine);
  const GenerateOptions gen = mf.Generation(args, engine);
  Sequence seq = engine.NewSequence();
  const auto early_stop = [&](const GenerateResult& r) {
    return EarlyStopNote(r, gen.max_new_tokens, engine.options().context);
  };

  if (compare) {
    GenerateOptions plain = gen;
    plain.block_size = 1;
    // Untimed warm-up of both modes, so that neither timing pays the first touch of the weights.
    GenerateOptions warm = gen;
    warm.max_new_tokens = std::min(gen.max_new_tokens, 8);
    Run(engine, seq, prompt, warm);
    warm.block_size = 1;
    Run(engine, seq, prompt, warm);
    const GenerateResult base = Run(engine, seq, prompt, plain);
    const GenerateResult spec = Run(engine, seq, prompt, gen);
    const std::string note = early_stop(spec);
    if (json) {
      Json j;
      j["plain"] = ResultJson(base, "ar");
      j["dflash"] = ResultJson(spec, "dflash");
      if (tok) j["text"] = tok->Decode(spec.tokens);
      if (gen.sampling.same_tokens_as_plain()) j["identical"] = base.tokens == spec.tokens;  // else two samples
      j["speedup"] = Speedup(base, spec);
      j["notes"] = Notes({context_warning, note});
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      PrintCompareHeader(mf, engine, gen.sampling.same_tokens_as_plain());
      if (tok) std::printf("%s%s\n", prompt_text.c_str(), tok->Decode(spec.tokens).c_str());
      PrintComparison(stdout, base, spec, gen.sampling);
    }
    PrintEarlyStop(note);
    return 0;
  }

  const std::string mode = gen.block_size > 1 ? "dflash" : "ar";
  if (tok && !json) {
    // Stream text as tokens are committed; the decoder holds back half a UTF-8 character.
    StreamDecoder stream(*tok);
    bool echoed = false;
    const GenerateResult r = Run(engine, seq, prompt, gen, [&](std::span<const int32_t> ids) {
      if (!echoed) std::fputs(prompt_text.c_str(), stdout);
      echoed = true;
      for (int32_t id : ids) std::fputs(stream.Push(id).c_str(), stdout);
      std::fflush(stdout);
      return true;
    });
    std::printf("%s\n", stream.Flush().c_str());
    PrintStats(stderr, r, mode);
    PrintEarlyStop(early_stop(r));
    return 0;
  }
  const GenerateResult r = Run(engine, seq, prompt, gen);
  const std::string note = early_stop(r);
  if (json) {
    Json j = ResultJson(r, mode);
    if (tok) j["text"] = tok->Decode(r.tokens);
    if (chat_prompt) j["message"] = ParseOutput(j["text"].get<std::string>(), chat_prompt->output).ToMessage();
    j["notes"] = Notes({context_warning, note});
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::string ids;
    for (size_t i = 0; i < r.tokens.size(); ++i) ids += (i ? "," : "") + std::to_string(r.tokens[i]);
    std::printf("%s\n", ids.c_str());
    PrintStats(stderr, r, mode);
  }
  PrintEarlyStop(note);
  return 0;
}

}  // namespace dflash::app
