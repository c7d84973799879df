// MLX-quantised models (mlx-lm / mlx-community layout): config.json carries
// "quantization": {"group_size": G, "bits": B[, "mode": "affine"]}, optionally with per-module
// overrides ("model.layers.0.mlp.down_proj": {"group_size": .., "bits": ..}, or false for a
// module left unquantised), and every quantised matrix NAME.weight is stored as uint32 words
// next to NAME.scales and NAME.biases. See ops/mlx_affine.h for the element layout.
#pragma once

#include <string>

#include "io/json_file.h"
#include "io/tensor_store.h"

namespace dflash {

// Repacks every (weight, scales, biases) triple of `store` into one MLX affine block tensor
// named NAME.weight with its logical shape [rows, cols], and drops the scales and biases.
// `config` is the model's config.json (`where` names it in errors); returns how many matrices
// it repacked (0 when the config has no "quantization"). Throws Error naming the tensor on a
// missing partner, a shape that disagrees with the bits and group size, or an unsupported
// mode, bit width or group size.
int RepackMlxQuantized(const Json& config, const std::string& where, TensorStore& store);

}  // namespace dflash
