// A named, typed, shaped view of bytes that someone else owns (usually a memory-mapped file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace dflash {

// How a 2-D weight's rows are laid out. kRows: row after row, as files store them. kGroups16:
// rows in groups of 16 with each block's fields interleaved across the group, the order the
// 16-column SIMD kernels consume them in (ops/weight_pack.h; block-quantised formats).
enum class WeightLayout : uint8_t { kRows, kGroups16 };

struct Tensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // outermost first, as stored (HF: [out_features, in_features])
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  std::string file;  // where it came from, for error messages
  bool bf16_activations = false;  // see WeightRef
  WeightLayout layout = WeightLayout::kRows;

  // Trusts the shape: loaders admit a shape from a file only through TensorBytes.
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  std::string ShapeString() const;
};

// The bytes a tensor of `shape` and `dtype` occupies: rows of shape.back() elements (one row
// for a scalar) in whole blocks. Shapes come from untrusted files, so this is where they are
// checked: throws Error naming `where` and the shape when a dimension is negative, a row is
// not whole blocks, or the element or byte count overflows (a wrapped count would let a short
// file pass the size check and kernels read or write far past it).
size_t TensorBytes(DType dtype, const std::vector<int64_t>& shape, const std::string& where);

// A 2-D weight as kernels see it: `rows` output features, each `cols` inputs wide, rows
// `row_bytes` apart (kRows; kGroups16 groups are 16 * ops::PackedRowBytes apart). Quantised
// dtypes keep their native blocks.
struct WeightRef {
  const uint8_t* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  // BF16 weights only: MatMul may round x to bf16 and use native bf16 dot products
  // (AVX512_BF16), trading exact f32 products for about 2x the arithmetic rate.
  bool bf16_activations = false;
  WeightLayout layout = WeightLayout::kRows;
  // kRows only.
  const uint8_t* Row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
};

}  // namespace dflash
