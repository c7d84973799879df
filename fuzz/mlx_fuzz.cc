// An MLX-quantised directory: config.json (its "quantization", global and per module) and
// model.safetensors (uint32 words, scales, biases), the two parts of the input; loading it
// repacks every quantised matrix (RepackMlxQuantized).
#include "fuzz_support.h"
#include "io/safetensors.h"

using namespace dflash;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::ClearScratch();
  const auto parts = fuzz::SplitFiles(fuzz::AsText(data, size), 2);
  fuzz::WriteScratch("config.json", parts[0]);
  if (parts.size() > 1) fuzz::WriteScratch("model.safetensors", parts[1]);
  fuzz::ExpectCleanError([] { fuzz::TouchTensors(LoadSafetensorsDir(fuzz::ScratchDir().string())); });
  return 0;
}
