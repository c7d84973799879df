// tokenizer.json, optionally followed by tokenizer_config.json (the input's two parts):
// Tokenizer::Load, then a round trip of a fixed text through Encode and Decode, so the
// vocabulary, merges, normalizer and pre-tokenizer the input built are all exercised.
#include "fuzz_support.h"
#include "text/tokenizer.h"

using namespace dflash;

namespace {
// ASCII words and digits, accents, CJK, an emoji, whitespace runs and chat special tokens.
constexpr std::string_view kText =
    "<|im_start|>user\nHello, world! 12345 caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80"
    "  tabs\tand\n\nnewlines<|im_end|>\n<think></think>";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::ClearScratch();
  const auto parts = fuzz::SplitFiles(fuzz::AsText(data, size), 2);
  fuzz::WriteScratch("tokenizer.json", parts[0]);
  if (parts.size() > 1) fuzz::WriteScratch("tokenizer_config.json", parts[1]);
  fuzz::ExpectCleanError([] {
    const text::Tokenizer tok = text::Tokenizer::Load(fuzz::ScratchDir().string());
    for (bool special : {true, false}) {
      const std::vector<int32_t> ids = tok.Encode(kText, special);
      tok.Decode(ids, /*skip_special=*/false);
      tok.Decode(ids, /*skip_special=*/true);
    }
  });
  return 0;
}
