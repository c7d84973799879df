// A target's key/value cache: one sequence's keys and values, and the layout attention reads in
// place. Shared by the dense Qwen3 target and a hybrid's full-attention layers.
#pragma once

#include <cstdint>

#include "core/huge_pages.h"
#include "core/tensor.h"
#include "model/target.h"
#include "ops/ops.h"

namespace dflash {

// `type` elements (raw bytes), and how many positions are filled. Head-major, [layer][kv
// head][positions], so that attention, which works one KV head at a time, streams each head's
// positions from contiguous memory, in ops::KvView's tiled layout (keys in tiles of
// ops::kKvTile positions, dim-major inside a tile; values by position; a bf16 cache pairs them
// for bf16 dot products).
struct KvCache final : TargetState {
  DType type = DType::kF32;
  ByteBuffer k, v;
  int filled = 0;
  size_t bytes() const override { return k.size() + v.size(); }
  int length() const override { return filled; }
  int RestorablePrefix(int length) const override { return length; }
};

// The shape of the caches of `layers` attention layers.
class KvLayout {
 public:
  KvLayout(int layers, int kv_heads, int head_dim, int capacity, DType type);

  KvCache NewCache() const;
  bool Made(const KvCache& c) const;  // whether `c` has this layout
  size_t bytes() const { return 2 * static_cast<size_t>(layers_) * LayerBytes(); }
  uint8_t* Keys(KvCache& c, int layer) const { return c.k.data() + static_cast<size_t>(layer) * LayerBytes(); }
  uint8_t* Values(KvCache& c, int layer) const { return c.v.data() + static_cast<size_t>(layer) * LayerBytes(); }
  // Stores n rows of kv_heads * head_dim f32 values ([n][kv_dim], heads side by side) as
  // positions [pos0, pos0 + n) of one layer's keys (tiled) or values.
  void Store(const float* rows, int n, int pos0, bool keys, uint8_t* layer_cache) const;
  ops::KvView View(KvCache& c, int layer) const;
  // Keys and values of `length` positions in every layer from a fixed pseudo-random pattern
  // in [-1, 1) (TargetModel::FillSyntheticKv).
  void FillSynthetic(KvCache& c, int length) const;
  // Bytes a decode step reads from one layer's keys and values attending to `keys` positions.
  int64_t ReadBytes(int64_t keys) const;

 private:
  int64_t HeadPositions() const;  // positions per head: the capacity in whole key tiles
  size_t LayerBytes() const;      // one layer's keys (or values)

  int layers_, kv_heads_, head_dim_, capacity_;
  DType type_;
};

}  // namespace dflash
