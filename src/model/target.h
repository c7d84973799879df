// What the speculative loop and the draft need from a target model: forward a batch of rows
// at the end of the KV cache, read their logits and captured layer outputs, crop the cache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"
#include "model/pass_profile.h"

namespace dflash {

// Byte streams a saved sequence is written to and read from (a prefix cache on disk). A source
// fills exactly `n` bytes or throws Error (a short file).
using ByteSink = std::function<void(const void* data, size_t n)>;
using ByteSource = std::function<void(void* data, size_t n)>;

struct TargetOptions {
  int kv_capacity = 4096;         // positions of KV cache reserved (per sequence)
  int max_rows = 64;              // rows per Forward (prefill chunk, verify block)
  // KV cache element type: kF32 (exact, what the transformers goldens are checked at), kF16 or
  // kBF16. A key or value is rounded once, when its position is stored, so every row sees the
  // same cache whatever the batch.
  DType kv_type = DType::kF32;
  std::vector<int> capture_layers;  // 0-based layers whose outputs Features() returns
  // Allocate a KV cache of its own. Without one, Bind() a state (NewState) before Forward: an
  // engine serving several sequences keeps one cache per sequence and swaps the pointer.
  bool own_cache = true;
  // A recurrent state cannot be cut back, so a hybrid keeps copies of it for prefix reuse: at
  // the end of each prompt and every `checkpoint_interval` positions (0: only at prompt ends),
  // at most `checkpoints` per sequence (0: none; reuse then needs the whole cached sequence).
  // One copy is a few MiB to tens of MiB (all linear layers' state, whatever the context) and
  // costs a memory copy; see bench/README.md "State checkpoints" for how the defaults were chosen.
  int checkpoints = 8;
  int checkpoint_interval = 512;
};

// One sequence's state in a target, apart from the weights: the KV cache, and a hybrid's
// recurrent state. A target makes it (NewState) and works on the one bound (Bind); an engine
// serving several sequences keeps one per sequence.
class TargetState {
 public:
  virtual ~TargetState() = default;
  virtual size_t bytes() const = 0;
  virtual int length() const = 0;  // positions it holds
  // The longest prefix of at most `length` positions that Truncate restores exactly: `length`
  // for a KV cache; a recurrent state only restores its checkpoints and rows of its last Forward.
  virtual int RestorablePrefix(int length) const = 0;
  // The state of its length() positions and what restoring their prefixes needs, and only
  // that (not the capacity), to a stream; Load reads it back into a state made by the same
  // model with the same options. Load checks every size it reads against this state's before
  // using it and throws Error naming the field that does not fit, leaving an empty state
  // (length 0, as a new one), never a partly loaded one.
  virtual void Save(const ByteSink& out) const = 0;
  virtual void Load(const ByteSource& in) = 0;
};

// A MoE target's routed experts as the cost model sees them; all zero for a dense target.
struct ExpertShape {
  int experts = 0;         // per sparse layer
  int top_k = 0;
  int sparse_layers = 0;
  int64_t decode_bytes = 0;  // routed-expert bytes one decode step reads: top_k per sparse layer
};

class TargetModel {
 public:
  virtual ~TargetModel() = default;

  // Runs tokens at positions [kv_length(), kv_length() + n) and appends their K/V.
  // n <= max_rows(). Logits are produced for every row if all_logits, else for the last row
  // only (prefill). Captured features are produced for every row.
  virtual void Forward(std::span<const int32_t> tokens, bool all_logits) = 0;
  // Row r of the last Forward's logits ([vocab]); with all_logits false only r = 0 exists.
  virtual const float* Logits(int r) const = 0;
  // Row r of the last Forward's captured features: the outputs of capture_layers() in order,
  // concatenated ([capture_layers().size() * hidden]).
  virtual const float* Features(int r) const = 0;

  virtual int kv_length() const = 0;
  virtual int kv_capacity() const = 0;
  // Keeps positions [0, length); `length` must be restorable (TargetState::RestorablePrefix).
  // After it the state is, bit for bit, what running those positions' tokens gives.
  virtual void Truncate(int length) = 0;
  // Marks the current state as one a later prefix reuse may restore (the end of a prompt).
  virtual void Checkpoint() = 0;
  // A state sized for kv_capacity() positions; Bind() makes it the one Forward, Truncate and
  // Checkpoint use (nullptr: the model's own, if it has one).
  virtual std::unique_ptr<TargetState> NewState() const = 0;
  virtual void Bind(TargetState* state) = 0;
  virtual size_t state_bytes() const = 0;  // one sequence's
  // Bytes of one state checkpoint (TargetOptions::checkpoints); 0 when any prefix restores
  // without one (a KV cache).
  virtual size_t checkpoint_bytes() const { return 0; }
  // For cost benchmarks only: makes the cache `length` positions of synthetic keys and values (a
  // fixed pseudo-random pattern, no token's). A pass costs the same whatever the cached values
  // are (attention has no value-dependent branches), so a 16k-context cost curve needs no
  // 16k-token prefill.
  virtual void FillSyntheticKv(int length) = 0;

  virtual int max_rows() const = 0;
  virtual const DecoderConfig& config() const = 0;
  virtual std::span<const int> capture_layers() const = 0;
  // The token embedding table and LM head, which a DFlash draft borrows.
  virtual const WeightRef& embedding() const = 0;
  virtual const WeightRef& lm_head() const = 0;
  // Bytes one decode step at context `ctx` must read from memory: every matrix once (the LM
  // head included; the embedding only for one row) plus every layer's K and V for the
  // positions it attends to. The numerator of the memory roofline.
  virtual int64_t DecodeBytes(int ctx) const = 0;
  // While set, every Forward adds its stage times to *profile (nullptr: off, no clock read).
  virtual void set_profile(PassProfile* profile) = 0;
  // Distinct routed experts the last Forward read, summed over its sparse layers (0: dense):
  // what a verify's expert cost grows with.
  virtual int experts_read() const { return 0; }
  virtual ExpertShape expert_shape() const { return {}; }
};

}  // namespace dflash
