#include "ops/weight_pack.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ops/quant_blocks.h"

namespace dflash::ops {

namespace {

using namespace quant;

// Where byte `i` of one row-layout block of lane c goes: region 0 (codes / qs) or 1 (scales /
// heads), at offset `off` inside that region's part for the block; Q8_0 codes are flipped to
// unsigned. Each region holds its blocks back to back, `region_bytes` per block.
struct Placement {
  int region;
  int off;
  bool flip;
};

Placement Place(DType t, int c, int i) {
  constexpr int kLanes = kPackRows;
  if (t == DType::kQ8_0) {
    if (i < 2) return {1, 2 * c + i, false};
    const int k = i - 2;
    return {0, (k / 4 * kLanes + c) * 4 + k % 4, true};
  }
  // Q4_K
  if (i < kQ4_KScales) return {1, 4 * c + i, false};
  if (i < kQ4_KQs) {
    const int k = i - kQ4_KScales;
    return {1, 64 + (k / 4) * 64 + 4 * c + k % 4, false};
  }
  const int k = i - kQ4_KQs;
  return {0, (k / 32) * 512 + ((k % 32) / 4 * kLanes + c) * 4 + k % 4, false};
}

// Bytes per block of region 0 and region 1, for 16 lanes.
int RegionBytes(DType t, int region) {
  if (t == DType::kQ8_0) return region == 0 ? 512 : 32;
  return region == 0 ? 2048 : 256;
}

// Offsets of every byte of a block of lane c inside the packed group (block 0), and of each
// further block's bytes: table[c][i] + b * RegionBytes(region).
class PlacementTable {
 public:
  PlacementTable(DType t, int64_t blocks) : block_bytes_(static_cast<int>(BlockBytes(t))) {
    offsets_.resize(kPackRows * block_bytes_);
    regions_.resize(kPackRows * block_bytes_);
    flips_.resize(kPackRows * block_bytes_);
    const size_t region1 = static_cast<size_t>(blocks) * RegionBytes(t, 0);
    stride_[0] = RegionBytes(t, 0);
    stride_[1] = RegionBytes(t, 1);
    for (int c = 0; c < kPackRows; ++c) {
      for (int i = 0; i < block_bytes_; ++i) {
        const Placement p = Place(t, c, i);
        offsets_[c * block_bytes_ + i] = (p.region == 0 ? 0 : region1) + p.off;
        regions_[c * block_bytes_ + i] = static_cast<uint8_t>(p.region);
        flips_[c * block_bytes_ + i] = p.flip ? 0x80 : 0;
      }
    }
  }
  int block_bytes() const { return block_bytes_; }
  size_t Offset(int c, int i, int64_t b) const {
    const int k = c * block_bytes_ + i;
    return offsets_[k] + static_cast<size_t>(b) * stride_[regions_[k]];
  }
  uint8_t Flip(int c, int i) const { return flips_[c * block_bytes_ + i]; }

 private:
  int block_bytes_;
  size_t stride_[2];
  std::vector<size_t> offsets_;
  std::vector<uint8_t> regions_, flips_;
};

void CheckPackable(const WeightRef& w) {
  if (!HasPackedLayout(w.dtype)) Fail("PackWeight: ", DTypeName(w.dtype), " has no packed layout");
  if (w.cols % BlockElems(w.dtype) != 0 || w.row_bytes != RowBytes(w.dtype, w.cols)) {
    Fail("PackWeight: ", DTypeName(w.dtype), " rows of ", w.cols, " elements need whole blocks and ",
         RowBytes(w.dtype, w.cols), " bytes per row, have ", w.row_bytes);
  }
}

}  // namespace

bool HasPackedLayout(DType t) { return t == DType::kQ8_0 || t == DType::kQ4_K; }

size_t PackedBytes(DType t, int64_t rows, int64_t cols) {
  const int64_t groups = (rows + kPackRows - 1) / kPackRows;
  return static_cast<size_t>(groups * kPackRows) * RowBytes(t, cols);
}

WeightRef PackWeight(const WeightRef& w, uint8_t* out, ThreadPool& pool) {
  if (w.layout != WeightLayout::kRows) Fail("PackWeight: the weight is packed already");
  CheckPackable(w);
  const int64_t blocks = w.cols / BlockElems(w.dtype);
  const PlacementTable table(w.dtype, blocks);
  const int64_t groups = (w.rows + kPackRows - 1) / kPackRows;
  const size_t group_bytes = kPackRows * w.row_bytes;
  pool.ParallelFor(groups, [&](int64_t g) {
    uint8_t* dst = out + g * group_bytes;
    std::memset(dst, 0, group_bytes);  // padding rows: zero scales, so zero outputs
    if (w.dtype == DType::kQ8_0) {     // their codes still carry the +128 of code 0
      for (int64_t b = 0; b < blocks; ++b)
        for (int c = 0; c < kPackRows; ++c)
          for (int i = 2; i < kQ8_0Bytes; ++i) dst[table.Offset(c, i, b)] = 0x80;
    }
    const int count = static_cast<int>(std::min<int64_t>(kPackRows, w.rows - g * kPackRows));
    for (int c = 0; c < count; ++c) {
      const uint8_t* row = w.Row(g * kPackRows + c);
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* blk = row + b * table.block_bytes();
        for (int i = 0; i < table.block_bytes(); ++i) dst[table.Offset(c, i, b)] = blk[i] ^ table.Flip(c, i);
      }
    }
  });
  WeightRef packed = w;
  packed.data = out;
  packed.layout = WeightLayout::kGroups16;
  return packed;
}

void UnpackRow(const WeightRef& w, int64_t row, uint8_t* out) {
  if (w.layout != WeightLayout::kGroups16) Fail("UnpackRow: the weight is not packed");
  if (row < 0 || row >= w.rows) Fail("UnpackRow: row ", row, " out of range [0, ", w.rows, ")");
  CheckPackable(w);
  const int64_t blocks = w.cols / BlockElems(w.dtype);
  // One table per thread for the last shape seen: rows are unpacked one at a time (embedding
  // lookups, the portable kernel), mostly from the same few matrices.
  thread_local std::optional<PlacementTable> table;
  thread_local std::pair<DType, int64_t> table_for{DType::kF32, -1};
  if (!table || table_for != std::make_pair(w.dtype, blocks)) {
    table.emplace(w.dtype, blocks);
    table_for = {w.dtype, blocks};
  }
  const uint8_t* src = PackedGroup(w, row / kPackRows);
  const int c = static_cast<int>(row % kPackRows);
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = out + b * table->block_bytes();
    for (int i = 0; i < table->block_bytes(); ++i) blk[i] = src[table->Offset(c, i, b)] ^ table->Flip(c, i);
  }
}

}  // namespace dflash::ops
