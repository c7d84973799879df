// A target's key/value cache: one sequence's keys and values, and the layout attention reads in
// place. Shared by the dense Qwen3 target and a hybrid's full-attention layers.
#pragma once

#include <cstdint>

#include "core/huge_pages.h"
#include "core/tensor.h"
#include "model/target.h"
#include "ops/ops.h"

namespace dflash {

// The shape of a head-major tiled K or V buffer (ops::KvView's layout): `heads` heads (every
// layer's, back to back) of `stride` bytes. Positions [0, n) of a head are its first
// UsedBytes(n) bytes in either layout (keys by whole tiles), so a buffer's used length is
// `heads` contiguous runs: what a saved sequence writes.
struct TiledHeads {
  DType type = DType::kF32;
  int heads = 0, head_dim = 0;
  size_t stride = 0;
  int Capacity() const;  // whole key tiles of positions per head
  size_t UsedBytes(int positions) const;
  void Save(const uint8_t* buffer, int positions, const ByteSink& out) const;
  void Load(uint8_t* buffer, int positions, const ByteSource& in) const;
  // Writes this shape; CheckSaved reads one and throws Error naming the field (in `what`) that
  // differs from this one.
  void SaveShape(const ByteSink& out) const;
  void CheckSaved(const ByteSource& in, const char* what) const;
};

// `type` elements (raw bytes), and how many positions are filled. Head-major, [layer][kv
// head][positions], so that attention, which works one KV head at a time, streams each head's
// positions from contiguous memory, in ops::KvView's tiled layout (keys in tiles of
// ops::kKvTile positions, dim-major inside a tile; values by position; a bf16 cache pairs them
// for bf16 dot products).
struct KvCache final : TargetState {
  DType type = DType::kF32;
  ByteBuffer k, v;
  int filled = 0;
  TiledHeads shape;  // of k and of v
  size_t bytes() const override { return k.size() + v.size(); }
  int length() const override { return filled; }
  int RestorablePrefix(int length) const override { return length; }
  void Save(const ByteSink& out) const override;
  void Load(const ByteSource& in) override;
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
