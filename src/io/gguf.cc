#include "io/gguf.h"

#include <cstring>
#include <regex>

#include "core/error.h"
#include "io/gguf_layouts.h"
#include "ops/quant_blocks.h"

namespace dflash {

namespace {

// Bounds-checked little-endian reader over the mapped file.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const std::string& path) : data_(data), size_(size), path_(path) {}

  template <typename T>
  T Read(const char* what) {
    Need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string String(const char* what) {
    const uint64_t n = Read<uint64_t>(what);
    Need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  // A count of items at least `min_item_bytes` each: must fit in the rest of the file.
  uint64_t Count(const char* what, size_t min_item_bytes) {
    const uint64_t n = Read<uint64_t>(what);
    if (n > (size_ - pos_) / std::max<size_t>(min_item_bytes, 1)) {
      Fail(path_, ": ", what, " ", n, " does not fit in the file (truncated or corrupt)");
    }
    return n;
  }
  size_t pos() const { return pos_; }

 private:
  void Need(uint64_t n, const char* what) const {
    if (n > size_ - pos_) Fail(path_, ": truncated while reading ", what, " at byte ", pos_);
  }
  const uint8_t* data_;
  size_t size_, pos_ = 0;
  const std::string& path_;
};

enum ValueType : uint32_t {
  kU8 = 0, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64
};

Json ReadValue(Reader& r, uint32_t type, const std::string& key, const std::string& path, int depth) {
  switch (type) {
    case kU8: return r.Read<uint8_t>("u8 value");
    case kI8: return r.Read<int8_t>("i8 value");
    case kU16: return r.Read<uint16_t>("u16 value");
    case kI16: return r.Read<int16_t>("i16 value");
    case kU32: return r.Read<uint32_t>("u32 value");
    case kI32: return r.Read<int32_t>("i32 value");
    case kF32: return r.Read<float>("f32 value");
    case kBool: return r.Read<uint8_t>("bool value") != 0;
    case kString: return r.String("string value");
    case kU64: return r.Read<uint64_t>("u64 value");
    case kI64: return r.Read<int64_t>("i64 value");
    case kF64: return r.Read<double>("f64 value");
    case kArray: {
      if (depth > 0) Fail(path, ": metadata '", key, "': nested arrays are not supported");
      const uint32_t item = r.Read<uint32_t>("array item type");
      const uint64_t n = r.Count("array length", item == kString ? 8 : 1);
      Json a = Json::array();
      for (uint64_t i = 0; i < n; ++i) a.push_back(ReadValue(r, item, key, path, depth + 1));
      return a;
    }
    default: Fail(path, ": metadata '", key, "' has unknown value type ", type);
  }
}

// ggml_type ids of the formats we can compute with.
DType GgmlType(uint32_t t, const std::string& where) {
  switch (t) {
    case 0: return DType::kF32;
    case 1: return DType::kF16;
    case 2: return DType::kQ4_0;
    case 8: return DType::kQ8_0;
    case 12: return DType::kQ4_K;
    case 14: return DType::kQ6_K;
    case 30: return DType::kBF16;
    default:
      Fail(where, ": ggml type ", t, " is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K)");
  }
}

}  // namespace

std::string HfTensorName(const std::string& g) {
  if (g == "token_embd.weight") return "model.embed_tokens.weight";
  if (g == "output_norm.weight") return "model.norm.weight";
  if (g == "output.weight") return "lm_head.weight";
  // Gated DeltaNet's A (= -exp(A_log), as llama.cpp stores it) and dt bias have no suffix in
  // HF's names; A keeps llama.cpp's meaning under its own name (linear_attn.A).
  static const std::regex ssm(R"(blk\.(\d+)\.(ssm_a|ssm_dt\.bias))");
  std::smatch m;
  if (std::regex_match(g, m, ssm)) {
    return "model.layers." + m[1].str() + (m[2] == "ssm_a" ? ".linear_attn.A" : ".linear_attn.dt_bias");
  }
  static const std::regex block(R"(blk\.(\d+)\.([a-z0-9_]+)\.(weight|bias))");
  if (!std::regex_match(g, m, block)) return "";
  static const std::pair<const char*, const char*> kParts[] = {
      {"attn_norm", "input_layernorm"},      {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},        {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},   {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"},   {"ffn_norm", "post_attention_layernorm"},
      {"post_attention_norm", "post_attention_layernorm"},  // DFlash drafts' name for it
      {"ffn_gate", "mlp.gate_proj"},         {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
      // Qwen3.5's Gated DeltaNet (llama.cpp's qwen35 / qwen35moe names)
      {"attn_qkv", "linear_attn.in_proj_qkv"}, {"attn_gate", "linear_attn.in_proj_z"},
      {"ssm_alpha", "linear_attn.in_proj_a"},  {"ssm_beta", "linear_attn.in_proj_b"},
      {"ssm_out", "linear_attn.out_proj"},     {"ssm_norm", "linear_attn.norm"},
      {"ssm_conv1d", "linear_attn.conv1d"},
      // MoE: the router, and the experts stacked [E][rows][cols] (split by
      // UndoLlamaCppLayouts, io/gguf_layouts.h)
      {"ffn_gate_inp", "mlp.gate"},             {"ffn_gate_exps", "mlp.experts.gate_proj"},
      {"ffn_up_exps", "mlp.experts.up_proj"},  {"ffn_down_exps", "mlp.experts.down_proj"}};
  for (const auto& [from, to] : kParts) {
    if (m[2] == from) return "model.layers." + m[1].str() + "." + to + "." + m[3].str();
  }
  return "";
}

std::string DraftTensorName(const std::string& g) {
  // llama.cpp's converter names them fc and enc.output_norm; earlier writers dflash_fc and
  // dflash_hidden_norm.
  if (g == "fc.weight" || g == "dflash_fc.weight") return "fc.weight";
  if (g == "enc.output_norm.weight" || g == "dflash_hidden_norm.weight") return "hidden_norm.weight";
  if (g == "output_norm.weight") return "norm.weight";
  // DFlash2's candidate selector and per-layer convolutions (llama.cpp's DFLASH_SELECTOR_* and
  // DFLASH_*_CONV_* names; the shapes are z-lab's, so no layout changes).
  if (g == "selector_predecessor.weight") return "candidate_selector.predecessor_codebook.weight";
  if (g == "selector_successor.weight") return "candidate_selector.successor_codebook.weight";
  if (g == "selector_hidden.weight") return "candidate_selector.hidden_projection.weight";
  static const std::regex conv(R"(blk\.(\d+)\.(attn|ffn)_conv_(base|proj\.weight))");
  std::smatch m;
  if (std::regex_match(g, m, conv)) {
    return "layers." + m[1].str() + (m[2] == "attn" ? ".attention_conv." : ".mlp_conv.") +
           (m[3] == "base" ? "base_kernel" : "kernel_projection.weight");
  }
  if (g.rfind("blk.", 0) != 0) return "";  // token_embd/output: the target's are used
  const std::string hf = HfTensorName(g);
  return hf.empty() ? "" : hf.substr(std::string("model.").size());
}

bool IsDflashArchitecture(const std::string& arch) { return arch == "dflash" || arch == "dflash-draft"; }

GgufModel LoadGguf(const std::string& path) {
  GgufModel model;
  model.store = TensorStore(path);
  const MappedFile& file = model.store.Keep(std::make_unique<MappedFile>(path));
  Reader r(file.data(), file.size(), path);
  const uint32_t magic = r.Read<uint32_t>("magic");
  if (magic != 0x46554747u) Fail(path, ": not a GGUF file (bad magic)");
  const uint32_t version = r.Read<uint32_t>("version");
  if (version != 2 && version != 3) Fail(path, ": GGUF version ", version, " is not supported (2 or 3)");
  const uint64_t n_tensors = r.Count("tensor count", 24);
  const uint64_t n_kv = r.Count("metadata count", 12);

  model.metadata = Json::object();
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = r.String("metadata key");
    const uint32_t type = r.Read<uint32_t>("metadata value type");
    model.metadata[key] = ReadValue(r, type, key, path, 0);
  }
  uint64_t alignment = 32;
  if (model.metadata.contains("general.alignment")) {
    const Json& a = model.metadata["general.alignment"];
    if (!a.is_number_unsigned() || a.get<uint64_t>() == 0 || (a.get<uint64_t>() & (a.get<uint64_t>() - 1)) != 0) {
      Fail(path, ": general.alignment must be a power of two");
    }
    alignment = a.get<uint64_t>();
  }

  const Json& arch = model.metadata.value("general.architecture", Json());
  const bool draft = arch.is_string() && IsDflashArchitecture(arch.get<std::string>());

  struct Info {
    std::string name;
    std::vector<int64_t> shape;  // outermost first
    DType dtype;
    uint64_t offset;
    size_t nbytes;
  };
  std::vector<Info> infos;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    Info t;
    t.name = r.String("tensor name");
    const std::string where = path + ": tensor '" + t.name + "'";
    const uint32_t n_dims = r.Read<uint32_t>("tensor dimension count");
    if (n_dims < 1 || n_dims > 4) Fail(where, ": ", n_dims, " dimensions (1 to 4 supported)");
    std::vector<uint64_t> ne(n_dims);
    for (uint64_t& d : ne) d = r.Read<uint64_t>("tensor dimension");
    t.dtype = GgmlType(r.Read<uint32_t>("tensor type"), where);
    t.offset = r.Read<uint64_t>("tensor offset");
    if (t.offset % alignment != 0) Fail(where, ": offset ", t.offset, " is not aligned to ", alignment);
    for (uint64_t d : ne) {
      // No real dimension comes near 2^40; the bound keeps each one a valid int64.
      if (d == 0 || d > (uint64_t{1} << 40)) Fail(where, ": dimension ", d, " is outside [1, 2^40]");
    }
    for (uint32_t k = n_dims; k-- > 0;) t.shape.push_back(static_cast<int64_t>(ne[k]));
    t.nbytes = TensorBytes(t.dtype, t.shape, where);
    infos.push_back(std::move(t));
  }
  const uint64_t data_start = (r.pos() + alignment - 1) / alignment * alignment;
  // A vocabulary-only file (the converter's --vocab-only) ends with its metadata, unpadded.
  if (data_start > file.size() && !infos.empty()) Fail(path, ": truncated before the tensor data");
  const uint64_t data_size = infos.empty() ? 0 : file.size() - data_start;

  for (Info& info : infos) {
    const std::string where = path + ": tensor '" + info.name + "'";
    Tensor t;
    t.name = draft ? DraftTensorName(info.name) : HfTensorName(info.name);
    if (t.name.empty()) continue;  // tensors the model does not use (e.g. rope_freqs)
    t.dtype = info.dtype;
    t.shape = info.shape;
    t.file = path;
    t.nbytes = info.nbytes;
    if (info.offset > data_size || t.nbytes > data_size - info.offset) {
      Fail(where, ": data [", info.offset, ", +", t.nbytes, ") runs past the end of the file (truncated?)");
    }
    t.data = file.data() + data_start + info.offset;
    model.store.Add(std::move(t));
  }
  if (!draft && !infos.empty()) UndoLlamaCppLayouts(model.metadata, path, model.store);
  return model;
}

}  // namespace dflash
