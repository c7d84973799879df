#include "text/tokenizer.h"

#include <filesystem>

#include "text/byte_level.h"
#include "text/utf8.h"

namespace dflash::text {

namespace {

constexpr int32_t kMaxTokenId = 1 << 24;

const Json& Field(const JsonObject& o, const std::string& key) {
  if (!o.raw().contains(key)) Fail(o.where(), ": required field '", key, "' is missing");
  return o.raw().at(key);
}

// tokenizer_config.json names tokens either as "text" or as {"content": "text", ...}.
std::optional<std::string> TokenName(const JsonObject& config, const std::string& key) {
  if (!config.Has(key)) return std::nullopt;
  const Json& v = config.raw().at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v.at("content").is_string()) {
    return v.at("content").get<std::string>();
  }
  Fail(config.where(), ": field '", key, "' is neither a string nor {\"content\": ...}: ", JsonSummary(v));
}

// The bytes the reference's ByteLevel decoder produces for one token string.
std::string DecodedBytes(const std::string& spelled) {
  std::optional<std::string> bytes = CharsToBytes(spelled);
  return bytes ? std::move(*bytes) : spelled;
}

}  // namespace

Tokenizer Tokenizer::Load(const std::string& dir) {
  const std::string path = dir + "/tokenizer.json";
  Tokenizer t = FromJson(ReadJsonFile(path), path);
  const std::string config_path = dir + "/tokenizer_config.json";
  if (std::filesystem::exists(config_path)) t.ReadConfig(config_path);
  return t;
}

Tokenizer Tokenizer::FromJson(const Json& j, const std::string& path) {
  const JsonObject root(j, path);
  Tokenizer t;

  const JsonObject model(Field(root, "model"), path + ": model");
  t.bpe_ = BpeModel::FromJson(model);
  t.normalizer_ = Normalizer::FromJson(root.raw().value("normalizer", Json()), path);
  t.pre_tokenizer_ = PreTokenizer::FromJson(root.raw().value("pre_tokenizer", Json()), path);
  if (!t.pre_tokenizer_.has_byte_level()) {
    Fail(path, ": pre_tokenizer has no ByteLevel step; only byte-level BPE is supported");
  }
  static const Json kAbsent;  // both arms lvalues: the decoder is not copied
  const Json& decoder = root.raw().contains("decoder") ? root.raw().at("decoder") : kAbsent;
  const Json& decoder_type = decoder.is_object() && decoder.contains("type") ? decoder.at("type") : decoder;
  if (!decoder.is_object() || decoder_type != Json("ByteLevel")) {
    Fail(path, ": decoder ", JsonSummary(decoder_type), " is not supported (ByteLevel only)");
  }
  t.added_ = AddedTokens::FromJson(root.raw().value("added_tokens", Json()), t.normalizer_, path);

  auto assign = [&](int32_t id, std::string bytes, bool special) {
    // Real vocabularies are dense; a huge id is a corrupt file, not a reason to allocate.
    if (id >= kMaxTokenId) Fail(path, ": token id ", id, " is beyond the supported ", kMaxTokenId);
    if (static_cast<size_t>(id) >= t.tokens_.size()) t.tokens_.resize(static_cast<size_t>(id) + 1);
    t.tokens_[id] = {std::move(bytes), true, special};
  };
  for (const auto& [spelled, id] : t.bpe_.vocab()) assign(id, DecodedBytes(spelled), false);
  // Added tokens come second: where one shares an id with the vocabulary, it wins, as in
  // the reference's id-to-token lookup.
  for (const AddedToken& a : t.added_.tokens()) {
    assign(a.id, DecodedBytes(a.content), a.special);
    t.added_by_content_[a.content] = a.id;
  }
  return t;
}

void Tokenizer::ReadConfig(const std::string& path) {
  const Json j = ReadJsonFile(path);
  const JsonObject config(j, path);
  auto id_of = [&](const std::string& key) -> int32_t {
    const std::optional<std::string> name = TokenName(config, key);
    if (!name) return -1;
    const std::optional<int32_t> id = FindToken(*name);
    if (!id) Fail(path, ": field '", key, "' names '", *name, "', which is not a token");
    return *id;
  };
  bos_id_ = id_of("bos_token");
  eos_id_ = id_of("eos_token");
  pad_id_ = id_of("pad_token");
  add_bos_ = config.Get<bool>("add_bos_token", false);
  if (add_bos_ && bos_id_ < 0) Fail(path, ": add_bos_token is true but bos_token is not set");
}

void Tokenizer::EncodePlain(std::string_view piece, bool parse_special,
                            std::vector<int32_t>& ids) const {
  std::vector<TextSpan> spans;
  const std::string normalized = normalizer_.Apply(std::string(piece));
  added_.Split(normalized, /*normalized_class=*/true, parse_special, spans);
  std::vector<std::string> words;
  for (const TextSpan& s : spans) {
    if (s.token >= 0) {
      ids.push_back(s.token);
      continue;
    }
    words.clear();
    words.emplace_back(normalized, s.begin, s.end - s.begin);
    pre_tokenizer_.Apply(words);
    for (const std::string& w : words) bpe_.Encode(w, ids);
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool parse_special) const {
  const size_t bad = FindInvalidUtf8(text);
  if (bad != kValidUtf8) {
    const auto byte = static_cast<unsigned char>(text[bad]);
    Fail("text to tokenize is not valid UTF-8: byte 0x", "0123456789abcdef"[byte >> 4],
         "0123456789abcdef"[byte & 15], " at offset ", bad);
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  std::vector<TextSpan> spans;
  added_.Split(text, /*normalized_class=*/false, parse_special, spans);
  for (const TextSpan& s : spans) {
    if (s.token >= 0) ids.push_back(s.token);
    else EncodePlain(text.substr(s.begin, s.end - s.begin), parse_special, ids);
  }
  return ids;
}

const std::string& Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !tokens_[id].assigned) {
    Fail("token id ", id, " is not in the vocabulary (size ", vocab_size(), ")");
  }
  return tokens_[id].bytes;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  TokenBytes(id);  // validates
  return tokens_[id].special;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    const std::string& b = TokenBytes(id);
    if (!(skip_special && tokens_[id].special)) bytes += b;
  }
  return LossyUtf8(bytes);
}

std::optional<int32_t> Tokenizer::FindToken(std::string_view token) const {
  const std::string key(token);
  if (auto it = added_by_content_.find(key); it != added_by_content_.end()) return it->second;
  if (auto it = bpe_.vocab().find(key); it != bpe_.vocab().end()) return it->second;
  return std::nullopt;
}

int32_t Tokenizer::TokenId(std::string_view token) const {
  const std::optional<int32_t> id = FindToken(token);
  if (!id) Fail("token '", token, "' is not in the vocabulary");
  return *id;
}

std::string StreamDecoder::Push(int32_t id) {
  const std::string& bytes = tokenizer_->TokenBytes(id);
  std::string out;
  if (skip_special_ && tokenizer_->IsSpecial(id)) return out;
  pending_ += bytes;
  TakeDecodable(pending_, out, /*at_end=*/false);
  return out;
}

std::string StreamDecoder::Flush() {
  std::string out;
  TakeDecodable(pending_, out, /*at_end=*/true);
  return out;
}

}  // namespace dflash::text
