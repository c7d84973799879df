#include "io/mlx_quantized.h"

#include <cstring>
#include <map>
#include <regex>

#include "core/error.h"
#include "ops/mlx_affine.h"

namespace dflash {

namespace {

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

struct Scheme {
  int bits = 0;
  int group = 0;
};

Scheme ReadScheme(const JsonObject& q, const Scheme& fallback) {
  Scheme s{q.Get<int>("bits", fallback.bits), q.Get<int>("group_size", fallback.group)};
  const std::string mode = q.Get<std::string>("mode", "affine");
  if (mode != "affine") Fail(q.where(), ": quantization mode '", mode, "' is not supported (affine only)");
  return s;
}

float ToF32(const Tensor& t, int64_t i) {
  const uint8_t* p = t.data + static_cast<size_t>(i) * BlockBytes(t.dtype);
  uint16_t h;
  switch (t.dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kBF16: std::memcpy(&h, p, 2); return BF16ToF32(h);
    case DType::kF16: std::memcpy(&h, p, 2); return F16ToF32(h);
    default: Fail(t.file, ": tensor '", t.name, "' has dtype ", DTypeName(t.dtype), " (MLX scales and biases are F32, BF16 or F16)");
  }
}

// Whether `t`'s bytes are exactly what its dtype and shape need (false where the shape's
// byte count overflows): the store may hold tensors from anywhere, and Repack trusts both.
bool BytesMatchShape(const Tensor& t, const std::string& what) {
  return t.nbytes == TensorBytes(t.dtype, t.shape, what + ": tensor '" + t.name + "'");
}

struct PackedShape {
  int64_t rows, cols;
};

// The logical [rows, cols] of a packed matrix, once the weight's words, the scales and the
// biases are checked to describe one matrix in shape and in bytes, so that Repack reads
// nothing past them and its output's size cannot wrap.
PackedShape CheckPacked(const Tensor& weight, const Tensor& scales, const Tensor& biases, const Scheme& s,
                        const std::string& what) {
  if (weight.dtype != DType::kU32 || weight.shape.size() != 2 || weight.shape[0] < 1 || weight.shape[1] < 1) {
    Fail(what, ": weight must be non-empty 2-D U32 words, is ", DTypeName(weight.dtype), " ", weight.ShapeString());
  }
  if (!BytesMatchShape(weight, what)) {
    Fail(what, ": weight ", weight.ShapeString(), " holds ", weight.nbytes, " bytes, not 4 per word");
  }
  // weight.nbytes is mapped memory (far below 2^60 bytes), so these products cannot overflow.
  const int64_t rows = weight.shape[0], cols = weight.shape[1] * 32 / s.bits;
  const std::vector<int64_t> want{rows, cols / s.group};
  if (cols % s.group != 0 || scales.shape != want || biases.shape != want || biases.dtype != scales.dtype) {
    Fail(what, ": weight ", weight.ShapeString(), " at ", s.bits, " bits is ", rows, " x ", cols,
         ", so scales and biases must both be [", rows, ", ", cols / s.group, "] of one dtype; they are ",
         scales.ShapeString(), " ", DTypeName(scales.dtype), " and ", biases.ShapeString(), " ",
         DTypeName(biases.dtype));
  }
  for (const Tensor* t : {&scales, &biases}) {
    if (!BytesMatchShape(*t, what)) {
      Fail(what, ": tensor '", t->name, "' ", t->ShapeString(), " of ", DTypeName(t->dtype), " holds ", t->nbytes,
           " bytes");
    }
  }
  return {rows, cols};
}

// The blocks of one matrix: per row, per group, f32 scale and bias, then the codes re-laid.
ByteBuffer Repack(const Tensor& weight, const Tensor& scales, const Tensor& biases,
                            int bits, DType type, int64_t rows, int64_t cols) {
  const int64_t group = BlockElems(type), groups = cols / group;
  const size_t block_bytes = BlockBytes(type);
  const int64_t words = weight.shape[1];
  const uint32_t mask = (1u << bits) - 1;
  const int per_word = 32 / bits;
  ByteBuffer out(static_cast<size_t>(rows) * RowBytes(type, cols), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* wrow = weight.data + static_cast<size_t>(r) * words * 4;
    for (int64_t g = 0; g < groups; ++g) {
      uint8_t* blk = out.data() + (static_cast<size_t>(r) * groups + g) * block_bytes;
      const float scale = ToF32(scales, r * groups + g), bias = ToF32(biases, r * groups + g);
      std::memcpy(blk + mlx::kScaleOffset, &scale, 4);
      std::memcpy(blk + mlx::kBiasOffset, &bias, 4);
      for (int64_t e = 0; e < group; ++e) {
        const int64_t k = g * group + e;
        uint32_t word;
        std::memcpy(&word, wrow + 4 * (k / per_word), 4);
        const int q = static_cast<int>((word >> (bits * (k % per_word))) & mask);
        mlx::SetCode(blk, bits, static_cast<int>(e), q);
      }
    }
  }
  return out;
}

// mlx-lm stacks a MoE layer's experts per matrix ("<mlp>.switch_mlp.<proj>.{weight,scales,
// biases}", [E][rows][cols]); they become per-expert views of the same bytes under
// transformers' names ("<mlp>.experts.<e>.<proj>.*"). Returns each new module's stacked source,
// whose name the quantization overrides use.
std::map<std::string, std::string> SplitSwitchMlp(TensorStore& store) {
  static const std::regex stacked(R"((.*\.mlp)\.switch_mlp\.((gate|up|down)_proj)\.(weight|scales|biases))");
  std::map<std::string, std::string> sources;
  for (const std::string& name : store.Names()) {
    std::smatch m;
    if (!std::regex_match(name, m, stacked)) continue;
    const Tensor t = *store.Find(name);
    if (t.shape.size() != 3 || t.nbytes % t.shape[0] != 0) {
      Fail(store.origin(), ": tensor '", name, "' is ", t.ShapeString(), ", not experts stacked [E][rows][cols]");
    }
    const size_t slice = t.nbytes / t.shape[0];
    for (int64_t e = 0; e < t.shape[0]; ++e) {
      const std::string module = m[1].str() + ".experts." + std::to_string(e) + "." + m[2].str();
      Tensor v = t;
      v.name = module + "." + m[4].str();
      v.shape = {t.shape[1], t.shape[2]};
      v.data = t.data + e * slice;
      v.nbytes = slice;
      store.Add(std::move(v));
      sources[module] = m[1].str() + ".switch_mlp." + m[2].str();
    }
    store.Remove(name);
  }
  return sources;
}

}  // namespace

int RepackMlxQuantized(const Json& config, const std::string& where, TensorStore& store) {
  const std::map<std::string, std::string> sources = SplitSwitchMlp(store);
  if (!config.is_object() || !config.contains("quantization")) return 0;
  const JsonObject quant(config.at("quantization"), where + ": quantization");
  const Scheme defaults = ReadScheme(quant, Scheme{});
  int repacked = 0;
  for (const std::string& name : store.Names()) {
    if (!EndsWith(name, ".scales")) continue;
    const std::string module = name.substr(0, name.size() - 7);
    const std::string what = store.origin() + ": MLX-quantised '" + module + "'";
    const Tensor* weight = store.Find(module + ".weight");
    const Tensor* biases = store.Find(module + ".biases");
    const Tensor& scales = *store.Find(name);
    if (!weight || !biases) Fail(what, ": has .scales but no ", weight ? ".biases" : ".weight");
    Scheme s = defaults;
    const auto source = sources.find(module);
    const std::string& key = source == sources.end() ? module : source->second;
    if (quant.Has(key)) {
      const Json& o = quant.raw().at(key);
      if (o.is_boolean() && !o.get<bool>()) Fail(what, ": quantization marks it unquantised, yet it has scales");
      if (!o.is_object()) Fail(where, ": quantization['", key, "'] must be an object or false");
      s = ReadScheme(JsonObject(o, where + ": quantization['" + key + "']"), defaults);
    }
    DType type;
    if (!mlx::BlockType(s.bits, s.group, &type)) {
      Fail(what, ": bits ", s.bits, " with group size ", s.group,
           " is not supported (bits 4 or 8, group size 32, 64 or 128)");
    }
    const auto [rows, cols] = CheckPacked(*weight, scales, *biases, s, what);
    ByteBuffer bytes = Repack(*weight, scales, *biases, s.bits, type, rows, cols);
    store.ReplaceTensor(module + ".weight", type, {rows, cols}, std::move(bytes));
    store.Remove(name);
    store.Remove(module + ".biases");
    ++repacked;
  }
  for (const std::string& name : store.Names()) {
    const Tensor& t = *store.Find(name);
    if (t.dtype == DType::kU32 && EndsWith(name, ".weight")) {
      Fail(store.origin(), ": tensor '", name, "' is U32 (MLX-quantised) but has no .scales and .biases");
    }
  }
  return repacked;
}

bool UndoMlxLmHybridLayout(TensorStore& store) {
  bool mlx_layout = false;
  for (const std::string& name : store.Names()) {
    const Tensor& t = *store.Find(name);
    if (EndsWith(name, ".linear_attn.conv1d.weight") && t.shape.size() == 3 && t.shape[2] == 1 && t.shape[1] > 1) {
      mlx_layout = true;
      ByteBuffer same(t.data, t.data + t.nbytes);
      store.ReplaceTensor(name, t.dtype, {t.shape[0], 1, t.shape[1]}, std::move(same));
    }
  }
  if (!mlx_layout) return false;
  for (const std::string& name : store.Names()) {
    if (!name.starts_with("language_model.")) continue;
    // The store may own these bytes (a repacked matrix): the new name gets its own copy.
    Tensor t = *store.Find(name);
    t.name = name.substr(std::string("language_model.").size());
    store.Add(t);
    store.ReplaceTensor(t.name, t.dtype, t.shape, ByteBuffer(t.data, t.data + t.nbytes));
    store.Remove(name);
  }
  for (const std::string& name : store.Names()) {
    const bool one_plus = EndsWith(name, ".input_layernorm.weight") || EndsWith(name, ".post_attention_layernorm.weight") ||
                          EndsWith(name, ".q_norm.weight") || EndsWith(name, ".k_norm.weight") || name == "model.norm.weight";
    const Tensor& t = *store.Find(name);
    if (!one_plus || t.shape.size() != 1) continue;
    ByteBuffer w(t.shape[0] * sizeof(float));
    for (int64_t i = 0; i < t.shape[0]; ++i) {
      const float x = ToF32(t, i) - 1.0f;
      std::memcpy(w.data() + i * sizeof(float), &x, sizeof(float));
    }
    store.ReplaceData(name, DType::kF32, std::move(w));
  }
  return true;
}

}  // namespace dflash
