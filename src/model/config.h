// Model hyper-parameters read from Hugging Face config.json files.
#pragma once

#include <string>
#include <vector>

#include "io/json_file.h"

namespace dflash {

// Rotary embedding parameters in transformers' terms (rope_parameters / rope_scaling).
struct RopeConfig {
  std::string type = "default";  // default | linear | yarn
  double theta = 10000.0;
  double factor = 1.0;
  // yarn
  int original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double attention_factor = -1.0;  // < 0: derived from factor (and mscale) as transformers does
  double mscale = 0.0;
  double mscale_all_dim = 0.0;
  bool truncate = true;
  // Rotary dims per head: int(head_dim * partial_rotary_factor), the rest pass through
  // (Qwen3.5: 0.25, inside rope_parameters next to mrope_section).
  double partial_rotary_factor = 1.0;
};

// The decoder shape shared by Qwen3 targets and DFlash drafts.
struct DecoderConfig {
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  double rms_norm_eps = 1e-6;
  bool attention_bias = false;
  bool tie_word_embeddings = false;
  int max_position_embeddings = 0;
  RopeConfig rope;
  // Per layer: 0 = full attention, else the sliding window (keys with q_pos - k_pos < window).
  std::vector<int> layer_window;
  // Per layer: Gated DeltaNet ("linear_attention") instead of attention (Qwen3.5 hybrids).
  std::vector<bool> layer_linear;
};

// The Gated DeltaNet layers of a Qwen3.5 hybrid (transformers' linear_* fields).
struct LinearAttentionConfig {
  int conv_kernel = 4;
  int num_key_heads = 0;
  int num_value_heads = 0;  // a multiple of num_key_heads: value head h reads key head h / ratio
  int key_head_dim = 0;
  int value_head_dim = 0;
};

// The routed experts of a mixture-of-experts target: a sparse layer's MLP is softmax over
// num_experts router logits, the top_k experts' SwiGLU MLPs weighted by their probabilities
// (renormalised to sum to 1 when norm_topk_prob). Qwen3MoeForCausalLM has no shared expert;
// Qwen3.5 MoE adds one to every layer, scaled by sigmoid(shared_expert_gate x).
struct MoeConfig {
  int num_experts = 0;  // 0: no experts, every layer dense
  int top_k = 0;        // num_experts_per_tok
  int intermediate_size = 0;  // moe_intermediate_size: one expert's MLP width
  bool norm_topk_prob = false;
  int shared_intermediate_size = 0;  // shared_expert_intermediate_size; 0: no shared expert
  // Per layer: routed experts, or the dense MLP (mlp_only_layers, decoder_sparse_step).
  std::vector<bool> sparse;
};

struct TargetConfig {
  std::string architecture;
  DecoderConfig decoder;
  // Qwen3.5 hybrids (architecture Qwen3_5[Moe]ForCausalLM / Qwen3_5[Moe]ForConditionalGeneration): the
  // linear layers' shape; their RMSNorms scale by (1 + weight) and attention's q_proj also
  // yields a sigmoid output gate.
  bool hybrid = false;
  LinearAttentionConfig linear;
  MoeConfig moe;
};

// The largest draft block accepted. Published DFlash drafts use 16; every block costs a
// verify pass over block_size rows, so 4x that is past any payoff, and buffers sized by it
// (the draft's logits are block_size x vocabulary) stay small.
inline constexpr int kMaxBlockSize = 64;

struct DraftConfig {
  DecoderConfig decoder;  // vocab_size may be 0: the draft uses the target's vocabulary
  int block_size = 16;
  int num_target_layers = 0;
  std::vector<int> target_layer_ids;  // 0-based target layers whose outputs are captured
  int mask_token_id = -1;
  // Per layer: causal inside the block (z-lab: sliding layers are causal, full ones are not,
  // unless the config's is_causal / dflash_config.causal says otherwise).
  std::vector<bool> layer_causal;
  double input_embedding_scale = 1.0;
  double output_multiplier = 1.0;
  double final_logit_softcapping = 0.0;
  // DFlash2 (architecture DFlash2DraftModel; all 0 for DFlash): every layer's grouped dynamic
  // causal convolutions (conv_kernel_size taps, conv_group_size channels per group) and the
  // candidate selector (selector_top_k candidates per row, codebooks of selector_rank).
  int conv_kernel_size = 0;
  int conv_group_size = 0;
  int selector_rank = 0;
  int selector_top_k = 0;
  bool dflash2() const { return selector_top_k > 0; }
};

// Read `dir/config.json`; throw Error naming the file and field on anything unexpected.
TargetConfig LoadTargetConfig(const std::string& dir);
// The same from a config.json already parsed (GGUF metadata is translated to one); `path`
// names it in errors.
TargetConfig TargetConfigFromJson(const Json& config, const std::string& path);
// Qwen3.5 hybrid checkpoints (Gated DeltaNet + gated attention).
bool IsHybridArchitecture(const std::string& architecture);
DraftConfig LoadDraftConfig(const std::string& dir);
DraftConfig DraftConfigFromJson(const Json& config, const std::string& path);

// z-lab's default capture layers for a draft of `num_draft_layers` over `num_target_layers`.
std::vector<int> DefaultTargetLayerIds(int num_target_layers, int num_draft_layers);

// Checks a draft against its target: hidden size, vocabulary, layer ids, mask token.
void CheckDraftMatchesTarget(const DraftConfig& draft, const TargetConfig& target,
                             const std::string& draft_dir);

}  // namespace dflash
