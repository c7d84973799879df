// Load-time weight transforms. Quantisation: every 2-D floating-point matrix of a model (projections,
// embedding, LM head, the draft's fc) becomes Q8_0, Q4_0 or Q4_K, owned by its TensorStore; 1-D
// tensors (norms, biases) stay as they are. Packing: block-quantised matrices (quantised here or
// read from GGUF) move to the kGroups16 layout the quantised MatMul reads (ops/weight_pack.h).
// Models bound afterwards see the transformed WeightRefs.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "io/tensor_store.h"

namespace dflash {

// "none" -> nullopt, "q8_0" / "q4_0" / "q4_k" -> that type; throws Error naming `flag` otherwise.
std::optional<DType> ParseWeightQuant(const std::string& value, const std::string& flag);

// Quantises an f32/bf16/f16 matrix (cols whole blocks) row by row into `bytes`; returns
// the WeightRef over them.
WeightRef QuantizeWeight(const WeightRef& w, DType to, ByteBuffer& bytes, ThreadPool& pool);

// Quantises every 2-D f32/bf16/f16 tensor of `store` in place, MoE routers excepted (they stay
// as stored); returns how many it converted.
// A matrix whose rows are not whole blocks is an error naming it, unless it is one of
// `row_lookups`: tables only read a row at a time (ops::DequantizeRow serves any dtype, e.g.
// DFlash2's selector codebooks of selector_rank columns), which then stay as they are.
int QuantizeMatrices(TensorStore& store, DType to, ThreadPool& pool,
                     std::span<const std::string> row_lookups = {});

// Packs every 2-D block-quantised tensor of `store` still in row layout; returns how many. Run it
// once after loading (and quantising), before binding models: MatMul needs those packed.
int PackMatrices(TensorStore& store, ThreadPool& pool);

}  // namespace dflash
