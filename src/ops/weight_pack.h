// The kGroups16 layout (core/tensor.h) of block-quantised weights (Q8_0, Q4_0, Q4_K, Q6_K):
// what the 16-column kernels in ops/matmul_quant.cc read with plain contiguous loads, so that
// no block is transposed or gathered at run time. It is made once, at load. For Q8_0, Q4_0 and
// Q4_K it holds exactly the row layout's bytes, rearranged. Q6_K's 6-bit codes are stored one
// per byte (274 bytes per block instead of 210): splicing each code from two bit fields made
// its one-row kernel compute-bound, Qwen3-0.6B's LM head taking 12.4 ms on 1 thread against
// 6.2 for Q8_0, which has 30% more bytes. Padding the last group adds zero rows.
//
// Rows 16g .. 16g + 15 form group g, 16 * PackedRowBytes(dtype, cols) bytes at data + g * that.
// In a group, "lane c" is row 16g + c and a "vector" is 64 bytes holding one dword per lane.
// Vector v of block b holds dword v of every lane's block b, counting only the block's dword
// fields, in order; a byte field (Q6_K's scales) takes a vector per 4 bytes too, but byte k
// of lane c is at 16 (k % 4) + c of its vector k / 4, so one 16-byte load gives byte k of all
// 16 lanes; the block's f16 field (Q8_0, Q4_0: d; Q6_K: d), one per lane in lane order, is 32 bytes. Blocks
// come in pairs, [V vectors of 2b][V vectors of 2b + 1][32 B f16 of 2b][32 B f16 of 2b + 1]
// (an odd last block alone, [V vectors][32 B]), so a kernel streams one run of memory. A
// separate f16 region at the group's end made a second stream that the one-row kernels waited
// on: Qwen3-0.6B's Q8_0 LM head took 10.7-11.8 ms instead of 6.2-8.2 (EPYC, 1 thread,
// bench/matmul_bench.cc), Q4_0's 8.6-9.1 instead of 2.7-4.1. Per block:
//
//   Q8_0  V = 8:  codes 0-31, each stored + 128 (unsigned, as vpdpbusd and the tile unit want)
//   Q4_0  V = 4:  qs 0-15
//   Q4_K  V = 36: (d | dmin << 16), 3 of packed scales, 32 of qs
//   Q6_K  V = 68: 64 of codes 0-255 (6-bit, unsigned), 4 of int8 scales (byte field)
//
// With cols a multiple of 64 (Q8_0, Q4_0, Q4_K) or 512 (Q6_K), every vector and pair of f16
// slots lies on a 64-byte boundary of a 64-byte-aligned buffer, so no load splits a cache line.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace dflash::ops {

constexpr int64_t kPackRows = 16;

// The block-quantised formats.
bool HasPackedLayout(DType t);

// Bytes of one block's f16 slots in a group: 32 for the formats with an f16 field, else 0.
int64_t PackedF16Bytes(DType t);

// Where block b's vectors and its f16 slots start in a group of `blocks` blocks per row, for
// a format with vector_bytes (64 * V) and f16_bytes (PackedF16Bytes) per block: the one
// definition of the pairing, shared by the packer and the kernels. b >= 0, so shifts and masks
// do the halving (the kernels compute these per block).
inline int64_t PackedVectorsAt(int64_t b, int64_t vector_bytes, int64_t f16_bytes) {
  return (b >> 1) * 2 * (vector_bytes + f16_bytes) + (b & 1) * vector_bytes;
}
inline int64_t PackedF16At(int64_t b, int64_t blocks, int64_t vector_bytes, int64_t f16_bytes) {
  const int64_t in_pair = (b | 1) < blocks ? 2 : 1;  // an odd last block is alone
  return (b >> 1) * 2 * (vector_bytes + f16_bytes) + in_pair * vector_bytes + (b & 1) * f16_bytes;
}

// Bytes per row of a kGroups16 copy (RowBytes, but Q6_K's are wider).
int64_t PackedRowBytes(DType t, int64_t cols);

// Bytes of a kGroups16 copy of a rows x cols matrix.
size_t PackedBytes(DType t, int64_t rows, int64_t cols);

// Writes w (kRows, a packable dtype) in kGroups16 layout to out (PackedBytes(...) bytes,
// 64-byte aligned for the kernels' sake) and returns the WeightRef over it.
WeightRef PackWeight(const WeightRef& w, uint8_t* out, ThreadPool& pool);

// The kRows bytes of row `row` of a kGroups16 weight (w.row_bytes of them) at out.
void UnpackRow(const WeightRef& w, int64_t row, uint8_t* out);

// Group g's first byte.
inline const uint8_t* PackedGroup(const WeightRef& w, int64_t g) {
  return w.data + static_cast<size_t>(g * kPackRows * PackedRowBytes(w.dtype, w.cols));
}

}  // namespace dflash::ops
