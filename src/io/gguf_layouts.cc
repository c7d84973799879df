#include "io/gguf_layouts.h"

#include <cstring>
#include <regex>

#include "core/error.h"

namespace dflash {

namespace {

// The Gated DeltaNet shape from qwen35.ssm.* (llama.cpp's keys for Qwen3.5's linear_* fields).
struct LinearShape {
  int64_t nk, nv, dk, dv;
  int64_t ratio() const { return nv / nk; }
  int64_t key_dim() const { return nk * dk; }
  int64_t conv_dim() const { return 2 * nk * dk + nv * dv; }
};

class Layouts {
 public:
  Layouts(const std::string& path, TensorStore& store) : path_(path), store_(store) {}

  // Tensor `hf` (GGUF name `gguf` for errors) with exactly `shape` (ours: outermost first).
  const Tensor& Need(const std::string& hf, const std::string& gguf, const std::vector<int64_t>& shape) {
    const Tensor* t = store_.Find(hf);
    if (!t) Fail(path_, ": tensor '", gguf, "' is missing");
    if (t->shape != shape) {
      Tensor want;
      want.shape = shape;
      Fail(path_, ": tensor '", gguf, "' has shape ", t->ShapeString(), " (outermost first), expected ",
           want.ShapeString());
    }
    return *t;
  }

  // w = stored - 1, in f32: the stored (1 + w) back to transformers' w.
  void MinusOne(const std::string& hf, const std::string& gguf, int64_t n) {
    std::vector<float> w = ToF32Vector(Need(hf, gguf, {n}));
    ByteBuffer bytes(w.size() * sizeof(float));
    for (size_t i = 0; i < w.size(); ++i) {
      const float x = w[i] - 1.0f;
      std::memcpy(bytes.data() + i * sizeof(float), &x, sizeof(float));
    }
    store_.ReplaceData(hf, DType::kF32, std::move(bytes));
  }

  // Puts back the grouped order of value heads in tensor `hf` (given as [rows][cols] even when
  // 1-D): units of `unit_rows` rows from row `first_row` on when by_rows, else units of
  // `unit_cols` columns within every row; the result gets `shape`.
  void Untile(const std::string& hf, const std::string& gguf, const LinearShape& s, bool by_rows, int64_t first_row,
              int64_t unit, const std::vector<int64_t>& shape) {
    const Tensor& t = *store_.Find(hf);
    if (s.nv == s.nk && shape == t.shape) return;  // nothing was reordered
    const int64_t cols = t.shape.back(), rows = t.numel() / cols;
    const size_t row_bytes = RowBytes(t.dtype, cols);
    ByteBuffer out(t.data, t.data + t.nbytes);
    if (s.nv != s.nk) {
      if (!by_rows && unit % BlockElems(t.dtype) != 0) {
        Fail(path_, ": tensor '", gguf, "' is ", DTypeName(t.dtype), ": its value heads of ", unit,
             " columns are not whole blocks, so their order cannot be restored");
      }
      const size_t unit_bytes = by_rows ? unit * row_bytes : RowBytes(t.dtype, unit);
      const size_t base = by_rows ? first_row * row_bytes : 0;
      const int64_t passes = by_rows ? 1 : rows;
      for (int64_t p = 0; p < passes; ++p) {
        const size_t row = base + p * (by_rows ? 0 : row_bytes);
        // Grouped head g * ratio + j is stored at tiled position j * nk + g.
        for (int64_t g = 0; g < s.nk; ++g) {
          for (int64_t j = 0; j < s.ratio(); ++j) {
            std::memcpy(out.data() + row + (g * s.ratio() + j) * unit_bytes,
                        t.data + row + (j * s.nk + g) * unit_bytes, unit_bytes);
          }
        }
      }
    }
    store_.ReplaceTensor(hf, t.dtype, shape, std::move(out));
  }

  void LinearLayer(const std::string& p, const std::string& g, const LinearShape& s, int64_t kernel, int64_t hidden) {
    const int64_t C = s.conv_dim(), V = s.nv * s.dv;
    const auto name = [&](const char* hf, const char* gguf) { return std::pair(p + hf, g + gguf); };
    const auto [qkv, qkv_g] = name("in_proj_qkv.weight", "attn_qkv.weight");
    Need(qkv, qkv_g, {C, hidden});
    Untile(qkv, qkv_g, s, true, 2 * s.key_dim(), s.dv, {C, hidden});
    const auto [z, z_g] = name("in_proj_z.weight", "attn_gate.weight");
    Need(z, z_g, {V, hidden});
    Untile(z, z_g, s, true, 0, s.dv, {V, hidden});
    for (const auto& [hf, gguf] : {name("in_proj_a.weight", "ssm_alpha.weight"), name("in_proj_b.weight", "ssm_beta.weight")}) {
      Need(hf, gguf, {s.nv, hidden});
      Untile(hf, gguf, s, true, 0, 1, {s.nv, hidden});
    }
    for (const auto& [hf, gguf] : {name("A", "ssm_a"), name("dt_bias", "ssm_dt.bias")}) {
      Need(hf, gguf, {s.nv});
      Untile(hf, gguf, s, false, 0, 1, {s.nv});
    }
    const auto [conv, conv_g] = name("conv1d.weight", "ssm_conv1d.weight");
    Need(conv, conv_g, {C, kernel});
    Untile(conv, conv_g, s, true, 2 * s.key_dim(), s.dv, {C, 1, kernel});
    const auto [out, out_g] = name("out_proj.weight", "ssm_out.weight");
    Need(out, out_g, {hidden, V});
    Untile(out, out_g, s, false, 0, s.dv, {hidden, V});
    const auto [norm, norm_g] = name("norm.weight", "ssm_norm.weight");
    Need(norm, norm_g, {s.dv});
  }

