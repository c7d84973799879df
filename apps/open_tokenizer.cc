#include "open_tokenizer.h"

#include "io/gguf.h"

namespace dflash::app {

text::Tokenizer OpenTokenizer(const std::string& path) {
  if (IsGgufPath(path)) return text::Tokenizer::FromGguf(LoadGguf(path).metadata, path);
  return text::Tokenizer::Load(path);
}

}  // namespace dflash::app
