#include "plan/acceptance_profile.h"

#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "io/json_file.h"
#include "plan/cost_model.h"

namespace dflash::plan {

namespace {

std::string SourceText(const Registry& r, const std::string& key) {
  for (const auto& [k, text] : r.sources) {
    if (k == key) return text;
  }
  return key;
}

AcceptanceProfile Builtin(const std::string& name, const Registry& r, int block) {
  AcceptanceProfile p;
  p.name = name;
  double tau = 0;
  char figure[128];
  if (name == "agent") {
    tau = (r.agent.tokens_per_cycle_lo + r.agent.tokens_per_cycle_hi) / 2;
    std::snprintf(figure, sizeof figure, "tau %.3g, midpoint of %.2g-%.2g tokens per cycle at %d tokens of context",
                  tau, r.agent.tokens_per_cycle_lo, r.agent.tokens_per_cycle_hi, r.agent.context);
    p.source = std::string(figure) + " (" + r.path + " agent: " + SourceText(r, r.agent.source) + ")";
  } else {
    tau = name == "code" ? r.default_tau.code : name == "math" ? r.default_tau.math : r.default_tau.chat;
    std::snprintf(figure, sizeof figure, "tau %.3g, z-lab's %s figure for Qwen3-8B", tau, name.c_str());
    p.source = std::string(figure) + " (" + r.path + " default_tau: " + SourceText(r, r.default_tau.source) + ")";
  }
  p.source += "; geometric per-depth curve matched to tau at block " + std::to_string(block);
  p.accept_at_depth = GeometricCurve(tau, block);
  return p;
}

AcceptanceProfile FromFile(const std::string& path) {
  const Json j = ReadJsonFile(path);
  if (!j.is_object()) Fail(path, ": an acceptance profile must be a JSON object, got ", j.type_name());
  AcceptanceProfile p;
  p.name = std::filesystem::path(path).stem().string();
  p.source = path;
  for (const char* key : {"name", "source"}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_string()) Fail(path, ": \"", key, "\" must be a string, got ", j[key].type_name());
    (std::string(key) == "name" ? p.name : p.source) = j[key].get<std::string>();
  }
  if (!j.contains("accept_at_depth") || !j["accept_at_depth"].is_array()) {
    Fail(path, ": \"accept_at_depth\" must be an array of per-depth acceptance probabilities");
  }
  for (const Json& v : j["accept_at_depth"]) {
    if (!v.is_number()) Fail(path, ": accept_at_depth[", p.accept_at_depth.size(), "] must be a number, got ", v.type_name());
    p.accept_at_depth.push_back(v.get<double>());
  }
  CheckProfile(p, path);
  return p;
}

}  // namespace

std::vector<std::string> BuiltinProfileNames() { return {"agent", "code", "math", "chat"}; }

AcceptanceProfile LoadAcceptanceProfile(const std::string& spec, const Registry& registry, int block) {
  for (const std::string& name : BuiltinProfileNames()) {
    if (spec == name) return Builtin(name, registry, block);
  }
  if (!std::filesystem::exists(spec)) {
    Fail("acceptance profile '", spec, "' is neither a built-in (agent, code, math, chat) nor a file");
  }
  return FromFile(spec);
}

}  // namespace dflash::plan