  // Every 3-D "<mlp>.experts.<proj>.weight" [E][rows][cols] becomes E views of its slices.
  void SplitStackedExperts(int64_t experts) {
    static const std::regex stacked(R"((model\.layers\.(\d+)\.mlp\.experts)\.((gate|up|down)_proj)\.weight)");
    static const char* kGgufNames[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    for (const std::string& name : store_.Names()) {
      std::smatch m;
      if (!std::regex_match(name, m, stacked)) continue;
      const Tensor t = *store_.Find(name);
      const std::string gguf = "blk." + m[2].str() + "." + kGgufNames[m[4] == "gate" ? 0 : m[4] == "up" ? 1 : 2] + ".weight";
      if (t.shape.size() != 3 || t.shape[0] != experts) {
        Fail(path_, ": tensor '", gguf, "' has shape ", t.ShapeString(), " (outermost first), expected ", experts,
             " stacked experts (expert_count)");
      }
      const size_t slice = t.nbytes / experts;
      for (int64_t e = 0; e < experts; ++e) {
        Tensor v = t;
        v.name = m[1].str() + "." + std::to_string(e) + "." + m[3].str() + ".weight";
        v.shape = {t.shape[1], t.shape[2]};
        v.data = t.data + e * slice;
        v.nbytes = slice;
        store_.Add(std::move(v));
      }
      store_.Remove(name);
    }
  }

 private:
  const std::string& path_;
  TensorStore& store_;
};

}  // namespace

void UndoLlamaCppLayouts(const Json& metadata, const std::string& path, TensorStore& store) {
  const JsonObject meta(metadata, path);
  const std::string arch = meta.Get<std::string>("general.architecture", "");
  const std::string p = arch + ".";
  Layouts layouts(path, store);
  if (arch == "qwen3moe" || arch == "qwen35moe") layouts.SplitStackedExperts(meta.Get<int64_t>(p + "expert_count"));
  if (arch != "qwen35" && arch != "qwen35moe") return;

  const int64_t layers = meta.Get<int64_t>(p + "block_count"), hidden = meta.Get<int64_t>(p + "embedding_length");
  const int64_t head_dim = meta.Get<int64_t>(p + "attention.key_length");
  const auto recurrent = meta.Get<std::vector<bool>>(p + "attention.recurrent_layers");
  if (static_cast<int64_t>(recurrent.size()) != layers) {
    Fail(path, ": ", p, "attention.recurrent_layers has ", recurrent.size(), " entries for ", layers, " layers");
  }
  LinearShape s{meta.Get<int64_t>(p + "ssm.group_count"), meta.Get<int64_t>(p + "ssm.time_step_rank"),
                meta.Get<int64_t>(p + "ssm.state_size"), 0};
  const int64_t inner = meta.Get<int64_t>(p + "ssm.inner_size");
  if (s.nk < 1 || s.nv < 1 || s.dk < 1 || s.nv % s.nk != 0 || inner % s.nv != 0) {
    Fail(path, ": ", p, "ssm.group_count ", s.nk, ", time_step_rank ", s.nv, ", state_size ", s.dk, " and inner_size ",
         inner, " do not describe Gated DeltaNet heads (value heads a multiple of key heads, inner_size of whole heads)");
  }
  s.dv = inner / s.nv;
  const int64_t kernel = meta.Get<int64_t>(p + "ssm.conv_kernel");
  for (int64_t l = 0; l < layers; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".", gguf = "blk." + std::to_string(l) + ".";
    layouts.MinusOne(hf + "input_layernorm.weight", gguf + "attn_norm.weight", hidden);
    layouts.MinusOne(hf + "post_attention_layernorm.weight", gguf + "post_attention_norm.weight", hidden);
    if (recurrent[l]) {
      layouts.LinearLayer(hf + "linear_attn.", gguf, s, kernel, hidden);
    } else {
      layouts.MinusOne(hf + "self_attn.q_norm.weight", gguf + "attn_q_norm.weight", head_dim);
      layouts.MinusOne(hf + "self_attn.k_norm.weight", gguf + "attn_k_norm.weight", head_dim);
    }
  }
  layouts.MinusOne("model.norm.weight", "output_norm.weight", hidden);
}

}  // namespace dflash
