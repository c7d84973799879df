// A llama.cpp .gguf file: LoadGguf (header, metadata, tensor infos, offsets), then what the
// engine and the CLI read from it: a target's and a draft's configuration and the tokenizer.
#include "fuzz_support.h"
#include "io/gguf.h"
#include "model/gguf_config.h"
#include "text/tokenizer.h"

using namespace dflash;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::WriteScratch("model.gguf", fuzz::AsText(data, size));
  fuzz::ExpectCleanError([&] {
    const GgufModel model = LoadGguf(path);
    fuzz::TouchTensors(model.store);
    fuzz::ExpectCleanError([&] { TargetConfigFromGguf(model, path); });
    fuzz::ExpectCleanError([&] { DraftConfigFromGguf(model, path); });
    fuzz::ExpectCleanError([&] { text::Tokenizer::FromGguf(model.metadata, path); });
  });
  return 0;
}
