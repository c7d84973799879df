#include "core/tensor.h"

#include "core/error.h"

namespace dflash {

namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace

std::string Tensor::ShapeString() const { return dflash::ShapeString(shape); }

size_t TensorBytes(DType dtype, const std::vector<int64_t>& shape, const std::string& where) {
  int64_t elems = 1;
  for (int64_t d : shape) {
    if (d < 0) Fail(where, ": shape ", ShapeString(shape), " has a negative dimension");
    if (__builtin_mul_overflow(elems, d, &elems)) {
      Fail(where, ": shape ", ShapeString(shape), " has more elements than fit in 64 bits");
    }
  }
  const int64_t cols = shape.empty() ? 1 : shape.back();
  if (cols % BlockElems(dtype) != 0) {
    Fail(where, ": row length ", cols, " is not a multiple of the ", DTypeName(dtype), " block size ",
         BlockElems(dtype));
  }
  // Every row is whole blocks, so the tensor is elems / BlockElems blocks.
  const size_t blocks = static_cast<size_t>(elems / BlockElems(dtype));
  size_t bytes = 0;
  if (__builtin_mul_overflow(blocks, BlockBytes(dtype), &bytes)) {
    Fail(where, ": shape ", ShapeString(shape), " of ", DTypeName(dtype), " needs more bytes than fit in 64 bits");
  }
  return bytes;
}

}  // namespace dflash
