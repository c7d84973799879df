#include "model/load.h"

#include "io/gguf.h"
#include "io/safetensors.h"
#include "model/gguf_config.h"
#include "model/qwen3.h"
#include "model/qwen35.h"
#include "model/moe.h"

namespace dflash {

namespace {

// The folder or GGUF at `path`, with `folder_config` reading a folder's config.json and
// `gguf_config` translating a GGUF's metadata.
template <typename Config, typename FolderConfig, typename GgufConfig>
LoadedModel<Config> Load(const std::string& path, FolderConfig folder_config, GgufConfig gguf_config) {
  LoadedModel<Config> model;
  model.source.path = path;
  if (IsGgufPath(path)) {
    GgufModel gguf = LoadGguf(path);
    model.config = gguf_config(gguf, path);
    model.store = std::move(gguf.store);
    model.source.gguf_metadata = std::move(gguf.metadata);
  } else {
    model.config = folder_config(path);
    model.store = LoadSafetensorsDir(path);
  }
  return model;
}

}  // namespace

LoadedModel<TargetConfig> LoadTarget(const std::string& path) {
  LoadedModel<TargetConfig> model = Load<TargetConfig>(path, LoadTargetConfig, TargetConfigFromGguf);
  // Before the engine quantises and packs matrices one by one: fused expert tensors become
  // one matrix per expert.
  SplitFusedExperts(model.store, model.config);
  if (model.config.hybrid) {
    // A Qwen3.5 checkpoint may hold a vision tower and multi-token-prediction layers beside
    // the text model; generation uses neither, and load-time quantising must not touch them.
    for (const std::string& name : model.store.Names()) {
      if (name.starts_with("model.visual.") || name.starts_with("mtp.")) model.store.Remove(name);
    }
  }
  return model;
}

std::unique_ptr<TargetModel> NewTargetModel(const TargetConfig& config, const TensorStore& store,
                                            const TargetOptions& options, ThreadPool& pool) {
  if (config.hybrid) return std::make_unique<Qwen35Model>(config, store, options, pool);
  return std::make_unique<Qwen3Model>(config, store, options, pool);
}

LoadedModel<DraftConfig> LoadDraft(const std::string& path) {
  return Load<DraftConfig>(path, LoadDraftConfig, DraftConfigFromGguf);
}

ModelSource OpenModelSource(const std::string& path) {
  if (!IsGgufPath(path)) return {path, std::nullopt};
  return {path, LoadGguf(path).metadata};
}

}  // namespace dflash
