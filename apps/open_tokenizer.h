// A tokenizer named on the command line: a folder with tokenizer.json, or a .gguf file whose
// tokenizer.ggml.* metadata is used.
#pragma once

#include <string>

#include "text/tokenizer.h"

namespace dflash::app {

text::Tokenizer OpenTokenizer(const std::string& path);

}  // namespace dflash::app
