// dflash generate: one prompt in, tokens out, plain or with DFlash; --json for scripts,
// --compare to run both modes on the same prompt and report the speedup.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/json_file.h"
#include "model_flags.h"
#include "open_tokenizer.h"
#include "report.h"
#include "text/chat_prompt.h"
#include "text/tokenizer.h"

namespace dflash::app {

namespace {

using text::StreamDecoder;
using text::Tokenizer;

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

nlohmann::ordered_json ParseJsonArg(const std::string& text, const std::string& what) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    Fail(what, ": malformed JSON: ", e.what());
  }
}

// --chat: the prompt (or --messages FILE) as a conversation through the model's own template.
ChatPrompt BuildChat(const std::string& prompt_text, const std::string& system, const std::string& messages_file,
                     const std::string& kwargs_text, const std::string& template_dir, const Tokenizer& tok) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!messages_file.empty()) {
    std::ifstream in(messages_file);
    if (!in) Fail(messages_file, ": cannot open messages file");
    std::stringstream ss;
    ss << in.rdbuf();
    messages = ParseJsonArg(ss.str(), messages_file);
    if (!messages.is_array()) Fail(messages_file, ": expected a JSON array of messages");
  } else {
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    messages.push_back({{"role", "user"}, {"content", prompt_text}});
  }
  const auto kwargs = kwargs_text.empty() ? nlohmann::ordered_json::object() : ParseJsonArg(kwargs_text, "--chat-kwargs");
  if (!kwargs.is_object()) Fail("--chat-kwargs: expected a JSON object, got ", kwargs.dump());
  return BuildChatPrompt(ChatTemplate::FromDirectory(template_dir), tok, messages, nullptr, kwargs);
}

}  // namespace

// The tokenizer that ships with the model (or --tokenizer DIR): tokenizer.json in the
// model directory, or a .gguf's own tokenizer.ggml.* metadata; none when neither has one.
std::optional<Tokenizer> LoadTokenizer(const std::string& flag_dir, const std::string& model_dir) {
  if (!flag_dir.empty()) return OpenTokenizer(flag_dir);
  if (IsGgufPath(model_dir)) {
    const GgufModel gguf = LoadGguf(model_dir);
    if (!gguf.metadata.contains("tokenizer.ggml.tokens")) return std::nullopt;
    return Tokenizer::FromGguf(gguf.metadata, model_dir);
  }
  if (std::filesystem::exists(model_dir + "/tokenizer.json")) return Tokenizer::Load(model_dir);
  return std::nullopt;
}

int Generate(int argc, char** argv) {
  ModelFlags mf;
  std::string prompt_text, prompt_ids, prompt_file, tokenizer_dir, system, messages_file, chat_kwargs;
  bool json = false, compare = false, chat = false;
  Args args("generate", "Generate from a prompt with a target model, optionally accelerated by a DFlash draft.\n"
                        "Greedy DFlash output is identical to plain greedy output; sampled output has the\n"
                        "target's distribution.");
  mf.Declare(args);
  args.Option("-p,--prompt", &prompt_text, "TEXT", "prompt text (needs the model's tokenizer.json, a GGUF tokenizer, or --tokenizer)");
  args.Option("--prompt-ids", &prompt_ids, "1,2,3", "prompt as token ids (no tokenizer needed)");
  args.Option("--tokenizer", &tokenizer_dir, "DIR", "tokenizer directory or .gguf (default: the model's own)");
  args.Option("--prompt-file", &prompt_file, "FILE", "file holding comma-separated prompt token ids");
  args.Flag("--chat", &chat, "wrap --prompt as a user message in the model's chat template");
  args.Option("--system", &system, "TEXT", "system message for --chat");
  args.Option("--messages", &messages_file, "FILE", "JSON array of chat messages (implies --chat)");
  args.Option("--chat-kwargs", &chat_kwargs, "JSON", "chat template variables, e.g. '{\"enable_thinking\":false}'");
  args.Flag("--json", &json, "print one JSON object with the tokens and statistics");
  args.Flag("--compare", &compare, "run plain decoding and DFlash on the same prompt and compare");
  if (!args.Parse(argc, argv)) return 0;
  if (!messages_file.empty()) chat = true;
  if (prompt_text.empty() + prompt_ids.empty() + prompt_file.empty() + messages_file.empty() != 3) {
    Fail("give exactly one prompt: --prompt, --prompt-ids, --prompt-file or --messages");
  }
  if (chat && prompt_text.empty() && messages_file.empty()) Fail("--chat needs --prompt TEXT or --messages FILE");
  if (!chat && (!system.empty() || !chat_kwargs.empty())) Fail("--system and --chat-kwargs need --chat");
  if (mf.model.empty()) Fail("-m/--model is required");
  const std::optional<Tokenizer> tok = LoadTokenizer(tokenizer_dir, mf.model);
  if ((chat || !prompt_text.empty()) && !tok) {
    Fail(mf.model, ": no tokenizer.json for --prompt/--chat (give --tokenizer DIR, or --prompt-ids)");
  }
  std::vector<int32_t> prompt;
  std::optional<ChatPrompt> chat_prompt;
  if (chat) {
    chat_prompt = BuildChat(prompt_text, system, messages_file, chat_kwargs,
                            tokenizer_dir.empty() ? mf.model : tokenizer_dir, *tok);
    prompt = chat_prompt->ids;
    prompt_text = chat_prompt->text;
  } else if (prompt_text.empty()) {
    prompt = ReadPromptIds(prompt_ids, prompt_file);
  } else {
    if (tok->add_bos() && tok->bos_id() >= 0) prompt.push_back(tok->bos_id());
    const std::vector<int32_t> ids = tok->Encode(prompt_text);
    prompt.insert(prompt.end(), ids.begin(), ids.end());
  }

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
      if (tok) j["text"] = tok->Decode(spec.tokens);
      if (gen.sampling.same_tokens_as_plain()) j["identical"] = base.tokens == spec.tokens;  // else two samples
      j["speedup"] = Speedup(base, spec);
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      if (tok) std::printf("%s%s\n", prompt_text.c_str(), tok->Decode(spec.tokens).c_str());
      PrintComparison(stdout, base, spec, gen.sampling);
    }
    return 0;
  }

  const std::string mode = gen.block_size > 1 ? "dflash" : "ar";
  if (tok && !json) {
    // Stream text as tokens are committed; the decoder holds back half a UTF-8 character.
    StreamDecoder stream(*tok);
    std::printf("%s", prompt_text.c_str());
    const GenerateResult r = engine.Generate(prompt, gen, [&](std::span<const int32_t> ids) {
      for (int32_t id : ids) std::fputs(stream.Push(id).c_str(), stdout);
      std::fflush(stdout);
      return true;
    });
    std::printf("%s\n", stream.Flush().c_str());
    PrintStats(stderr, r, mode);
    return 0;
  }
  const GenerateResult r = engine.Generate(prompt, gen);
  if (json) {
    Json j = ResultJson(r, mode);
    if (tok) j["text"] = tok->Decode(r.tokens);
    if (chat_prompt) j["message"] = ParseOutput(j["text"].get<std::string>(), chat_prompt->output).ToMessage();
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::string ids;
    for (size_t i = 0; i < r.tokens.size(); ++i) ids += (i ? "," : "") + std::to_string(r.tokens[i]);
    std::printf("%s\n", ids.c_str());
    PrintStats(stderr, r, mode);
  }
  return 0;
}

}  // namespace dflash::app
