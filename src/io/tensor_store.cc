#include "io/tensor_store.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "core/error.h"
#include "ops/ops.h"
#include "ops/weight_pack.h"

namespace dflash {

const MappedFile& TensorStore::Keep(std::unique_ptr<MappedFile> file) {
  files_.push_back(std::move(file));
  return *files_.back();
}

void TensorStore::Add(Tensor t) {
  const std::string name = t.name;
  if (!tensors_.emplace(name, std::move(t)).second) {
    Fail(origin_, ": tensor '", name, "' appears twice");
  }
}

namespace {

// Drops this process's resident pages of a mapped tensor whose bytes are being replaced: its
// file stays mapped (other tensors live in it), but a load-time quantiser or packer that left
// the source pages resident would hold the weights twice, mapped and converted. Only whole
// pages inside the tensor: the pages at its ends may hold its neighbours. Tensors in no mapped
// file (owned, or a test's buffers) are left alone.
void ReleaseMappedPages(const Tensor& t, const std::vector<std::unique_ptr<MappedFile>>& files) {
  const bool mapped = std::any_of(files.begin(), files.end(), [&](const std::unique_ptr<MappedFile>& f) {
    return t.data >= f->data() && t.data + t.nbytes <= f->data() + f->size();
  });
  if (!mapped) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(t.data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(t.data) + t.nbytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace

void TensorStore::ReplaceData(const std::string& name, DType dtype, ByteBuffer bytes) {
  const Tensor* t = Find(name);
  if (!t) Fail(origin_, ": tensor '", name, "' is missing");
  ReplaceTensor(name, dtype, t->shape, std::move(bytes));
}

void TensorStore::ReplaceTensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                                ByteBuffer bytes) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) Fail(origin_, ": tensor '", name, "' is missing");
  Tensor& t = it->second;
  Tensor shaped;
  shaped.shape = std::move(shape);
  if (bytes.size() != TensorBytes(dtype, shaped.shape, origin_ + ": tensor '" + name + "'")) {
    Fail(origin_, ": tensor '", name, "': ", bytes.size(), " bytes of ", DTypeName(dtype),
         " do not fit shape ", shaped.ShapeString());
  }
  if (!owned_.count(name)) ReleaseMappedPages(t, files_);
  ByteBuffer& owned = owned_[name] = std::move(bytes);
  t.dtype = dtype;
  t.shape = std::move(shaped.shape);
  t.data = owned.data();
  t.nbytes = owned.size();
  t.layout = WeightLayout::kRows;
}

uint8_t* TensorStore::NewArena(size_t bytes) { return arenas_.emplace_back(bytes).data(); }

void TensorStore::ReplaceWithPacked(const std::string& name, const uint8_t* packed) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) Fail(origin_, ": tensor '", name, "' is missing");
  Tensor& t = it->second;
  const size_t expect = t.shape.size() == 2 ? ops::PackedBytes(t.dtype, t.shape[0], t.shape[1]) : 0;
  const bool inside = std::any_of(arenas_.begin(), arenas_.end(), [&](const HugeBuffer& a) {
    return packed >= a.data() && expect <= a.size() && packed - a.data() <= static_cast<ptrdiff_t>(a.size() - expect);
  });
  if (t.shape.size() != 2 || !inside) {
    Fail(origin_, ": tensor '", name, "': no arena of the store holds a packed ", DTypeName(t.dtype), " ",
         t.ShapeString());
  }
  if (!owned_.count(name)) ReleaseMappedPages(t, files_);
  owned_.erase(name);  // frees the rows it replaces
  t.data = packed;
  t.nbytes = expect;
  t.layout = WeightLayout::kGroups16;
}

void TensorStore::Remove(const std::string& name) {
  if (tensors_.erase(name) == 0) Fail(origin_, ": tensor '", name, "' is missing");
  owned_.erase(name);
}

const Tensor* TensorStore::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const Tensor& TensorStore::Require(const std::string& name,
                                   const std::vector<int64_t>& shape) const {
  const Tensor* t = Find(name);
  if (!t) Fail(origin_, ": tensor '", name, "' is missing");
  bool ok = t->shape.size() == shape.size();
  for (size_t i = 0; ok && i < shape.size(); ++i) ok = shape[i] < 0 || shape[i] == t->shape[i];
  if (!ok) {
    Tensor want;
    want.shape = shape;
    Fail(t->file, ": tensor '", name, "' has shape ", t->ShapeString(), ", expected ",
         want.ShapeString());
  }
  return *t;
}

std::vector<std::string> TensorStore::Names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

WeightRef AsWeight(const Tensor& t) {
  if (t.shape.size() != 2) Fail(t.file, ": tensor '", t.name, "' is not 2-D");
  WeightRef w;
  w.data = t.data;
  w.dtype = t.dtype;
  w.rows = t.shape[0];
  w.cols = t.shape[1];
  if (w.cols % BlockElems(t.dtype) != 0) {
    Fail(t.file, ": tensor '", t.name, "': row length ", w.cols, " is not a multiple of the ",
         DTypeName(t.dtype), " block size");
  }
  w.row_bytes = RowBytes(t.dtype, w.cols);
  w.bf16_activations = t.bf16_activations;
  w.layout = t.layout;
  return w;
}

int TensorStore::AllowBf16Activations() {
  int marked = 0;
  for (auto& [name, t] : tensors_) {
    if (t.dtype != DType::kBF16 || t.shape.size() != 2) continue;
    t.bf16_activations = true;
    ++marked;
  }
  return marked;
}

std::vector<float> ToF32Vector(const Tensor& t) {
  if (t.shape.size() != 1) Fail(t.file, ": tensor '", t.name, "' is not 1-D");
  WeightRef w;
  w.data = t.data;
  w.dtype = t.dtype;
  w.rows = 1;
  w.cols = t.shape[0];
  w.row_bytes = RowBytes(t.dtype, w.cols);
  std::vector<float> out(static_cast<size_t>(w.cols));
  ops::DequantizeRow(w, 0, out.data());
  return out;
}

}  // namespace dflash
