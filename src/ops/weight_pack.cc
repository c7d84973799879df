#include "ops/weight_pack.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ops/quant_blocks.h"

namespace dflash::ops {

namespace {

using namespace quant;

// A block format as fields of its row-layout block: runs of dwords, which become one vector
// (a dword per lane) each, or one f16, which goes to the group's f16 region.
struct Field {
  int offset, bytes;
  bool f16;
  bool flip;  // Q8_0 codes: stored + 128
};

struct FormatFields {
  Field fields[4];
  int count;
};

FormatFields Fields(DType t) {
  switch (t) {
    case DType::kQ8_0: return {{{0, 2, true, false}, {2, 32, false, true}}, 2};
    case DType::kQ4_0: return {{{0, 2, true, false}, {2, 16, false, false}}, 2};
    case DType::kQ4_K: return {{{0, 4, false, false}, {4, 12, false, false}, {16, 128, false, false}}, 3};
    case DType::kQ6_K:
      return {{{0, 128, false, false}, {128, 64, false, false}, {192, 16, false, false}, {208, 2, true, false}}, 4};
    default: Fail("PackWeight: ", DTypeName(t), " has no packed layout");
  }
}

// Where each byte of one row-layout block of each lane goes in a packed group (see
// weight_pack.h): blocks come in pairs, [vectors of 2b][vectors of 2b + 1][f16 of both].
class PlacementTable {
 public:
  PlacementTable(DType t, int64_t blocks) : block_bytes_(static_cast<int>(BlockBytes(t))), blocks_(blocks) {
    const FormatFields f = Fields(t);
    int vectors = 0;  // per block: one per dword of the dword fields
    for (int i = 0; i < f.count; ++i) vectors += f.fields[i].f16 ? 0 : f.fields[i].bytes / 4;
    vector_bytes_ = 64 * int64_t{vectors};
    f16_bytes_ = PackedF16Bytes(t);
    offsets_.resize(kPackRows * block_bytes_);
    f16_.resize(kPackRows * block_bytes_);
    flips_.resize(kPackRows * block_bytes_);
    for (int c = 0; c < kPackRows; ++c) {
      int vector = 0;
      for (int i = 0; i < f.count; ++i) {
        const Field& field = f.fields[i];
        for (int k = 0; k < field.bytes; ++k) {
          const int at = c * block_bytes_ + field.offset + k;
          offsets_[at] = field.f16 ? 2 * c + k : 64 * (vector + k / 4) + 4 * c + k % 4;
          f16_[at] = field.f16;
          flips_[at] = field.flip ? 0x80 : 0;
        }
        if (!field.f16) vector += field.bytes / 4;
      }
    }
  }
  int block_bytes() const { return block_bytes_; }
  size_t Offset(int c, int i, int64_t b) const {
    const int at = c * block_bytes_ + i;
    const int64_t start = f16_[at] ? PackedF16At(b, blocks_, vector_bytes_, f16_bytes_)
                                   : PackedVectorsAt(b, vector_bytes_, f16_bytes_);
    return static_cast<size_t>(start) + offsets_[at];
  }
  uint8_t Flip(int c, int i) const { return flips_[c * block_bytes_ + i]; }

 private:
  int block_bytes_;
  int64_t blocks_;
  int64_t vector_bytes_, f16_bytes_;  // per block
  std::vector<size_t> offsets_;      // within its block's vectors, or its f16 slot
  std::vector<uint8_t> f16_, flips_;
};

void CheckPackable(const WeightRef& w) {
  if (!HasPackedLayout(w.dtype)) Fail("PackWeight: ", DTypeName(w.dtype), " has no packed layout");
  if (w.cols % BlockElems(w.dtype) != 0 || w.row_bytes != RowBytes(w.dtype, w.cols)) {
    Fail("PackWeight: ", DTypeName(w.dtype), " rows of ", w.cols, " elements need whole blocks and ",
         RowBytes(w.dtype, w.cols), " bytes per row, have ", w.row_bytes);
  }
}

}  // namespace

bool HasPackedLayout(DType t) { return IsBlockQuantized(t); }

int64_t PackedF16Bytes(DType t) {
  const FormatFields f = Fields(t);
  for (int i = 0; i < f.count; ++i)
    if (f.fields[i].f16) return kPackRows * 2;
  return 0;
}

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
    // Rows past the matrix are packed as all-zero blocks: zero scales, so zero outputs.
    static constexpr uint8_t kZeroBlock[kQ6_KBytes] = {};  // the largest block
    const int64_t count = std::min<int64_t>(kPackRows, w.rows - g * kPackRows);
    for (int c = 0; c < kPackRows; ++c) {
      const uint8_t* row = c < count ? w.Row(g * kPackRows + c) : nullptr;
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* blk = row ? row + b * table.block_bytes() : kZeroBlock;
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
