#include "plan/memory_model.h"

#include <algorithm>

#include "core/error.h"

namespace dflash::plan {

namespace {

// Working memory besides weights and caches: code, thread stacks and the allocator's slack.
// `dflash bench` on the tiny test fixtures peaks at 13 MiB in all (weights and caches under
// 1 MiB); a loaded tokenizer adds a few times its tokenizer.json, which the planner's headroom
// (Headroom) covers.
constexpr int64_t kRuntimeBytes = int64_t{16} << 20;

double AttentionParams(const ModelShape& s) {
  const double q = double(s.heads) * s.head_dim * (s.attention_output_gate ? 2 : 1);
  const double kv = 2.0 * s.kv_heads * s.head_dim;
  const double o = double(s.heads) * s.head_dim;
  const double bias = s.attention_bias ? q + kv + s.hidden : 0;
  const double qk_norms = 2.0 * s.head_dim;
  return s.hidden * (q + kv) + o * s.hidden + bias + qk_norms;
}

// Gated DeltaNet: in_proj_qkvz, in_proj_ba, the depthwise conv over q, k and v, the per-head
// decay parameters (A_log, dt_bias), the gated norm and out_proj.
double LinearAttentionParams(const ModelShape& s) {
  const LinearAttentionShape& l = *s.linear;
  const double key = double(l.key_heads) * l.key_head_dim, value = double(l.value_heads) * l.value_head_dim;
  const double conv = (2 * key + value) * l.conv_kernel;
  return s.hidden * (2 * key + 2 * value) + s.hidden * 2.0 * l.value_heads + conv + 2.0 * l.value_heads +
         l.value_head_dim + value * s.hidden;
}

// SwiGLU MLP of width `width`: gate, up, down.
double MlpParams(int hidden, int width) { return 3.0 * hidden * width; }

}  // namespace

const std::vector<WeightFormat>& WeightFormats() {
  static const std::vector<WeightFormat> formats{
      {"f32", 4.0, false, "32-bit floats"},
      {"bf16", 2.0, false, "bfloat16, as Hugging Face publishes"},
      {"q8_0", 34.0 / 32, true, "blocks of 32 int8 with an f16 scale (34 bytes / 32 weights)"},
      {"q4_0", 18.0 / 32, true, "blocks of 32 4-bit with an f16 scale (18 bytes / 32 weights)"},
      {"q4_k", 144.0 / 256, true, "super-blocks of 256 4-bit with 6-bit sub-scales (144 bytes / 256 weights)"},
      {"mlx-4bit", 0.5 + 4.0 / 64, false, "MLX affine 4-bit, group 64, bf16 scale and bias per group"},
  };
  return formats;
}

const WeightFormat& FindWeightFormat(const std::string& name) {
  for (const WeightFormat& f : WeightFormats()) {
    if (f.name == name) return f;
  }
  std::string known;
  for (const WeightFormat& f : WeightFormats()) known += (known.empty() ? "" : ", ") + f.name;
  Fail("weight format '", name, "' is not known (", known, ")");
}

ParamCount CountParams(const ModelShape& s) {
  ParamCount p;
  const double norms = 2.0 * s.hidden;  // input and post-attention RMSNorm
  double layer_all = 0, layer_token = 0;
  const int linear_layers = s.layers - s.full_attention_layers;
  const double mixers = s.full_attention_layers * AttentionParams(s) + (linear_layers > 0 ? linear_layers * LinearAttentionParams(s) : 0);
  if (s.moe) {
    const MoeShape& m = *s.moe;
    const double router = double(s.hidden) * m.experts;
    const double expert = MlpParams(s.hidden, m.expert_intermediate);
    const double shared = m.shared_intermediate > 0 ? MlpParams(s.hidden, m.shared_intermediate) + s.hidden : 0;
    layer_all = s.layers * (norms + router + shared + m.experts * expert);
    layer_token = s.layers * (norms + router + shared + m.experts_per_token * expert);
  } else {
    layer_all = layer_token = s.layers * (norms + MlpParams(s.hidden, s.intermediate));
  }
  p.layers = mixers + layer_all + s.hidden;  // + final norm
  p.layers_per_token = mixers + layer_token + s.hidden;
  if (s.is_draft()) {
    // fc: the captured target layers, concatenated, down to the hidden size; hidden_norm after it.
    const double fc = double(s.capture_layers) * s.hidden * s.hidden + s.hidden;
    p.layers += fc;
    p.layers_per_token += fc;
    return p;
  }
  p.embedding = double(s.vocab) * s.hidden;
  p.lm_head = s.tied_embeddings ? 0 : double(s.vocab) * s.hidden;
  return p;
}

int64_t KvCacheBytes(const ModelShape& s, int64_t context, int kv_bytes) {
  const int64_t per_position = int64_t{2} * s.kv_heads * s.head_dim * kv_bytes;
  const int64_t full = s.full_attention_layers - s.sliding_layers;
  const int64_t sliding_positions = std::min<int64_t>(context, s.sliding_window);
  return per_position * (full * context + int64_t{s.sliding_layers} * sliding_positions);
}

int64_t RecurrentStateBytes(const ModelShape& s) {
  if (!s.linear) return 0;
  const LinearAttentionShape& l = *s.linear;
  const int64_t state = int64_t{l.value_heads} * l.key_head_dim * l.value_head_dim;
  const int64_t conv_channels = 2 * int64_t{l.key_heads} * l.key_head_dim + int64_t{l.value_heads} * l.value_head_dim;
  const int64_t conv = conv_channels * (l.conv_kernel - 1);
  return (s.layers - s.full_attention_layers) * (state + conv) * int64_t{4};
}

namespace {
ModelShape ShapeOfDecoder(const DecoderConfig& d) {
  ModelShape s;
  s.hidden = d.hidden_size;
  s.intermediate = d.intermediate_size;
  s.layers = s.full_attention_layers = d.num_layers;
  s.heads = d.num_heads;
  s.kv_heads = d.num_kv_heads;
  s.head_dim = d.head_dim;
  s.vocab = d.vocab_size;
  s.tied_embeddings = d.tie_word_embeddings;
  s.attention_bias = d.attention_bias;
  for (int w : d.layer_window) {
    if (w == 0) continue;
    ++s.sliding_layers;
    s.sliding_window = std::max(s.sliding_window, w);
  }
  return s;
}
}  // namespace

ModelShape ShapeOf(const TargetConfig& c) {
  ModelShape s = ShapeOfDecoder(c.decoder);
  s.architecture = c.architecture;
  if (c.hybrid) {
    s.attention_output_gate = true;
    s.full_attention_layers = static_cast<int>(std::count(c.decoder.layer_linear.begin(), c.decoder.layer_linear.end(), false));
    s.linear = LinearAttentionShape{c.linear.num_key_heads, c.linear.num_value_heads, c.linear.key_head_dim,
                                    c.linear.value_head_dim, c.linear.conv_kernel};
  }
  if (c.moe.num_experts > 0) s.moe = MoeShape{c.moe.num_experts, c.moe.top_k, c.moe.intermediate_size, 0};
  return s;
}

ModelShape ShapeOf(const DraftConfig& d) {
  ModelShape s = ShapeOfDecoder(d.decoder);
  s.architecture = "DFlashDraftModel";
  s.capture_layers = static_cast<int>(d.target_layer_ids.size());
  s.block_size = d.block_size;
  return s;
}

MemoryNeed EstimateMemory(const ModelShape& target, const ModelShape& draft, const WeightFormat& format,
                          int64_t context, int kv_bytes) {
  if (context < 1) Fail("context must be at least 1, got ", context);
  MemoryNeed m;
  m.target_weights = static_cast<int64_t>(CountParams(target).total() * format.bytes_per_weight);
  m.draft_weights = static_cast<int64_t>(CountParams(draft).total() * format.bytes_per_weight);
  m.kv_cache = KvCacheBytes(target, context, kv_bytes);
  m.kv_per_1k = KvCacheBytes(target, 1024, kv_bytes);
  const int block = std::max(draft.block_size, 1);
  // The draft's context K/V are elements of the target's KV type (DraftOptions::kv_type).
  m.draft_cache = int64_t{2} * draft.layers * draft.kv_heads * draft.head_dim * (context + block) * kv_bytes;
  m.recurrent_state = RecurrentStateBytes(target);
  // f32 logits of a verify and of a draft block (block x vocab each), and the widest
  // activation of a block-row pass (rows x max(intermediate, q width) x a few live buffers).
  const int64_t logits = int64_t{2} * block * target.vocab * 4;
  const int64_t width = std::max<int64_t>({target.intermediate, int64_t{target.heads} * target.head_dim, target.hidden});
  const int64_t activations = int64_t{4} * block * width * 4;
  m.buffers = logits + activations + kRuntimeBytes;
  return m;
}

MemoryNeed EstimateRunMemory(const ModelShape& target, const ModelShape* draft, int64_t target_file_bytes,
                             int64_t draft_file_bytes, const std::string& quant, int64_t context, int kv_bytes) {
  const ModelShape no_draft;
  MemoryNeed m = EstimateMemory(target, draft ? *draft : no_draft, FindWeightFormat(quant.empty() ? "bf16" : quant),
                                context, kv_bytes);
  if (!draft) m.draft_weights = m.draft_cache = 0;
  if (quant.empty()) {
    m.target_weights = target_file_bytes;
    m.draft_weights = draft ? draft_file_bytes : 0;
  } else {
    // A matrix's mapped pages are dropped once its quantised copy replaces it
    // (TensorStore::ReplaceTensor), so the stored files add at most one matrix at a time: the
    // largest, the embedding, as stored.
    const double stored_per_weight = double(target_file_bytes) / std::max(CountParams(target).total(), 1.0);
    m.load_files = static_cast<int64_t>(double(target.vocab) * target.hidden * stored_per_weight);
  }
  return m;
}

int64_t Headroom(int64_t machine_bytes) {
  return std::max<int64_t>(machine_bytes / 10, int64_t{3} << 29);
}

}  // namespace dflash::plan
