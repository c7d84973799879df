// All tensors of one model, by name, whatever file format they came from. The files stay
// memory-mapped for the store's lifetime; tensors point into them.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/huge_pages.h"
#include "core/mapped_file.h"
#include "core/tensor.h"

namespace dflash {

class TensorStore {
 public:
  explicit TensorStore(std::string origin) : origin_(std::move(origin)) {}

  // Takes ownership of a mapped file whose tensors are added with Add().
  const MappedFile& Keep(std::unique_ptr<MappedFile> file);
  void Add(Tensor t);  // throws on duplicate names
  // Gives tensor `name` new contents of another dtype (same shape), owned by the store: the
  // load-time quantiser's output. Pointers to the old data must not be kept.
  void ReplaceData(const std::string& name, DType dtype, ByteBuffer bytes);
  // The same with a new shape (a repacked format whose stored shape differed, e.g. MLX's
  // packed uint32 words); the bytes must be a whole number of `dtype` rows of shape.back().
  void ReplaceTensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                     ByteBuffer bytes);
  // A zeroed, untouched huge-page buffer of `bytes` that the store keeps for its lifetime
  // (core/huge_pages.h): where PackMatrices packs all of a model's matrices.
  uint8_t* NewArena(size_t bytes);
  // Tensor `name` in the kGroups16 layout (ops/weight_pack.h), same dtype and shape, at
  // `packed`, inside one of the store's arenas. Frees the bytes it replaces if the store owned them.
  void ReplaceWithPacked(const std::string& name, const uint8_t* packed);
  void Remove(const std::string& name);  // throws when absent

  // Lets MatMul round activations to bf16 against every 2-D BF16 tensor (WeightRef::
  // bf16_activations); returns how many it marked. Bind models afterwards.
  int AllowBf16Activations();

  const Tensor* Find(const std::string& name) const;
  // Throws Error naming the model and the tensor when it is missing, or when its shape is
  // not `shape` (-1 matches anything).
  const Tensor& Require(const std::string& name, const std::vector<int64_t>& shape) const;
  std::vector<std::string> Names() const;
  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  // Replaced tensors' bytes, by tensor name (a second replacement frees the first's).
  std::unordered_map<std::string, ByteBuffer> owned_;
  std::vector<HugeBuffer> arenas_;
  std::unordered_map<std::string, Tensor> tensors_;
};

// A 2-D tensor as a kernel operand (rows = shape[0]).
WeightRef AsWeight(const Tensor& t);
// A 1-D tensor converted to f32 (norm weights, biases), for the model to own.
std::vector<float> ToF32Vector(const Tensor& t);

}  // namespace dflash
