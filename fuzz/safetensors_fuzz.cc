// One .safetensors file (AddSafetensorsFile): the header length, the JSON header, each
// tensor's dtype, shape and data_offsets against the file size.
#include "fuzz_support.h"
#include "io/safetensors.h"

using namespace dflash;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::WriteScratch("model.safetensors", fuzz::AsText(data, size));
  fuzz::ExpectCleanError([&] {
    TensorStore store(path);
    AddSafetensorsFile(path, store);
    fuzz::TouchTensors(store);
  });
  return 0;
}
