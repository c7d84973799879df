#include "model/kv_cache.h"

#include <vector>

#include "core/error.h"

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
  c.shape = {type_, layers_ * kv_heads_, head_dim_, RowBytes(type_, HeadPositions() * head_dim_)};
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

int TiledHeads::Capacity() const {
  return static_cast<int>(stride / RowBytes(type, head_dim) / ops::kKvTile * ops::kKvTile);
}

size_t TiledHeads::UsedBytes(int positions) const {
  const int64_t tiles = (static_cast<int64_t>(positions) + ops::kKvTile - 1) / ops::kKvTile;
  return RowBytes(type, tiles * ops::kKvTile * head_dim);
}

void TiledHeads::Save(const uint8_t* buffer, int positions, const ByteSink& out) const {
  const size_t used = UsedBytes(positions);
  for (int h = 0; h < heads; ++h) out(buffer + h * stride, used);
}

void TiledHeads::Load(uint8_t* buffer, int positions, const ByteSource& in) const {
  if (positions < 0 || positions > Capacity()) Fail("saved state of ", positions, " positions, capacity ", Capacity());
  const size_t used = UsedBytes(positions);
  for (int h = 0; h < heads; ++h) in(buffer + h * stride, used);
}

void TiledHeads::SaveShape(const ByteSink& out) const {
  const int32_t fields[] = {static_cast<int32_t>(type), heads, head_dim};
  out(fields, sizeof(fields));
}

void TiledHeads::CheckSaved(const ByteSource& in, const char* what) const {
  int32_t fields[3];
  in(fields, sizeof(fields));
  const int32_t mine[] = {static_cast<int32_t>(type), heads, head_dim};
  const char* names[] = {"element type", "heads", "head_dim"};
  for (int i = 0; i < 3; ++i) {
    if (fields[i] != mine[i]) Fail(what, ": saved ", names[i], " ", fields[i], ", this model's ", mine[i]);
  }
}

void KvCache::Save(const ByteSink& out) const {
  shape.SaveShape(out);
  const int32_t n = filled;
  out(&n, sizeof(n));
  shape.Save(k.data(), filled, out);
  shape.Save(v.data(), filled, out);
}

void KvCache::Load(const ByteSource& in) {
  filled = 0;  // empty until every byte is in
  shape.CheckSaved(in, "KV cache");
  int32_t n = 0;
  in(&n, sizeof(n));
  shape.Load(k.data(), n, in);
  shape.Load(v.data(), n, in);
  filled = n;
}

int64_t KvLayout::ReadBytes(int64_t keys) const {
  return 2 * static_cast<int64_t>(RowBytes(type_, keys * kv_heads_ * head_dim_));
}

}  // namespace dflash
