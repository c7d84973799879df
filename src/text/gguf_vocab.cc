#include "text/gguf_vocab.h"


#include "core/error.h"
#include "text/tokenizer.h"

namespace dflash::text {

namespace {

// Qwen2/2.5/3 (tokenizer.ggml.pre = "qwen2"): single digits.
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5/3.6 ("qwen35", llama.cpp's llama-vocab.cpp): Qwen2's with combining marks (\p{M})
// kept inside words, as the models' tokenizer.json has it.
constexpr const char* kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Llama 3 ("llama-bpe"): digits in runs of up to three.
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

enum TokenType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

const Json& Require(const Json& meta, const std::string& key, const std::string& path) {
  if (!meta.contains(key)) Fail(path, ": GGUF metadata '", key, "' is missing (no tokenizer in this file?)");
  return meta.at(key);
}

Json ByteLevel(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", use_regex}};
}

}  // namespace

Json GgufPreTokenizer(const std::string& pre, const std::string& path) {
  auto split_then_bytes = [](const char* pattern) {
    return Json{{"type", "Sequence"},
                {"pretokenizers",
                 {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                  ByteLevel(false)}}};
  };
  if (pre == "qwen2") return split_then_bytes(kQwen2Pattern);
  if (pre == "qwen35") return split_then_bytes(kQwen35Pattern);
  if (pre == "llama-bpe") return split_then_bytes(kLlama3Pattern);
  if (pre == "gpt2" || pre == "default") return ByteLevel(true);
  Fail(path, ": tokenizer.ggml.pre '", pre, "' is not supported (qwen2, qwen35, llama-bpe, gpt2, default)");
}

Json GgufNormalizer(const std::string& pre) {
  // Qwen's tokenizer.json composes text to NFC first; the others do not normalise.
  return pre == "qwen2" || pre == "qwen35" ? Json{{"type", "NFC"}} : Json();
}

Json TokenizerJsonFromGguf(const Json& meta, const std::string& path) {
  const Json& model = Require(meta, "tokenizer.ggml.model", path);
  if (model != Json("gpt2")) {
    Fail(path, ": tokenizer.ggml.model ", JsonSummary(model), " is not supported (gpt2: byte-level BPE)");
  }
  const Json& tokens = Require(meta, "tokenizer.ggml.tokens", path);
  const Json& merges = Require(meta, "tokenizer.ggml.merges", path);
  if (!tokens.is_array() || !merges.is_array()) Fail(path, ": tokenizer.ggml.tokens and .merges must be arrays");
  const Json types = meta.value("tokenizer.ggml.token_type", Json());
  if (!types.is_null() && (!types.is_array() || types.size() != tokens.size())) {
    Fail(path, ": tokenizer.ggml.token_type must list one type per token (", tokens.size(), ")");
  }
  const Json& pre_name = meta.value("tokenizer.ggml.pre", Json("default"));
  if (!pre_name.is_string()) Fail(path, ": tokenizer.ggml.pre is not a string");
  const std::string pre = pre_name.get<std::string>();

  Json vocab = Json::object(), added = Json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (!tokens[id].is_string()) Fail(path, ": tokenizer.ggml.tokens[", id, "] is not a string");
    const std::string& tok = tokens[id].get_ref<const std::string&>();
    const int type = types.is_null() ? kNormal : types[id].is_number_integer() ? types[id].get<int>() : -1;
    switch (type) {
      case kNormal:
        if (vocab.contains(tok)) Fail(path, ": tokenizer.ggml.tokens[", id, "] '", tok, "' appears twice");
        vocab[tok] = id;
        break;
      case kControl:
      case kUserDefined:
        // GGUF drops tokenizer.json's "normalized" flag; take Hugging Face's default ("not
        // special"). For ASCII tokens such as Qwen's <think> both settings match the same text.
        added.push_back({{"id", id}, {"content", tok}, {"special", type == kControl}, {"normalized", type == kUserDefined}});
        break;
      case kUnused:
        break;  // padding up to the model's vocabulary size: no token has this id
      default:
        Fail(path, ": tokenizer.ggml.token_type[", id, "] = ", JsonSummary(types[id]),
             " is not supported for byte-level BPE (1, 3, 4 or 5)");
    }
  }
  Json bpe{{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", merges},
           {"ignore_merges", pre == "llama-bpe"}};  // as llama.cpp and Llama 3's tokenizer.json do
  return {{"model", std::move(bpe)},
          {"normalizer", GgufNormalizer(pre)},
          {"pre_tokenizer", GgufPreTokenizer(pre, path)},
          {"decoder", ByteLevel(true)},
          {"added_tokens", std::move(added)}};
}

Tokenizer Tokenizer::FromGguf(const Json& meta, const std::string& path) {
  Tokenizer t = FromJson(TokenizerJsonFromGguf(meta, path), path + " (GGUF tokenizer)");
  auto id_of = [&](const char* key) -> int32_t {
    const Json& v = meta.value(key, Json());
    if (v.is_null()) return -1;
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= t.vocab_size() ||
        !t.tokens_[v.get<int64_t>()].assigned) {
      Fail(path, ": ", key, " = ", JsonSummary(v), " is not a token id");
    }
    return v.get<int32_t>();
  };
  t.bos_id_ = id_of("tokenizer.ggml.bos_token_id");
  t.eos_id_ = id_of("tokenizer.ggml.eos_token_id");
  t.pad_id_ = id_of("tokenizer.ggml.padding_token_id");
  const Json& add_bos = meta.value("tokenizer.ggml.add_bos_token", Json(false));
  if (!add_bos.is_boolean()) Fail(path, ": tokenizer.ggml.add_bos_token is not a boolean");
  t.add_bos_ = add_bos.get<bool>();
  if (t.add_bos_ && t.bos_id_ < 0) Fail(path, ": tokenizer.ggml.add_bos_token is true but there is no bos_token_id");
  return t;
}

}  // namespace dflash::text
