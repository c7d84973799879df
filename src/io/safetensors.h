// safetensors: an 8-byte little-endian header length, a JSON header mapping each tensor name
// to {dtype, shape, data_offsets}, then the raw data. Tensors are used in place (mmap).
#pragma once

#include <string>

#include "io/tensor_store.h"

namespace dflash {

// Adds every tensor of one .safetensors file; validates the header against the file size.
void AddSafetensorsFile(const std::string& path, TensorStore& store);

// A Hugging Face model directory: model.safetensors, or the shards named by
// model.safetensors.index.json. An MLX-quantised directory (config.json "quantization") has
// its matrices repacked to MLX affine blocks (io/mlx_quantized.h).
TensorStore LoadSafetensorsDir(const std::string& dir);

}  // namespace dflash
