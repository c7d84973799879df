#include "plan/inspect.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "io/tensor_store.h"
#include "model/gguf_config.h"

namespace dflash::plan {

namespace fs = std::filesystem;

namespace {

void CountTensors(const TensorStore& store, ModelFiles& m) {
  for (const std::string& name : store.Names()) {
    const Tensor* t = store.Find(name);
    ++m.tensors;
    m.weight_bytes += static_cast<int64_t>(t->nbytes);
    m.dtype_bytes[std::string(DTypeName(t->dtype))] += static_cast<int64_t>(t->nbytes);
  }
}

// Every *.safetensors file of the directory, headers validated against the file sizes.
void CountSafetensors(const std::string& dir, ModelFiles& m) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
  }
  if (files.empty()) Fail(dir, ": no .safetensors files");
  std::sort(files.begin(), files.end());
  TensorStore store(dir);
  for (const std::string& f : files) AddSafetensorsFile(f, store);
  CountTensors(store, m);
}

void CheckExists(const std::string& path) {
  if (path.empty()) Fail("model path is empty");
  if (!fs::exists(path)) Fail(path, ": not found");
}

// Parses config.json with `parse`; an unsupported architecture becomes loads = false.
template <typename Parse>
void ParseConfig(ModelFiles& m, const Parse& parse) {
  const std::string config = m.path + "/config.json";
  if (!fs::exists(config)) Fail(m.path, ": no config.json (not a Hugging Face model directory)");
  const Json j = ReadJsonFile(config);
  const JsonObject cfg(j, config);
  const auto archs = cfg.Get<std::vector<std::string>>("architectures");
  m.architecture = archs.empty() ? "" : archs[0];
  try {
    parse(j, config);
    m.loads = true;
  } catch (const Error& e) {
    m.why_not = e.what();
  }
}

ModelFiles InspectGguf(const std::string& path, bool as_draft) {
  ModelFiles m;
  m.path = path;
  m.kind = "gguf";
  const GgufModel g = LoadGguf(path);
  m.architecture = g.metadata.value("general.architecture", std::string());
  // The loader's own translation of the metadata: it decides whether the file loads.
  try {
    if (as_draft) {
      m.draft = DraftConfigFromGguf(g, path);
    } else {
      m.target = TargetConfigFromGguf(g, path);
    }
    m.loads = true;
  } catch (const Error& e) {
    m.why_not = e.what();
  }
  CountTensors(g.store, m);
  return m;
}

}  // namespace

ModelFiles InspectTarget(const std::string& path) {
  CheckExists(path);
  if (IsGgufPath(path)) return InspectGguf(path, /*as_draft=*/false);
  ModelFiles m;
  m.path = path;
  m.kind = "hf";
  ParseConfig(m, [&](const Json& j, const std::string& where) { m.target = TargetConfigFromJson(j, where); });
  CountSafetensors(path, m);
  return m;
}

ModelFiles InspectDraft(const std::string& path) {
  CheckExists(path);
  if (IsGgufPath(path)) return InspectGguf(path, /*as_draft=*/true);
  ModelFiles m;
  m.path = path;
  m.kind = "hf";
  ParseConfig(m, [&](const Json& j, const std::string& where) { m.draft = DraftConfigFromJson(j, where); });
  CountSafetensors(path, m);
  return m;
}

const PairEntry* PairForTarget(const Registry& registry, const ModelShape& s) {
  for (const PairEntry& p : registry.pairs) {
    const ModelShape& t = p.target.shape;
    if (t.hidden == s.hidden && t.layers == s.layers && t.heads == s.heads && t.kv_heads == s.kv_heads &&
        t.vocab == s.vocab && t.intermediate == s.intermediate) {
      return &p;
    }
  }
  return nullptr;
}

}  // namespace dflash::plan
