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

// Splits mlx-lm's stacked MoE experts (switch_mlp) into per-expert matrices, then repacks
// every (weight, scales, biases) triple of `store` into one MLX affine block tensor
// named NAME.weight with its logical shape [rows, cols], and drops the scales and biases.
// `config` is the model's config.json (`where` names it in errors); returns how many matrices
// it repacked (0 when the config has no "quantization"). Throws Error naming the tensor on a
// missing partner, a shape that disagrees with the bits and group size, or an unsupported
// mode, bit width or group size.
int RepackMlxQuantized(const Json& config, const std::string& where, TensorStore& store);

// What mlx-lm's converter (mlx_lm convert, models/qwen3_5.py sanitize) changes in a Qwen3.5
// checkpoint beyond quantising, undone so the hybrid binds it as the Hugging Face original:
// the text model under "language_model." (model.X and lm_head), conv1d.weight moved from
// [channels][1][kernel] to [channels][kernel][1] (the same bytes), and the (1 + w) RMSNorms
// (input, post-attention, final, q_norm, k_norm) stored with 1.0 added (subtracted again in
// f32). Recognised, as mlx-lm itself does, by a conv1d.weight whose last axis is 1. Returns
// whether it found that layout.
bool UndoMlxLmHybridLayout(TensorStore& store);

}  // namespace dflash
