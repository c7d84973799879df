// Opening a model path: a Hugging Face folder (config.json and *.safetensors, MLX quantised
// layouts included, beside tokenizer.json and generation_config.json) or one llama.cpp .gguf
// file holding all of that. The one place that tells the two apart: the engine (and so the CLI
// and the server) loads models through it, and the text side finds its tokenizer from it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "io/json_file.h"
#include "core/thread_pool.h"
#include "io/tensor_store.h"
#include "model/config.h"
#include "model/target.h"

namespace dflash {

// Where a model's tokenizer, chat template and generation defaults are read from: its folder's
// files, or its GGUF's metadata (tokenizer.ggml.*, tokenizer.chat_template*).
struct ModelSource {
  std::string path;
  std::optional<Json> gguf_metadata;  // set when `path` is a .gguf
};

// A model ready to bind: its configuration, its tensors (as stored: quantising and packing are
// the engine's choice), and where its metadata is.
template <typename Config>
struct LoadedModel {
  Config config;
  TensorStore store{""};
  ModelSource source;
};

// Throw Error naming the file and field at fault.
LoadedModel<TargetConfig> LoadTarget(const std::string& path);
LoadedModel<DraftConfig> LoadDraft(const std::string& path);
// The target model for `config`'s architecture (dense Qwen3 or a Qwen3.5 hybrid) over `store`,
// which must outlive it.
std::unique_ptr<TargetModel> NewTargetModel(const TargetConfig& config, const TensorStore& store,
                                            const TargetOptions& options, ThreadPool& pool);
// The metadata alone, without reading a folder's configuration or tensors.
ModelSource OpenModelSource(const std::string& path);

}  // namespace dflash
