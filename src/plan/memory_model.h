// How much memory a pair needs, from shapes alone (no weights read): parameters x bytes per
// weight of the format (block scales included), the KV cache at the chosen context, recurrent
// state for hybrid targets, the draft's context cache and the working buffers. The same
// counts give the bytes a decode step reads, which the cost model (plan/cost_model.h) turns
// into time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "plan/registry.h"

namespace dflash::plan {

struct WeightFormat {
  std::string name;         // as --target-quant / --draft-quant spell it, or mlx-4bit
  double bytes_per_weight;  // including the format's block scales (and biases)
  bool int8_kernels;        // its matmuls run int8 dot products (compute peak: int8)
  std::string layout;       // the block layout, for the printed assumptions
};

// bf16, q8_0, q4_0, q4_k, mlx-4bit, f32.
const std::vector<WeightFormat>& WeightFormats();
const WeightFormat& FindWeightFormat(const std::string& name);  // throws Error naming it

// Parameter counts of one model, split by how a decode step touches them.
struct ParamCount {
  double embedding = 0;  // token embedding table (a step reads one row of it)
  double lm_head = 0;    // output projection (0 when tied: the embedding serves; a step reads all of it)
  double layers = 0;     // everything else, all experts
  double layers_per_token = 0;  // what one token reads: MoE reads only its active experts
  double total() const { return embedding + lm_head + layers; }
};
// Drafts count their own layers, fc and norms; they share the target's embedding and LM head.
ParamCount CountParams(const ModelShape& s);

// KV cache for `context` positions over the layers that keep one (sliding layers at most
// their window), `kv_bytes` per element.
int64_t KvCacheBytes(const ModelShape& s, int64_t context, int kv_bytes);
// Gated DeltaNet state of a hybrid's linear-attention layers: an f32 key x value matrix per
// value head plus the causal-conv tail; 0 for plain transformers. Independent of context.
int64_t RecurrentStateBytes(const ModelShape& s);

// The shapes of configs the project's parser reads (model/config.h), for checking the
// registry against committed config.json files and for `dflash doctor`.
ModelShape ShapeOf(const TargetConfig& c);
ModelShape ShapeOf(const DraftConfig& d);

struct MemoryNeed {
  int64_t target_weights = 0, draft_weights = 0;
  int64_t kv_cache = 0;        // target, at the context
  int64_t kv_per_1k = 0;       // target KV per 1024 positions
  int64_t draft_cache = 0;     // the draft's context K/V (f32), at the context
  int64_t recurrent_state = 0;
  int64_t buffers = 0;         // logits, activations, runtime
  int64_t load_files = 0;      // the stored matrix read while quantised at load (EstimateRunMemory)
  int64_t total() const {
    return target_weights + draft_weights + kv_cache + draft_cache + recurrent_state + buffers + load_files;
  }
};

// One sequence of `context` positions; the draft stored in the target's format (the planner
// quantises both alike); kv_bytes: 2 for the default f16/bf16 cache.
MemoryNeed EstimateMemory(const ModelShape& target, const ModelShape& draft, const WeightFormat& format,
                          int64_t context, int kv_bytes);

// The peak resident memory of a process running these files, to set beside a measured peak
// RSS: weights as stored (`quant` empty: the files' own bytes) or quantised at load to `quant`
// (the quantised copy, plus the largest stored matrix, whose mapped pages are resident while it
// is read); no draft when `draft` is null.
MemoryNeed EstimateRunMemory(const ModelShape& target, const ModelShape* draft, int64_t target_file_bytes,
                             int64_t draft_file_bytes, const std::string& quant, int64_t context, int kv_bytes);

// Memory the planner leaves to the OS and other programs: 10% of the machine, at least 1.5 GiB.
int64_t Headroom(int64_t machine_bytes);

}  // namespace dflash::plan
