#include "plan/registry.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <set>

namespace dflash::plan {

namespace {

// Shapes beyond these are typos, not models (the largest published decoders stay well below).
constexpr int64_t kMaxDim = 1 << 20;
constexpr int64_t kMaxVocab = 1 << 22;

int Positive(const JsonObject& o, const std::string& key, int64_t hi) {
  const int64_t v = o.Get<int64_t>(key);
  if (v < 1 || v > hi) Fail(o.where(), ": field '", key, "' = ", v, " is outside [1, ", hi, "]");
  return static_cast<int>(v);
}
int NonNegative(const JsonObject& o, const std::string& key, int64_t hi) {
  const int64_t v = o.Get<int64_t>(key, int64_t{0});
  if (v < 0 || v > hi) Fail(o.where(), ": field '", key, "' = ", v, " is outside [0, ", hi, "]");
  return static_cast<int>(v);
}
double NonNegativeReal(const JsonObject& o, const std::string& key) {
  const double v = o.Get<double>(key, 0.0);
  if (!(v >= 0) || v > 1e6) Fail(o.where(), ": field '", key, "' = ", v, " must be a non-negative number");
  return v;
}

// o.Child(key), with an error naming the file when the field is missing or not an object.
JsonObject Section(const JsonObject& o, const std::string& key) {
  if (!o.Has(key)) Fail(o.where(), ": required field '", key, "' is missing");
  return o.Child(key);
}

LinearAttentionShape ParseLinear(const JsonObject& o) {
  return {Positive(o, "num_key_heads", kMaxDim), Positive(o, "num_value_heads", kMaxDim),
          Positive(o, "key_head_dim", kMaxDim), Positive(o, "value_head_dim", kMaxDim),
          Positive(o, "conv_kernel", 64)};
}

MoeShape ParseMoe(const JsonObject& o) {
  MoeShape m{Positive(o, "num_experts", 4096), Positive(o, "num_experts_per_tok", 4096),
             Positive(o, "moe_intermediate_size", kMaxDim), NonNegative(o, "shared_expert_intermediate_size", kMaxDim)};
  if (m.experts_per_token > m.experts) {
    Fail(o.where(), ": num_experts_per_tok ", m.experts_per_token, " exceeds num_experts ", m.experts);
  }
  return m;
}

ModelShape ParseShape(const JsonObject& o) {
  ModelShape s;
  s.architecture = o.Get<std::string>("architecture");
  s.hidden = Positive(o, "hidden_size", kMaxDim);
  s.intermediate = Positive(o, "intermediate_size", kMaxDim);
  s.layers = Positive(o, "num_hidden_layers", 4096);
  s.heads = Positive(o, "num_attention_heads", 4096);
  s.kv_heads = Positive(o, "num_key_value_heads", 4096);
  s.head_dim = Positive(o, "head_dim", 4096);
  s.vocab = NonNegative(o, "vocab_size", kMaxVocab);
  s.tied_embeddings = o.Get<bool>("tie_word_embeddings", false);
  s.attention_bias = o.Get<bool>("attention_bias", false);
  s.attention_output_gate = o.Get<bool>("attention_output_gate", false);
  s.full_attention_layers = o.Has("full_attention_layers") ? Positive(o, "full_attention_layers", s.layers) : s.layers;
  s.sliding_window = NonNegative(o, "sliding_window", kMaxDim);
  s.sliding_layers = NonNegative(o, "sliding_layers", s.full_attention_layers);
  if (o.Has("linear_attention")) s.linear = ParseLinear(Section(o, "linear_attention"));
  if (o.Has("moe")) s.moe = ParseMoe(Section(o, "moe"));
  s.capture_layers = NonNegative(o, "capture_layers", 4096);
  s.block_size = NonNegative(o, "block_size", 1024);
  if (s.heads % s.kv_heads != 0) {
    Fail(o.where(), ": num_attention_heads ", s.heads, " is not a multiple of num_key_value_heads ", s.kv_heads);
  }
  if (s.full_attention_layers < s.layers && !s.linear) {
    Fail(o.where(), ": full_attention_layers ", s.full_attention_layers, " < num_hidden_layers ", s.layers,
         " needs 'linear_attention' for the other layers");
  }
  if ((s.sliding_layers > 0) != (s.sliding_window > 0)) {
    Fail(o.where(), ": sliding_window and sliding_layers must be given together");
  }
  if (s.capture_layers > 0 && s.block_size < 2) Fail(o.where(), ": a draft (capture_layers > 0) needs block_size >= 2");
  if (s.capture_layers == 0 && s.vocab == 0) Fail(o.where(), ": a target needs vocab_size");
  return s;
}

std::string SourceKey(const JsonObject& o, const std::set<std::string>& known) {
  const std::string key = o.Get<std::string>("source");
  if (!known.count(key)) Fail(o.where(), ": source '", key, "' is not defined in 'sources'");
  return key;
}

ModelRef ParseModel(const JsonObject& o, const std::set<std::string>& known) {
  ModelRef m;
  m.id = o.Get<std::string>("id");
  m.verified = o.Get<bool>("verified");
  m.source = SourceKey(o, known);
  m.config = o.Get<std::string>("config", "");
  m.note = o.Get<std::string>("note", "");
  m.params_b = NonNegativeReal(o, "params_b");
  m.active_params_b = NonNegativeReal(o, "active_params_b");
  if (m.verified && m.config.empty()) Fail(o.where(), ": 'verified' needs the committed 'config' it was checked against");
  m.shape = ParseShape(Section(o, "shape"));
  return m;
}

TaskTau ParseTau(const JsonObject& o, const std::set<std::string>& known) {
  TaskTau t;
  t.math = NonNegativeReal(o, "math");
  t.code = NonNegativeReal(o, "code");
  t.chat = NonNegativeReal(o, "chat");
  t.source = SourceKey(o, known);
  t.note = o.Get<std::string>("note", "");
  return t;
}

PairEntry ParsePair(const JsonObject& o, const std::set<std::string>& known) {
  PairEntry p;
  p.name = o.Get<std::string>("name");
  const JsonObject named(o.raw(), o.where() + ": pair '" + p.name + "'");
  p.target = ParseModel(Section(named, "target"), known);
  p.draft = ParseModel(Section(named, "draft"), known);
  if (!p.draft.shape.is_draft()) Fail(named.where(), ": draft shape needs capture_layers and block_size");
  if (p.target.shape.is_draft()) Fail(named.where(), ": target shape has capture_layers (a draft's field)");
  if (p.draft.shape.hidden != p.target.shape.hidden) {
    Fail(named.where(), ": draft hidden_size ", p.draft.shape.hidden, " differs from the target's ", p.target.shape.hidden);
  }
  if (!named.Has("formats") || !named.raw().at("formats").is_array()) Fail(named.where(), ": field 'formats' must be an array");
  for (const Json& f : named.raw().at("formats")) {
    const JsonObject fo(f, named.where() + ": formats");
    p.formats.push_back({fo.Get<std::string>("format"), fo.Get<std::string>("repo")});
  }
  p.licence = named.Get<std::string>("licence");
  p.tau = ParseTau(Section(named, "tau"), known);
  p.runs_today = named.Get<bool>("runs_today");
  p.why_not = named.Get<std::string>("why_not", "");
  if (!p.runs_today && p.why_not.empty()) Fail(named.where(), ": runs_today is false but 'why_not' is missing");
  return p;
}

}  // namespace

const PairEntry* Registry::Find(const std::string& name) const {
  for (const PairEntry& p : pairs) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<std::string> Registry::Names() const {
  std::vector<std::string> names;
  for (const PairEntry& p : pairs) names.push_back(p.name);
  return names;
}

Registry RegistryFromJson(const Json& j, const std::string& path) {
  const JsonObject root(j, path);
  Registry r;
  r.path = path;
  if (root.Get<int>("schema") != 1) Fail(path, ": field 'schema' = ", root.Get<int>("schema"), " (this build reads schema 1)");
  std::set<std::string> known;
  const JsonObject sources = Section(root, "sources");
  for (const auto& [key, text] : sources.raw().items()) {
    if (!text.is_string()) Fail(sources.where(), ": source '", key, "' is not a string");
    known.insert(key);
    r.sources.emplace_back(key, text.get<std::string>());
  }
  r.default_tau = ParseTau(Section(root, "default_tau"), known);
  const JsonObject agent = Section(root, "agent");
  const auto tpc = agent.Get<std::vector<double>>("tokens_per_cycle");
  if (tpc.size() != 2 || !(tpc[0] > 0) || tpc[1] < tpc[0]) Fail(agent.where(), ": 'tokens_per_cycle' must be [lo, hi] with 0 < lo <= hi");
  r.agent = {tpc[0], tpc[1], Positive(agent, "context", INT_MAX), SourceKey(agent, known)};
  if (!root.raw().contains("pairs") || !root.raw().at("pairs").is_array()) Fail(path, ": field 'pairs' must be an array");
  std::set<std::string> names;
  for (const Json& p : root.raw().at("pairs")) {
    r.pairs.push_back(ParsePair(JsonObject(p, path + ": pairs"), known));
    if (!names.insert(r.pairs.back().name).second) Fail(path, ": pair name '", r.pairs.back().name, "' appears twice");
  }
  return r;
}

Registry LoadRegistry(const std::string& path) { return RegistryFromJson(ReadJsonFile(path), path); }

std::string DefaultRegistryPath() {
  if (const char* env = std::getenv("DFLASH_REGISTRY"); env && *env) return env;
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  std::string looked;
  for (int up = 0; !ec && up < 4 && !dir.empty(); ++up, dir = dir.parent_path()) {
    const auto candidate = dir / "data" / "pairs.json";
    if (std::filesystem::exists(candidate)) return candidate.string();
    looked += (looked.empty() ? "" : ", ") + candidate.string();
  }
  Fail("registry data/pairs.json not found (looked in: ", looked.empty() ? "nowhere: /proc/self/exe unreadable" : looked,
       "); pass --registry FILE or set DFLASH_REGISTRY");
}

double TaskAcceptance(const Registry& r, const PairEntry& p, const std::string& task, bool* borrowed) {
  auto pick = [&](const TaskTau& t) {
    if (task == "math") return t.math;
    if (task == "code") return t.code;
    if (task == "chat") return t.chat;
    Fail("task '", task, "' has no tau figures (math, code, chat)");
  };
  const double own = pick(p.tau);
  *borrowed = own <= 0;
  return own > 0 ? own : pick(r.default_tau);
}

}  // namespace dflash::plan
