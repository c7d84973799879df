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

// A packed block's fields: runs of dwords, which become one vector (a dword per lane) each; runs
// of bytes, 4 of a lane's per vector too, but byte k of lane c at 16 (k % 4) + c of vector
// k / 4; or one f16, which goes to the block's f16 slots.
enum class FieldKind : uint8_t { kDwords, kBytes, kF16 };
struct Field {
  int offset, bytes;
  FieldKind kind;
  bool flip;  // Q8_0 codes: stored + 128
};

struct FormatFields {
  Field fields[4];
  int count;
};

// The fields of the block the packer places: the file's block, except Q6_K's wide block.
FormatFields Fields(DType t) {
  using enum FieldKind;
  switch (t) {
    case DType::kQ8_0: return {{{0, 2, kF16, false}, {2, 32, kDwords, true}}, 2};
    case DType::kQ4_0: return {{{0, 2, kF16, false}, {2, 16, kDwords, false}}, 2};
    case DType::kQ4_K: return {{{0, 4, kDwords, false}, {4, 12, kDwords, false}, {16, 128, kDwords, false}}, 3};
    case DType::kQ6_K: return {{{0, 256, kDwords, false}, {256, 16, kBytes, false}, {272, 2, kF16, false}}, 3};
    default: Fail("PackWeight: ", DTypeName(t), " has no packed layout");
  }
}

// Q6_K's wide block: its 256 6-bit codes one per byte, then its 16 int8 scales and f16 d.
constexpr int kQ6_KWideBytes = 274;

int PlacedBlockBytes(DType t) { return t == DType::kQ6_K ? kQ6_KWideBytes : static_cast<int>(BlockBytes(t)); }

void WidenQ6_K(const uint8_t* block, uint8_t* wide) {
  for (int e = 0; e < 256; ++e) wide[e] = static_cast<uint8_t>(Q6KCode(block, e));
  std::memcpy(wide + 256, block + kQ6_KScales, 16);
  std::memcpy(wide + 272, block + kQ6_KD, 2);
}

void NarrowQ6_K(const uint8_t* wide, uint8_t* block) {
  EncodeQ6KCodes(wide, block);
  std::memcpy(block + kQ6_KScales, wide + 256, 16);
  std::memcpy(block + kQ6_KD, wide + 272, 2);
}

// Where each byte of one placed block (Fields) of each lane goes in a packed group (see
// weight_pack.h): blocks come in pairs, [vectors of 2b][vectors of 2b + 1][f16 of both].
class PlacementTable {
 public:
  PlacementTable(DType t, int64_t blocks) : block_bytes_(PlacedBlockBytes(t)), blocks_(blocks) {
    const FormatFields f = Fields(t);
    int vectors = 0;  // per block: one per 4 bytes of the dword and byte fields
    for (int i = 0; i < f.count; ++i) vectors += VectorsOf(f.fields[i]);
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
          switch (field.kind) {
            case FieldKind::kDwords: offsets_[at] = 64 * (vector + k / 4) + 4 * c + k % 4; break;
            case FieldKind::kBytes: offsets_[at] = 64 * (vector + k / 4) + 16 * (k % 4) + c; break;
            case FieldKind::kF16: offsets_[at] = 2 * c + k; break;
          }
          f16_[at] = field.kind == FieldKind::kF16;
          flips_[at] = field.flip ? 0x80 : 0;
        }
        vector += VectorsOf(field);
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
  static int VectorsOf(const Field& f) { return f.kind == FieldKind::kF16 ? 0 : f.bytes / 4; }
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
    if (f.fields[i].kind == FieldKind::kF16) return kPackRows * 2;
  return 0;
}

int64_t PackedRowBytes(DType t, int64_t cols) { return cols / BlockElems(t) * PlacedBlockBytes(t); }

size_t PackedBytes(DType t, int64_t rows, int64_t cols) {
  const int64_t groups = (rows + kPackRows - 1) / kPackRows;
  return static_cast<size_t>(groups * kPackRows * PackedRowBytes(t, cols));
}

WeightRef PackWeight(const WeightRef& w, uint8_t* out, ThreadPool& pool) {
  if (w.layout != WeightLayout::kRows) Fail("PackWeight: the weight is packed already");
  CheckPackable(w);
  const int64_t blocks = w.cols / BlockElems(w.dtype);
  const PlacementTable table(w.dtype, blocks);
  const int64_t groups = (w.rows + kPackRows - 1) / kPackRows;
  const size_t group_bytes = kPackRows * PackedRowBytes(w.dtype, w.cols);
  pool.ParallelFor(groups, [&](int64_t g) {
    uint8_t* dst = out + g * group_bytes;
    // Rows past the matrix are packed as all-zero blocks: zero scales, so zero outputs.
    static constexpr uint8_t kZeroBlock[kQ6_KWideBytes] = {};  // the largest placed block
    uint8_t wide[kQ6_KWideBytes];
    const int64_t count = std::min<int64_t>(kPackRows, w.rows - g * kPackRows);
    for (int c = 0; c < kPackRows; ++c) {
      const uint8_t* row = c < count ? w.Row(g * kPackRows + c) : nullptr;
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* blk = row ? row + b * BlockBytes(w.dtype) : kZeroBlock;
        if (row && w.dtype == DType::kQ6_K) blk = (WidenQ6_K(blk, wide), wide);
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
  uint8_t wide[kQ6_KWideBytes];
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = out + b * BlockBytes(w.dtype);
    uint8_t* placed = w.dtype == DType::kQ6_K ? wide : blk;
    for (int i = 0; i < table->block_bytes(); ++i) placed[i] = src[table->Offset(c, i, b)] ^ table->Flip(c, i);
    if (w.dtype == DType::kQ6_K) NarrowQ6_K(wide, blk);
  }
}

}  // namespace dflash::ops
