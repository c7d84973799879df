// The kGroups16 layout (core/tensor.h) of Q8_0 and Q4_K weights: what the 16-column kernels in
// ops/matmul_quant.cc read with plain contiguous loads, so that no block is transposed or
// gathered at run time. It is made once, at load, and holds exactly the row layout's bytes,
// rearranged; only the zero rows that pad the last group to 16 are added.
//
// Rows 16g .. 16g + 15 form group g, 16 * RowBytes(dtype, cols) bytes at data + g * that. In a
// group, "lane c" is row 16g + c and a "vector" is 64 bytes holding one dword per lane:
//
//   Q8_0, nb = cols / 32 blocks:  [nb x 512 B codes][nb x 32 B scales]
//     codes of block b: 8 vectors; dword j of lane c = codes 4j .. 4j+3 of row c, each
//     stored + 128 (as unsigned bytes, the operand vpdpbusd and the tile unit want)
//     scales of block b: the 16 rows' f16 d, lane order
//   Q4_K, ns = cols / 256 super-blocks:  [ns x 2048 B qs][ns x 256 B heads]
//     qs of super-block s: 4 chunks of 8 vectors; dword j of lane c in chunk h = qs bytes
//     32h + 4j .. 32h + 4j + 3 of row c (low nibbles: sub-block 2h, high: 2h + 1)
//     head of super-block s: 1 vector of (d | dmin << 16), then 3 vectors of the 12 packed
//     scale bytes (vector i: bytes 4i .. 4i + 3)
//
// Every region starts at a multiple of 64 bytes from the group's start when cols is a multiple
// of 64 (Q8_0) or 256 (Q4_K), so loads from a 64-byte-aligned buffer never split a line.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace dflash::ops {

constexpr int64_t kPackRows = 16;

// Q8_0 and Q4_K.
bool HasPackedLayout(DType t);

// Bytes of a kGroups16 copy of a rows x cols matrix.
size_t PackedBytes(DType t, int64_t rows, int64_t cols);

// Writes w (kRows, a packable dtype) in kGroups16 layout to out (PackedBytes(...) bytes,
// 64-byte aligned for the kernels' sake) and returns the WeightRef over it.
WeightRef PackWeight(const WeightRef& w, uint8_t* out, ThreadPool& pool);

// The kRows bytes of row `row` of a kGroups16 weight (w.row_bytes of them) at out.
void UnpackRow(const WeightRef& w, int64_t row, uint8_t* out);

// Group g's first byte.
inline const uint8_t* PackedGroup(const WeightRef& w, int64_t g) {
  return w.data + static_cast<size_t>(g) * kPackRows * w.row_bytes;
}

}  // namespace dflash::ops
