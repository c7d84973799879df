// dflash tokenize / detokenize: text <-> ids with a model's tokenizer.json, for scripts and
// for checking prompts; `tokenize --bench` measures encoding throughput on the given text.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "io/json_file.h"
#include "open_tokenizer.h"
#include "text/tokenizer.h"

namespace dflash::app {

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(path, ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string JoinIds(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

// FNV-1a over the ids, so that a benchmark script can check it got the reference's ids
// without printing millions of them.
uint64_t HashIds(const std::vector<int32_t>& ids) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t id : ids) {
    const auto u = static_cast<uint32_t>(id);
    for (int k = 0; k < 4; ++k) {
      h ^= (u >> (8 * k)) & 0xFF;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

int Bench(const text::Tokenizer& tok, const std::string& text, bool parse_special, int repeat,
          bool json) {
  if (repeat < 1) Fail("--repeat must be at least 1, got ", repeat);
  std::vector<int32_t> ids;
  double first = 0, best = 1e300;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    ids = tok.Encode(text, parse_special);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r == 0) first = s;
    best = std::min(best, s);
  }
  const double mb = static_cast<double>(text.size()) / 1e6;
  if (json) {
    Json j;
    j["bytes"] = text.size();
    j["tokens"] = ids.size();
    j["repeat"] = repeat;
    j["first_s"] = first;  // includes filling the word cache
    j["best_s"] = best;
    j["mb_per_s"] = mb / best;
    j["first_mb_per_s"] = mb / first;
    j["ids_fnv1a"] = HashIds(ids);
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%zu bytes -> %zu tokens; best of %d: %.4f s = %.2f MB/s (first run %.2f MB/s)\n",
                text.size(), ids.size(), repeat, best, mb / best, mb / first);
  }
  return 0;
}

}  // namespace

int Tokenize(int argc, char** argv) {
  std::string dir, text, file;
  bool json = false, no_special = false, bench = false;
  int repeat = 5;
  Args args("tokenize", "Print the token ids of a text (comma-separated, or JSON with --json).");
  args.Option("--tokenizer", &dir, "DIR", "folder with tokenizer.json (a model folder works), or a .gguf");
  args.Option("--text", &text, "TEXT", "text to tokenize");
  args.Option("--file", &file, "FILE", "file whose contents to tokenize");
  args.Flag("--json", &json, "print {\"ids\": [...], \"count\": n}");
  args.Flag("--no-special", &no_special, "treat special-token text such as <|im_end|> as plain text");
  args.Flag("--bench", &bench, "measure encoding throughput instead of printing ids");
  args.Option("--repeat", &repeat, "N", "encodings timed by --bench");
  if (!args.Parse(argc, argv)) return 0;
  if (dir.empty()) Fail("dflash tokenize: --tokenizer DIR is required");
  if (args.Given("--text") == !file.empty()) Fail("dflash tokenize: give exactly one of --text and --file");
  if (!file.empty()) text = ReadFile(file);

  const text::Tokenizer tok = OpenTokenizer(dir);
  if (bench) return Bench(tok, text, !no_special, repeat, json);
  std::vector<int32_t> ids;
  try {
    ids = tok.Encode(text, !no_special);
  } catch (const Error& e) {
    if (file.empty()) throw;
    Fail(file, ": ", e.what());  // say which file holds the bad bytes
  }
  if (json) {
    Json j;
    j["ids"] = ids;
    j["count"] = ids.size();
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s\n", JoinIds(ids).c_str());
  }
  return 0;
}

int Detokenize(int argc, char** argv) {
  std::string dir, ids_text;
  bool skip_special = false;
  Args args("detokenize", "Print the text of comma-separated token ids (no newline is added).");
  args.Option("--tokenizer", &dir, "DIR", "folder with tokenizer.json (a model folder works), or a .gguf");
  args.Option("--ids", &ids_text, "1,2,3", "token ids");
  args.Flag("--skip-special", &skip_special, "leave out special tokens such as <|im_end|>");
  if (!args.Parse(argc, argv)) return 0;
  if (dir.empty()) Fail("dflash detokenize: --tokenizer DIR is required");
  if (ids_text.empty()) Fail("dflash detokenize: --ids is required");
  std::vector<int32_t> ids;
  for (int v : ParseIntList(ids_text, "--ids")) ids.push_back(v);
  const text::Tokenizer tok = OpenTokenizer(dir);
  const std::string out = tok.Decode(ids, skip_special);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace dflash::app
