#include "io/quantize_store.h"

#include <algorithm>

#include "core/error.h"
#include "ops/ops.h"
#include "ops/weight_pack.h"

namespace dflash {

std::optional<DType> ParseWeightQuant(const std::string& value, const std::string& flag) {
  if (value == "none") return std::nullopt;
  if (value == "q8_0") return DType::kQ8_0;
  if (value == "q4_0") return DType::kQ4_0;
  if (value == "q4_k") return DType::kQ4_K;
  Fail(flag, " must be none, q8_0, q4_0 or q4_k, got '", value, "'");
}

WeightRef QuantizeWeight(const WeightRef& w, DType to, ByteBuffer& bytes, ThreadPool& pool) {
  if (w.dtype != DType::kF32 && w.dtype != DType::kBF16 && w.dtype != DType::kF16) {
    Fail("QuantizeWeight: cannot quantise ", DTypeName(w.dtype), " weights (need F32, BF16 or F16)");
  }
  if (w.cols % BlockElems(to) != 0) {
    Fail("QuantizeWeight: row length ", w.cols, " is not a multiple of the ", DTypeName(to), " block size");
  }
  const size_t row_bytes = RowBytes(to, w.cols);
  bytes.resize(static_cast<size_t>(w.rows) * row_bytes);
  const int64_t rows_per_task = 64;
  pool.ParallelFor((w.rows + rows_per_task - 1) / rows_per_task, [&](int64_t task) {
    std::vector<float> row(static_cast<size_t>(w.cols));
    const int64_t end = std::min(w.rows, (task + 1) * rows_per_task);
    for (int64_t r = task * rows_per_task; r < end; ++r) {
      ops::DequantizeRow(w, r, row.data());
      ops::QuantizeRow(row.data(), w.cols, to, bytes.data() + r * row_bytes);
    }
  });
  return WeightRef{bytes.data(), to, w.rows, w.cols, row_bytes};
}

// A MoE layer's router and its shared expert's gate stay as stored, as llama.cpp keeps
// ffn_gate_inp in f32: they are a few rows each, and a quantised router would choose other
// experts than the checkpoint's.
namespace {
bool IsRouter(const std::string& name) {
  return name.ends_with(".mlp.gate.weight") || name.ends_with(".mlp.shared_expert_gate.weight");
}
}  // namespace

int QuantizeMatrices(TensorStore& store, DType to, ThreadPool& pool, std::span<const std::string> row_lookups) {
  int converted = 0;
  for (const std::string& name : store.Names()) {
    const Tensor& t = *store.Find(name);
    const bool is_float = t.dtype == DType::kF32 || t.dtype == DType::kBF16 || t.dtype == DType::kF16;
    if (t.shape.size() != 2 || !is_float || IsRouter(name)) continue;
    if (t.shape[1] % BlockElems(to) != 0) {
      if (std::find(row_lookups.begin(), row_lookups.end(), name) != row_lookups.end()) continue;
      Fail(t.file, ": tensor '", name, "' has rows of ", t.shape[1], " elements, not whole ",
           DTypeName(to), " blocks of ", BlockElems(to));
    }
    ByteBuffer bytes;
    QuantizeWeight(AsWeight(t), to, bytes, pool);
    store.ReplaceData(name, to, std::move(bytes));
    ++converted;
  }
  return converted;
}

int PackMatrices(TensorStore& store, ThreadPool& pool) {
  constexpr size_t kAlign = 64;
  std::vector<std::pair<std::string, size_t>> slices;  // name, offset into the arena
  size_t total = 0;
  for (const std::string& name : store.Names()) {
    const Tensor& t = *store.Find(name);
    if (t.shape.size() != 2 || !ops::HasPackedLayout(t.dtype) || t.layout != WeightLayout::kRows) continue;
    slices.emplace_back(name, total);
    total += (ops::PackedBytes(t.dtype, t.shape[0], t.shape[1]) + kAlign - 1) / kAlign * kAlign;
  }
  if (slices.empty()) return 0;
  // One arena for all of them: every matrix on huge pages, however small. Its pages become
  // resident as they are packed, while each matrix's rows are freed once packed, so loading
  // holds little more than one copy of the weights.
  uint8_t* arena = store.NewArena(total);
  for (const auto& [name, offset] : slices) {
    ops::PackWeight(AsWeight(*store.Find(name)), arena + offset, pool);
    store.ReplaceWithPacked(name, arena + offset);
  }
  return static_cast<int>(slices.size());
}

}  // namespace dflash
