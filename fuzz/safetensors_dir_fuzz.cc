// A sharded Hugging Face directory (LoadSafetensorsDir): model.safetensors.index.json and up
// to two shards, the parts of the input in that order (fuzz_support.h's kFileSeparator).
#include "fuzz_support.h"
#include "io/safetensors.h"

using namespace dflash;

namespace {
const char* const kFiles[] = {"model.safetensors.index.json", "model-00001-of-00002.safetensors",
                              "model-00002-of-00002.safetensors"};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::ClearScratch();
  const auto parts = fuzz::SplitFiles(fuzz::AsText(data, size), std::size(kFiles));
  for (size_t i = 0; i < parts.size(); ++i) fuzz::WriteScratch(kFiles[i], parts[i]);
  fuzz::ExpectCleanError([] { fuzz::TouchTensors(LoadSafetensorsDir(fuzz::ScratchDir().string())); });
  return 0;
}
