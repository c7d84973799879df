#include "io/safetensors.h"

#include <cstring>
#include <filesystem>
#include <set>

#include "io/json_file.h"
#include "io/mlx_quantized.h"

namespace dflash {

namespace {

DType ParseDType(const std::string& s, const std::string& where) {
  if (s == "F32") return DType::kF32;
  if (s == "F16") return DType::kF16;
  if (s == "BF16") return DType::kBF16;
  if (s == "I32") return DType::kI32;
  if (s == "I64") return DType::kI64;
  if (s == "U32") return DType::kU32;
  if (s == "U8") return DType::kU8;
  Fail(where, ": unsupported dtype '", s, "'");
}

}  // namespace

void AddSafetensorsFile(const std::string& path, TensorStore& store) {
  const MappedFile& file = store.Keep(std::make_unique<MappedFile>(path));
  if (file.size() < 8) Fail(path, ": too short to be a safetensors file (", file.size(), " bytes)");
  uint64_t header_len = 0;
  std::memcpy(&header_len, file.data(), 8);
  if (header_len > file.size() - 8) {
    Fail(path, ": header length ", header_len, " exceeds the file size ", file.size(),
         " (truncated or not safetensors)");
  }
  const Json header =
      ParseJson(std::string_view(reinterpret_cast<const char*>(file.data()) + 8, header_len), path + ": safetensors header");
  if (!header.is_object()) Fail(path, ": safetensors header is not a JSON object");
  const uint8_t* data = file.data() + 8 + header_len;
  const size_t data_size = file.size() - 8 - header_len;

  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = path + ": tensor '" + name + "'";
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets")) {
      Fail(where, ": header entry needs dtype, shape and data_offsets");
    }
    Tensor t;
    t.name = name;
    t.file = path;
    try {
      t.dtype = ParseDType(info.at("dtype").get<std::string>(), where);
      t.shape = info.at("shape").get<std::vector<int64_t>>();
      const auto offsets = info.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size) {
        Fail(where, ": data_offsets out of range (file has ", data_size,
             " data bytes; truncated?)");
      }
      t.data = data + offsets[0];
      t.nbytes = offsets[1] - offsets[0];
    } catch (const Json::exception& e) {
      Fail(where, ": malformed header entry: ", e.what());
    }
    const size_t expect = TensorBytes(t.dtype, t.shape, where);
    if (expect != t.nbytes) {
      Fail(where, ": shape ", t.ShapeString(), " of ", DTypeName(t.dtype), " needs ", expect,
           " bytes but data_offsets span ", t.nbytes);
    }
    store.Add(std::move(t));
  }
}

TensorStore LoadSafetensorsDir(const std::string& dir) {
  namespace fs = std::filesystem;
  TensorStore store(dir);
  const fs::path root(dir);
  if (!fs::is_directory(root)) Fail(dir, ": not a directory");
  const fs::path single = root / "model.safetensors";
  const fs::path index = root / "model.safetensors.index.json";
  if (fs::exists(single)) {
    AddSafetensorsFile(single.string(), store);
  } else if (fs::exists(index)) {
    const Json j = ReadJsonFile(index.string());
    if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
      Fail(index.string(), ": field 'weight_map' is missing or not an object");
    }
    std::set<std::string> shards;
    for (const auto& [name, shard] : j["weight_map"].items()) {
      if (!shard.is_string()) Fail(index.string(), ": weight_map['", name, "'] is not a string");
      shards.insert(shard.get<std::string>());
    }
    for (const std::string& shard : shards) {
      if (shard.find('/') != std::string::npos) Fail(index.string(), ": shard name '", shard, "' has a path");
      AddSafetensorsFile((root / shard).string(), store);
    }
    for (const auto& [name, shard] : j["weight_map"].items()) {
      if (!store.Find(name)) Fail(index.string(), ": tensor '", name, "' listed but not in ", shard.get<std::string>());
    }
  } else {
    Fail(dir, ": no model.safetensors or model.safetensors.index.json");
  }
  const fs::path config = root / "config.json";
  if (fs::exists(config)) RepackMlxQuantized(ReadJsonFile(config.string()), config.string(), store);
  UndoMlxLmHybridLayout(store);
  return store;
}

}  // namespace dflash
