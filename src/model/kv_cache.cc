#include "model/kv_cache.h"

#include <vector>

namespace dflash {

KvLayout::KvLayout(int layers, int kv_heads, int head_dim, int capacity, DType type)
    : layers_(layers), kv_heads_(kv_heads), head_dim_(head_dim), capacity_(capacity), type_(type) {}

int64_t KvLayout::HeadPositions() const {
  return (static_cast<int64_t>(capacity_) + ops::kKvTile - 1) / ops::kKvTile * ops::kKvTile;
}

size_t KvLayout::LayerBytes() const {
  return RowBytes(type_, HeadPositions() * kv_heads_ * head_dim_);
}

KvCache KvLayout::NewCache() const {
  const size_t n = static_cast<size_t>(layers_) * LayerBytes();
  KvCache c;
  c.type = type_;
  c.k.assign(n, 0);
  c.v.assign(n, 0);
  return c;
}

bool KvLayout::Made(const KvCache& c) const {
  return c.type == type_ && c.k.size() == static_cast<size_t>(layers_) * LayerBytes();
}

void KvLayout::Store(const float* rows, int n, int pos0, bool keys, uint8_t* layer_cache) const {
  const int64_t kv_dim = static_cast<int64_t>(kv_heads_) * head_dim_;
  for (int h = 0; h < kv_heads_; ++h) {
    uint8_t* head = layer_cache + RowBytes(type_, h * HeadPositions() * head_dim_);
    for (int r = 0; r < n; ++r) {
      const float* x = rows + r * kv_dim + static_cast<int64_t>(h) * head_dim_;
      if (keys) {
        ops::StoreKeyTiled(x, head_dim_, type_, pos0 + r, head);
      } else {
        ops::StoreValueTiled(x, head_dim_, type_, pos0 + r, head);
      }
    }
  }
}

ops::KvView KvLayout::View(KvCache& c, int layer) const {
  return ops::KvView{Keys(c, layer), Values(c, layer), head_dim_, type_, HeadPositions() * head_dim_, /*tiled=*/true};
}

void KvLayout::FillSynthetic(KvCache& c, int length) const {
  // Values in [-1, 1) from a multiplicative hash: like real normalised keys in scale, and
  // rounding to f16/bf16 keeps them normal numbers.
  constexpr int kChunk = 256;
  const size_t kv_dim = static_cast<size_t>(kv_heads_) * head_dim_;
  std::vector<float> rows(kChunk * kv_dim);
  uint32_t state = 0x9e3779b9u;
  for (int layer = 0; layer < layers_; ++layer) {
    for (const bool keys : {true, false}) {
      uint8_t* cache = keys ? Keys(c, layer) : Values(c, layer);
      for (int p0 = 0; p0 < length; p0 += kChunk) {
        const int n = std::min(kChunk, length - p0);
        for (size_t i = 0; i < static_cast<size_t>(n) * kv_dim; ++i) {
          state = state * 1664525u + 1013904223u;
          rows[i] = static_cast<float>(state >> 8) * (2.0f / 16777216.0f) - 1.0f;
        }
        Store(rows.data(), n, p0, keys, cache);
      }
    }
  }
  c.filled = length;
}

int64_t KvLayout::ReadBytes(int64_t keys) const {
  return 2 * static_cast<int64_t>(RowBytes(type_, keys * kv_heads_ * head_dim_));
}

}  // namespace dflash
