// dflash bench: plain decoding vs DFlash on the same prompts in one run (warm-up, repeats,
// interleaved so drift hits both modes alike); --verify-cost: t(rows)/t(1) of target
// passes at chosen context lengths, the number that decides whether DFlash can pay here;
// --roofline: that curve plus measured memory bandwidth, decode % of roofline and prefill;
// --acceptance: DFlash with scripted acceptance (the real draft's cost, modelled acceptance);
// --report: the decision report (bench/report.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench/compute_peak.h"
#include "bench/machine.h"
#include "bench/report.h"
#include "bench/roofline.h"
#include "bench/verify_cost.h"
#include "commands.h"
#include "core/error.h"
#include "core/peak_rss.h"
#include "io/json_file.h"
#include "model_flags.h"
#include "open_tokenizer.h"
#include "ops/ops.h"
#include "ops/quant_blocks.h"
#include "plan/acceptance_profile.h"
#include "plan/cost_model.h"
#include "plan/registry.h"
#include "plan/inspect.h"
#include "plan/loop_costs.h"
#include "plan/memory_model.h"
#include "report.h"
#include "spec/scripted_drafter.h"

namespace dflash::app {

namespace {

using OJson = nlohmann::ordered_json;

struct BenchPrompt {
  std::string name;
  std::vector<int32_t> ids;
};

// One JSONL line's prompt: "prompt_ids" as they are, "prompt" text tokenized, or "messages"
// rendered with the model's chat template; exactly one of them.
std::vector<int32_t> LinePromptIds(const OJson& j, const std::string& where, ModelText& model_text) {
  const int kinds = j.contains("prompt_ids") + j.contains("prompt") + j.contains("messages");
  if (kinds != 1) Fail(where, ": expected exactly one of \"prompt\", \"messages\" or \"prompt_ids\"");
  if (j.contains("prompt")) {
    if (!j["prompt"].is_string()) Fail(where, ": \"prompt\" must be a string, got ", j["prompt"].type_name());
    return model_text.Encode(j["prompt"].get<std::string>());
  }
  if (j.contains("messages")) {
    if (!j["messages"].is_array()) Fail(where, ": \"messages\" must be an array, got ", j["messages"].type_name());
    return model_text.Chat(j["messages"], OJson::object()).ids;
  }
  if (!j["prompt_ids"].is_array()) Fail(where, ": \"prompt_ids\" must be an array, got ", j["prompt_ids"].type_name());
  std::vector<int32_t> ids;
  for (const OJson& id : j["prompt_ids"]) {
    if (!id.is_number_integer()) Fail(where, ": prompt_ids must be integers, got ", id.type_name());
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

// JSONL, one prompt per line: {"name": ..., and "prompt": TEXT, "messages": [...] or "prompt_ids": [...]}.
std::vector<BenchPrompt> ReadPrompts(const std::string& path, ModelText& model_text) {
  std::ifstream in(path);
  if (!in) Fail(path, ": cannot open prompts file");
  std::vector<BenchPrompt> prompts;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    OJson j;  // key order kept: a chat template's tojson prints messages as written
    try {
      j = OJson::parse(line);
    } catch (const std::exception& e) {
      Fail(where, ": not a JSON object: ", e.what());
    }
    if (!j.is_object()) Fail(where, ": expected a JSON object, got ", j.type_name());
    if (j.contains("name") && !j["name"].is_string()) Fail(where, ": \"name\" must be a string, got ", j["name"].type_name());
    BenchPrompt p;
    p.name = j.value("name", "prompt" + std::to_string(prompts.size()));
    p.ids = LinePromptIds(j, where, model_text);
    if (p.ids.empty()) Fail(where, ": empty prompt");
    prompts.push_back(std::move(p));
  }
  if (prompts.empty()) Fail(path, ": no prompts");
  return prompts;
}

// A directory of text files: one prompt per *.txt (name: the file's stem), in name order.
std::vector<BenchPrompt> ReadPromptDir(const std::string& dir, ModelText& model_text) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) Fail(dir, ": no .txt prompt files");
  std::vector<BenchPrompt> prompts;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) Fail(f.string(), ": cannot read");
    BenchPrompt p{f.stem().string(), model_text.Encode(text)};
    if (p.ids.empty()) Fail(f.string(), ": empty prompt");
    prompts.push_back(std::move(p));
  }
  return prompts;
}

// --prompts: a JSONL file, a directory of .txt files, or the name of a shipped set
// (bench/prompts/NAME.jsonl of this checkout, found next to the registry's data/).
std::vector<BenchPrompt> LoadPrompts(const std::string& spec, ModelText& model_text) {
  if (std::filesystem::is_directory(spec)) return ReadPromptDir(spec, model_text);
  if (std::filesystem::exists(spec)) return ReadPrompts(spec, model_text);
  const std::filesystem::path shipped =
      std::filesystem::path(plan::DefaultRegistryPath()).parent_path().parent_path() / "bench" / "prompts" / (spec + ".jsonl");
  if (spec.find('/') == std::string::npos && std::filesystem::exists(shipped)) return ReadPrompts(shipped.string(), model_text);
  Fail(spec, ": no such prompts file or directory, nor a shipped set (bench/prompts/*.jsonl)");
}

// Without --prompts: deterministic synthetic prompts (meaningful for speed, not for tau).
std::vector<BenchPrompt> SyntheticPrompts(int vocab) {
  std::vector<BenchPrompt> prompts;
  for (int p = 0; p < 3; ++p) {
    BenchPrompt b;
    b.name = "synthetic" + std::to_string(p);
    for (int i = 0; i < 32; ++i) b.ids.push_back(static_cast<int32_t>((7919u * (i + 1) * (p + 3)) % vocab));
    prompts.push_back(std::move(b));
  }
  return prompts;
}

struct Series {
  std::vector<double> tok_s;  // decode tok/s per repeat
  std::vector<double> ttft;   // ms per repeat
  double decode_ms = 0;       // summed over repeats
  int tokens = 0;             // decode tokens (after the first) summed over repeats
  static double Median(std::vector<double> s) {
    std::sort(s.begin(), s.end());
    return s.empty() ? 0.0 : s[s.size() / 2];
  }
  double Median() const { return Median(tok_s); }
  double MedianTtft() const { return Median(ttft); }
  double Min() const { return tok_s.empty() ? 0.0 : *std::min_element(tok_s.begin(), tok_s.end()); }
  double Max() const { return tok_s.empty() ? 0.0 : *std::max_element(tok_s.begin(), tok_s.end()); }
  void Add(const GenerateResult& r) {
    tok_s.push_back(r.stats.decode_tok_s());
    ttft.push_back(r.stats.ttft_ms);
    decode_ms += r.stats.decode_ms;
    tokens += std::max(0, r.stats.completion_tokens - 1);
  }
  double MsPerToken() const { return tokens > 0 ? decode_ms / tokens : 0.0; }
  Json ToJson() const {
    return Json{{"decode_tok_s", tok_s}, {"median_decode_tok_s", Median()}, {"median_ttft_ms", MedianTtft()},
                {"min_decode_tok_s", Min()}, {"max_decode_tok_s", Max()}, {"ms_per_token", MsPerToken()}};
  }
};

struct PromptResult {
  Series plain, dflash;
  int cycles = 0, committed = 0, drafted = 0, accepted = 0;
  double draft_ms = 0;
  std::vector<int> accept_hist;
  bool identical = true;
  double Tau() const { return cycles ? double(committed) / cycles : 0.0; }
};

void AddHist(std::vector<int>& into, const std::vector<int>& h) {
  if (into.size() < h.size()) into.resize(h.size());
  for (size_t i = 0; i < h.size(); ++i) into[i] += h[i];
}

// Scripted acceptance (--acceptance): the profile, and the plain run's tokens per prompt
// (prompt then output) that the scripted drafter proposes from.
struct Script {
  AcceptanceProfile profile;
  uint32_t seed = 1;
  std::vector<std::vector<int32_t>> references;
  std::string Label() const { return "scripted (profile " + profile.name + ")"; }
};

// A DFlash run whose draft proposals follow the script (spec/scripted_drafter.h); a new seed
// per run so that repeats sample different mismatches.
GenerateResult ScriptedRun(dflash::Engine& engine, const Script& script, size_t prompt, uint32_t run,
                           std::span<const int32_t> ids, const GenerateOptions& gen) {
  ScriptedDrafter drafter(*engine.drafter(), script.references[prompt], script.profile,
                          engine.target_config().decoder.vocab_size, script.seed + 7919u * run);
  engine.set_drafter_override(&drafter);
  try {
    GenerateResult r = engine.Generate(ids, gen);
    engine.set_drafter_override(nullptr);
    return r;
  } catch (...) {
    engine.set_drafter_override(nullptr);
    throw;
  }
}

// The verify-cost curve the report's cost model runs on, at the middle of the generated
// stretch of the mean prompt.
void MeasureReportCurve(dflash::Engine& engine, const std::vector<BenchPrompt>& prompts, const GenerateOptions& gen,
                        BenchReport& report) {
  size_t tokens = 0;
  for (const BenchPrompt& p : prompts) tokens += p.ids.size();
  report.curve_context = static_cast<int>(tokens / prompts.size()) + gen.max_new_tokens / 2;
  report.curve_rows.clear();
  for (int rows : {1, 2, 4, 8, 16, 32}) {
    if (rows < gen.block_size) report.curve_rows.push_back(rows);
  }
  report.curve_rows.push_back(gen.block_size);
  const std::vector<VerifyCostPoint> pts =
      MeasureVerifyCost(engine.target(), {report.curve_context}, report.curve_rows, 3, ShowProgress);
  report.curve_ratios.clear();
  for (const VerifyCostPoint& p : pts) report.curve_ratios.push_back(p.ratio);
  // The step a decode sees now (plan/loop_costs.h); the loop's work scales alike.
  report.curve_step_ms = plan::MeasureSustainedStepMs(engine.target(), report.curve_context, 16, 300);
  report.sustained_factor = report.curve_step_ms / pts.front().ms;
  engine.target().Truncate(0);
  // The loop's own work; the appends land in the generate sequence's draft context, which the
  // next Generate starts over.
  const DraftConfig& draft = *engine.draft_config();
  const plan::LoopCosts loop =
      plan::MeasureLoopCosts(*engine.drafter(), int64_t{draft.decoder.hidden_size} * draft.target_layer_ids.size(),
                             engine.target_config().decoder.vocab_size, 0, 15);
  report.pick_ms = loop.pick_ms * report.sustained_factor;
  report.append_ms = loop.append_ms * report.sustained_factor;
}

int CompareModes(dflash::Engine& engine, const ModelFlags& mf, const GenerateOptions& gen,
                 const std::vector<BenchPrompt>& prompts, int warmup, int repeats,
                 const std::string& json_path, const Script* script, BenchReport* report) {
  const bool with_draft = gen.block_size > 1;
  GenerateOptions plain = gen;
  plain.block_size = 1;
  // Before any generation: the curve fills the KV cache with synthetic entries.
  if (report) MeasureReportCurve(engine, prompts, gen, *report);
  std::vector<PromptResult> results(prompts.size());
  const int total = warmup + repeats;
  uint32_t scripted_runs = 0;
  for (int rep = 0; rep < total; ++rep) {
    for (size_t p = 0; p < prompts.size(); ++p) {
      // Alternate which mode goes first so thermal or cache drift cannot favour one.
      GenerateResult a, b;
      const bool plain_first = rep % 2 == 0;
      if (plain_first || !with_draft) a = engine.Generate(prompts[p].ids, plain);
      if (with_draft) {
        b = script ? ScriptedRun(engine, *script, p, scripted_runs++, prompts[p].ids, gen) : engine.Generate(prompts[p].ids, gen);
      }
      if (!plain_first && with_draft) a = engine.Generate(prompts[p].ids, plain);
      if (rep < warmup) continue;
      PromptResult& pr = results[p];
      pr.plain.Add(a);
      if (!with_draft) continue;
      pr.dflash.Add(b);
      pr.cycles += b.stats.cycles;
      pr.drafted += b.stats.drafted;
      pr.accepted += b.stats.accepted;
      pr.draft_ms += b.stats.draft_ms;
      for (size_t k = 0; k < b.stats.accept_hist.size(); ++k) pr.committed += static_cast<int>(k) * b.stats.accept_hist[k];
      AddHist(pr.accept_hist, b.stats.accept_hist);
      if (gen.sampling.same_tokens_as_plain() && a.tokens != b.tokens) pr.identical = false;
    }
    if (rep < warmup) {
      ShowProgress("warm-up", rep + 1, warmup);
    } else {
      ShowProgress("repeat", rep - warmup + 1, repeats);
    }
  }

  const MachineInfo machine = DescribeMachine();
  const std::string acceptance = script ? script->Label() : "measured (the draft's own proposals)";
  std::printf("%s | %s | %d threads | %d new tokens, block %d, %s, policy %s, %d warm-up + %d repeats\n",
              machine.cpu.c_str(), machine.simd_target.c_str(), engine.threads(), gen.max_new_tokens,
              gen.block_size, gen.sampling.greedy() ? "greedy" : SpecSamplingName(gen.sampling.spec).data(),
              std::string(SpecPolicyName(gen.policy)).c_str(), warmup, repeats);
  const std::optional<DType>& draft_quant = engine.options().draft_quant;
  const std::string draft_matrices = draft_quant ? std::string(DTypeName(*draft_quant)) : "as stored";
  if (with_draft) std::printf("draft matrices: %s\n", draft_matrices.c_str());
  if (with_draft) {
    std::printf("acceptance: %s%s\n", acceptance.c_str(), script ? (": " + script->profile.source).c_str() : "");
  }
  std::printf("%-16s %6s  %-26s %-26s %8s %6s %7s %s\n", "prompt", "tokens", "plain tok/s (min-max)",
              "dflash tok/s (min-max)", "speedup", "tau", "accept", "identical");
  Json jprompts = Json::array();
  Series all_plain, all_dflash;
  PromptResult total_spec;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const PromptResult& r = results[p];
    char plain_col[64], dflash_col[64] = "-";
    std::snprintf(plain_col, sizeof plain_col, "%.2f (%.2f-%.2f)", r.plain.Median(), r.plain.Min(), r.plain.Max());
    const double speedup = with_draft && r.dflash.MsPerToken() > 0 ? r.plain.MsPerToken() / r.dflash.MsPerToken() : 0;
    Json jp{{"name", prompts[p].name}, {"prompt_tokens", prompts[p].ids.size()}, {"plain", r.plain.ToJson()}};
    all_plain.decode_ms += r.plain.decode_ms;
    all_plain.tokens += r.plain.tokens;
    if (with_draft) {
      std::snprintf(dflash_col, sizeof dflash_col, "%.2f (%.2f-%.2f)", r.dflash.Median(), r.dflash.Min(), r.dflash.Max());
      jp["dflash"] = r.dflash.ToJson();
      jp["speedup"] = speedup;
      jp["tau"] = r.Tau();
      jp["acceptance"] = r.drafted ? double(r.accepted) / r.drafted : 0.0;
      jp["accept_hist"] = r.accept_hist;
      jp["acceptance_mode"] = acceptance;
      if (gen.sampling.same_tokens_as_plain()) jp["identical"] = r.identical;
      all_dflash.decode_ms += r.dflash.decode_ms;
      all_dflash.tokens += r.dflash.tokens;
      total_spec.cycles += r.cycles;
      total_spec.committed += r.committed;
      total_spec.drafted += r.drafted;
      total_spec.accepted += r.accepted;
      total_spec.draft_ms += r.draft_ms;
      total_spec.identical = total_spec.identical && r.identical;
      AddHist(total_spec.accept_hist, r.accept_hist);
    }
    jprompts.push_back(jp);
    std::printf("%-16s %6zu  %-26s %-26s %7.2fx %6.2f %7.2f %s\n", prompts[p].name.c_str(), prompts[p].ids.size(),
                plain_col, dflash_col, speedup, r.Tau(), r.drafted ? double(r.accepted) / r.drafted : 0.0,
                !with_draft ? "-" : !gen.sampling.same_tokens_as_plain() ? "n/a (rejection)" : r.identical ? "yes" : "NO (bug!)");
  }
  const double plain_tok_s = all_plain.MsPerToken() > 0 ? 1000.0 / all_plain.MsPerToken() : 0;
  const double dflash_tok_s = all_dflash.MsPerToken() > 0 ? 1000.0 / all_dflash.MsPerToken() : 0;
  const double mean_speedup = with_draft && all_dflash.MsPerToken() > 0 ? all_plain.MsPerToken() / all_dflash.MsPerToken() : 0;
  std::printf("%-16s %6s  %-26.2f %-26.2f %7.2fx %6.2f %7.2f\n", "mean", "", plain_tok_s, dflash_tok_s, mean_speedup,
              total_spec.Tau(), total_spec.drafted ? double(total_spec.accepted) / total_spec.drafted : 0.0);
  if (with_draft) {
    std::printf("accept_hist (cycles committing k tokens, k=1..%d):", gen.block_size);
    for (size_t k = 1; k < total_spec.accept_hist.size(); ++k) std::printf(" %d", total_spec.accept_hist[k]);
    std::printf("\n");
  }
  const double rss = PeakRssMiB();
  std::printf("peak RSS %.0f MiB\n", rss);

  if (!json_path.empty()) {
    Json j;
    j["machine"] = MachineJson(machine, engine.threads());
    j["config"] = Json{{"model", mf.model}, {"draft", with_draft ? mf.draft : ""}, {"n_predict", gen.max_new_tokens},
                       {"block_size", gen.block_size}, {"greedy", gen.sampling.greedy()},
                       {"temperature", gen.sampling.temperature}, {"spec_sampling", SpecSamplingName(gen.sampling.spec)}, {"warmup", warmup}, {"repeats", repeats},
                       {"no_eos", gen.ignore_stop}, {"spec_policy", SpecPolicyName(gen.policy)},
                       {"target_quant", mf.target_quant}, {"draft_quant", draft_matrices},
                       {"bf16_dot", mf.bf16_dot}, {"kv_type", DTypeName(engine.options().kv_type)}};
    j["prompts"] = jprompts;
    j["mean"] = Json{{"plain_decode_tok_s", plain_tok_s}, {"dflash_decode_tok_s", dflash_tok_s},
                     {"speedup", mean_speedup}, {"tau", total_spec.Tau()},
                     {"acceptance", total_spec.drafted ? double(total_spec.accepted) / total_spec.drafted : 0.0},
                     {"accept_hist", total_spec.accept_hist}, {"acceptance_mode", acceptance}};
    if (with_draft && gen.sampling.same_tokens_as_plain()) j["identical"] = total_spec.identical;
    if (with_draft) j["acceptance_mode"] = acceptance;
    if (script) {
      j["acceptance_profile"] = Json{{"name", script->profile.name}, {"source", script->profile.source},
                                     {"accept_at_depth", script->profile.accept_at_depth}, {"seed", script->seed}};
    }
    j["peak_rss_mib"] = rss;
    std::ofstream out(json_path);
    if (!out) Fail(json_path, ": cannot write");
    out << j.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  if (report) {
    BenchReport& rp = *report;
    rp.machine = machine;
    rp.threads = engine.threads();
    rp.model = mf.model;
    rp.draft = mf.draft;
    rp.target_quant = mf.target_quant;
    rp.kv_type = DTypeName(engine.options().kv_type);
    rp.policy = SpecPolicyName(gen.policy);
    rp.new_tokens = gen.max_new_tokens;
    rp.block = gen.block_size;
    rp.warmup = warmup;
    rp.repeats = repeats;
    rp.context = engine.options().context;
    rp.acceptance = acceptance;
    rp.acceptance_source = script ? script->profile.source : "";
    double plain_ttft = 0, dflash_ttft = 0;
    for (size_t p = 0; p < prompts.size(); ++p) {
      const PromptResult& r = results[p];
      rp.prompts.push_back({prompts[p].name, static_cast<int>(prompts[p].ids.size()), r.plain.Median(),
                            r.dflash.Median(), r.dflash.MsPerToken() > 0 ? r.plain.MsPerToken() / r.dflash.MsPerToken() : 0,
                            r.plain.MedianTtft(), r.dflash.MedianTtft(), r.Tau(), r.identical});
      plain_ttft += r.plain.MedianTtft();
      dflash_ttft += r.dflash.MedianTtft();
    }
    rp.plain_ttft_ms = plain_ttft / prompts.size();
    rp.dflash_ttft_ms = dflash_ttft / prompts.size();
    rp.plain_tok_s = plain_tok_s;
    rp.dflash_tok_s = dflash_tok_s;
    rp.tau = total_spec.Tau();
    rp.sampling_identical = gen.sampling.same_tokens_as_plain();
    rp.identical = total_spec.identical;
    rp.accept_hist = total_spec.accept_hist;
    rp.accept_at_depth = AcceptanceAtDepth(total_spec.accept_hist);
    rp.draft_ms = total_spec.cycles ? total_spec.draft_ms / total_spec.cycles : 0.0;
    rp.drafts_per_cycle = total_spec.cycles ? double(total_spec.drafted) / total_spec.cycles : 0.0;
    rp.peak_rss_mib = rss;
    // The memory model's estimate from the files' headers and shapes alone (the draft quantised
    // as the target is, --draft-quant auto).
    const plan::ModelShape target_shape = plan::ShapeOf(engine.target_config()),
                           draft_shape = plan::ShapeOf(*engine.draft_config());
    rp.memory_estimate = plan::EstimateRunMemory(
        target_shape, &draft_shape, plan::InspectTarget(mf.model).weight_bytes, plan::InspectDraft(mf.draft).weight_bytes,
        mf.target_quant == "none" ? "" : mf.target_quant, engine.options().context,
        static_cast<int>(RowBytes(engine.options().kv_type, 1)));
    rp.cache_bytes = static_cast<int64_t>(engine.cache_bytes());
    Analyse(rp);
  }
  return with_draft && gen.sampling.same_tokens_as_plain() && !total_spec.identical ? 3 : 0;
}

// Mean ms per stage of each point's passes and each stage's share of the pass; then the
// matrices' and attention's multiply-add rates against this machine's compute peaks, measured
// in the same run. The matrices' peak is the int8 one where the weights are block-quantised
// (their products are int8 dot products); their time includes quantising the activations.
// bf16_attention: attention ran bf16 dot products (a bf16 cache where Bf16DotActive), so its
// rate is against that peak, else against f32 FMAs.
void PrintStages(const std::vector<VerifyCostPoint>& pts, const DecoderConfig& config, const MoeConfig& moe, bool int8_weights,
                 bool bf16_attention, const ComputePeak& peak, Json& jpts) {
  constexpr int kStages = static_cast<int>(PassStage::kCount);
  std::printf("\nper stage, mean ms per pass (share of the pass):\n%8s %5s", "context", "rows");
  for (int s = 0; s < kStages; ++s) std::printf(" %16s", PassStageName(static_cast<PassStage>(s)));
  std::printf("\n");
  for (const VerifyCostPoint& p : pts) {
    double total = 0;
    for (double ms : p.stages.ms) total += ms;
    std::printf("%8d %5d", p.context, p.rows);
    for (double ms : p.stages.ms) std::printf(" %8.2f (%4.1f%%)", ms, total > 0 ? 100 * ms / total : 0.0);
    std::printf("\n");
  }
  if (pts.front().stages.experts_read > 0) {
    // A MoE verify reads every expert any of its rows chose: this, not its row count, is what
    // its expert stage costs.
    // Uniform routing, E (1 - (1 - k/E)^rows) per layer, is the worst case: random weights come
    // close to it, trained routers concentrate.
    const int sparse = static_cast<int>(std::count(moe.sparse.begin(), moe.sparse.end(), true));
    std::printf("\nexperts read per pass (distinct experts per sparse layer, summed over the %d layers; "
                "uniform routing's expectation):\n", sparse);
    for (const VerifyCostPoint& p : pts) {
      std::printf("%8d %5d %8.1f %8.1f\n", p.context, p.rows, p.stages.experts_read,
                  sparse * plan::DistinctExperts(moe.num_experts, moe.top_k, p.rows));
    }
  }
  const double matmul_peak = int8_weights ? peak.int8_gmacs : 0;
  const double attn_peak = bf16_attention ? peak.bf16_gmacs : peak.f32_gmacs;
  std::printf("\ncompute peak of all threads, this run: f32 FMA %.1f G MAC/s, int8 dot %.1f G MAC/s%s, bf16 dot %.1f G MAC/s\n",
              peak.f32_gmacs, peak.int8_gmacs, peak.int8_gmacs > 0 ? "" : " (no VNNI on this target)", peak.bf16_gmacs);
  std::printf("%8s %5s %14s %9s %14s %9s\n", "context", "rows", "matmul GMAC/s", int8_weights ? "% int8" : "",
              "attn GMAC/s", bf16_attention ? "% bf16" : "% f32");
  for (size_t i = 0; i < pts.size(); ++i) {
    const VerifyCostPoint& p = pts[i];
    const PassMacs macs = CountPassMacs(config, p.context, p.rows, moe);
    const double matmul_ms = p.stages[PassStage::kQkv] + p.stages[PassStage::kOProj] + p.stages[PassStage::kGateUp] +
                             p.stages[PassStage::kDown] + p.stages[PassStage::kLmHead];
    const double matmul_rate = matmul_ms > 0 ? macs.matmul / matmul_ms / 1e6 : 0;
    const double attn_rate = p.stages[PassStage::kAttention] > 0 ? macs.attention / p.stages[PassStage::kAttention] / 1e6 : 0;
    std::printf("%8d %5d %14.1f", p.context, p.rows, matmul_rate);
    if (matmul_peak > 0) {
      std::printf(" %8.1f%%", 100 * matmul_rate / matmul_peak);
    } else {
      std::printf(" %9s", "");
    }
    std::printf(" %14.1f %8.1f%%\n", attn_rate, attn_peak > 0 ? 100 * attn_rate / attn_peak : 0.0);
    Json& j = jpts[i];
    j["stages_ms"] = Json::object();
    for (int s = 0; s < kStages; ++s) j["stages_ms"][PassStageName(static_cast<PassStage>(s))] = p.stages.ms[s];
    j["experts_read"] = p.stages.experts_read;
    j["matmul_gmacs"] = matmul_rate;
    if (macs.experts > 0 && p.stages[PassStage::kExperts] > 0) {
      j["experts_gmacs"] = macs.experts / p.stages[PassStage::kExperts] / 1e6;
    }
    j["attention_gmacs"] = attn_rate;
  }
}

// A hybrid's state checkpoint is a copy of every linear layer's state: its cost against the
// passes just timed says what spacing (--ctx-checkpoints-interval) is cheap, since a departure
// re-prefills on average half the spacing.
void PrintCheckpointCost(const TargetModel& target, const std::vector<VerifyCostPoint>& pts, int repeats) {
  const size_t bytes = target.checkpoint_bytes();
  if (bytes == 0 || pts.empty()) return;
  std::vector<float> from(bytes / sizeof(float), 1.0f), to(from.size());
  double best = 1e30;
  for (int i = 0; i < std::max(repeats, 1); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::copy(from.begin(), from.end(), to.begin());
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const VerifyCostPoint* widest = &pts[0];
  for (const VerifyCostPoint& p : pts) {
    if (p.context == pts[0].context && p.rows > widest->rows) widest = &p;
  }
  std::printf("state checkpoint: %.1f MiB, copied in %.2f ms = %.2f positions of a %d-row pass at context %d\n",
              bytes / 1048576.0, best, best / (widest->ms / widest->rows), widest->rows, widest->context);
}

int VerifyCost(dflash::Engine& engine, const ModelFlags& mf, const std::string& contexts_text,
               const std::string& rows_text, int repeats, bool profile, const std::string& json_path) {
  std::vector<int> contexts = ParseIntList(contexts_text, "--contexts");
  std::vector<int> rows = ParseIntList(rows_text, "--rows");
  const std::vector<VerifyCostPoint> pts =
      MeasureVerifyCost(engine.target(), contexts, rows, repeats, ShowProgress, profile);
  const ComputePeak peak = profile ? MeasureComputePeak(engine.pool()) : ComputePeak{};
  const MachineInfo machine = DescribeMachine();
  std::printf("%s | %s | %d threads | target %s | KV %s\n", machine.cpu.c_str(), machine.simd_target.c_str(),
              engine.threads(), mf.model.c_str(), std::string(DTypeName(engine.options().kv_type)).c_str());
  std::printf("%8s %5s %10s %18s %9s\n", "context", "rows", "ms", "(min-max)", "t(r)/t(1)");
  Json jpts = Json::array();
  for (const VerifyCostPoint& p : pts) {
    std::printf("%8d %5d %10.2f %8.2f-%-9.2f %9.2f\n", p.context, p.rows, p.ms, p.ms_min, p.ms_max, p.ratio);
    jpts.push_back(Json{{"context", p.context}, {"rows", p.rows}, {"ms", p.ms}, {"ms_min", p.ms_min},
                        {"ms_max", p.ms_max}, {"ratio", p.ratio}});
  }
  if (profile) {
    const bool bf16_attention = engine.options().kv_type == DType::kBF16 && ops::Bf16DotActive();
    PrintStages(pts, engine.target().config(), engine.target_config().moe, quant::IsBlockQuantized(engine.target().lm_head().dtype), bf16_attention,
                peak, jpts);
  }
  PrintCheckpointCost(engine.target(), pts, repeats);
  std::printf("peak RSS %.0f MiB\n", PeakRssMiB());
  if (!json_path.empty()) {
    Json j{{"machine", MachineJson(machine, engine.threads())}, {"model", mf.model},
           {"kv_type", DTypeName(engine.options().kv_type)}, {"repeats", repeats}, {"verify_cost", jpts},
           {"peak_rss_mib", PeakRssMiB()}};
    if (profile) {
      j["compute_peak"] = Json{{"f32_gmacs", peak.f32_gmacs}, {"int8_gmacs", peak.int8_gmacs}, {"bf16_gmacs", peak.bf16_gmacs}};
    }
    std::ofstream out(json_path);
    if (!out) Fail(json_path, ": cannot write");
    out << j.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}

int Roofline(dflash::Engine& engine, const ModelFlags& mf, const RooflineOptions& opt, const std::string& json_path) {
  const RooflineResult r = MeasureRoofline(engine.target(), engine.pool(), opt, ShowProgress);
  const MachineInfo machine = DescribeMachine();
  std::printf("%s | %s | %d threads | target %s (%s) | KV %s\n", machine.cpu.c_str(), machine.simd_target.c_str(),
              engine.threads(), mf.model.c_str(), mf.target_quant.c_str(), std::string(DTypeName(engine.options().kv_type)).c_str());
  std::printf("read bandwidth %.2f GB/s median before the timings, %.2f after (%d passes over %.0f MiB each); "
              "roofline %.2f GB/s, the higher\n",
              r.bandwidth.median_gbs, r.bandwidth_after.median_gbs, r.bandwidth.passes, r.bandwidth.bytes / 1048576.0,
              r.roofline_gbs);
  std::printf("prefill %.1f tok/s (%d tokens from empty, chunks of %d)\n", r.prefill_tok_s, opt.prefill_tokens,
              engine.target().max_rows());
  std::printf("%8s %10s %9s %12s %8s %10s\n", "context", "t(1) ms", "tok/s", "MB/token", "GB/s", "roofline");
  for (const DecodePoint& d : r.decode) {
    std::printf("%8d %10.2f %9.2f %12.1f %8.2f %9.1f%%\n", d.context, d.ms, d.tok_s, d.bytes / 1e6, d.gbs,
                d.roofline_pct);
  }
  std::printf("verify cost t(rows)/t(1):\n%8s", "context");
  std::vector<int> rows;
  for (const VerifyCostPoint& p : r.verify)
    if (std::find(rows.begin(), rows.end(), p.rows) == rows.end()) rows.push_back(p.rows);
  for (int n : rows) std::printf(" %6d", n);
  std::printf("\n");
  Json verify = Json::object(), points = Json::array();
  for (const DecodePoint& d : r.decode) {
    std::printf("%8d", d.context);
    Json curve = Json::object();
    for (const VerifyCostPoint& p : r.verify) {
      if (p.context != d.context) continue;
      std::printf(" %6.2f", p.ratio);
      curve[std::to_string(p.rows)] = p.ratio;
      points.push_back(Json{{"context", p.context}, {"rows", p.rows}, {"ms", p.ms}, {"ms_min", p.ms_min},
                            {"ms_max", p.ms_max}, {"ratio", p.ratio}});
    }
    std::printf("\n");
    verify[std::to_string(d.context)] = curve;
  }
  std::printf("peak RSS %.0f MiB\n", PeakRssMiB());
  if (!json_path.empty()) {
    Json decode = Json::array();
    for (const DecodePoint& d : r.decode) {
      decode.push_back(Json{{"context", d.context}, {"ms", d.ms}, {"tok_s", d.tok_s}, {"bytes", d.bytes},
                            {"gbs", d.gbs}, {"roofline_pct", d.roofline_pct}});
    }
    const DecodePoint& first = r.decode.front();  // the shortest context
    Json j{{"machine", MachineJson(machine, engine.threads())},
           {"model", mf.model},
           {"target_quant", mf.target_quant},
           {"kv_type", DTypeName(engine.options().kv_type)},
           {"repeats", opt.repeats},
           {"bandwidth_gbs", r.roofline_gbs},
           {"bandwidth_before_gbs", r.bandwidth.median_gbs},
           {"bandwidth_after_gbs", r.bandwidth_after.median_gbs},
           {"bandwidth_best_gbs", std::max(r.bandwidth.best_gbs, r.bandwidth_after.best_gbs)},
           {"decode_context", first.context},
           {"decode_tok_s", first.tok_s},
           {"decode_roofline_pct", first.roofline_pct},
           {"decode", decode},
           {"prefill_tokens", opt.prefill_tokens},
           {"prefill_tok_s", r.prefill_tok_s},
           {"verify_cost", verify},
           {"verify_points", points},
           {"peak_rss_mib", PeakRssMiB()}};
    std::ofstream out(json_path);
    if (!out) Fail(json_path, ": cannot write");
    out << j.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}

}  // namespace

int Bench(int argc, char** argv) {
  ModelFlags mf;
  mf.no_eos = true;  // fixed-length runs, so both modes time the same number of tokens
  mf.spec_policy = "always";  // raw DFlash against plain; --spec-policy adaptive measures the policy
  std::string prompts_path, tokenizer_dir, json_path, contexts = "512,8192", rows = "1,2,4,8,16,32";
  std::string acceptance_spec, report_path;
  int warmup = 1, repeats = 3, bandwidth_mib = 1024, prefill_tokens = 512, acceptance_seed = 1;
  bool verify_cost = false, roofline = false, profile = false;
  Args args("bench",
            "Benchmark plain decoding against DFlash on the same prompts in one run (fixed length,\n"
            "warm-up, interleaved repeats), or with --verify-cost time target passes of several row\n"
            "counts at several context lengths, or with --roofline also measure memory bandwidth, decode\n"
            "% of the bandwidth roofline and prefill speed. --report writes the decision report (Markdown,\n"
            "JSON, SVG charts); --acceptance replaces the draft's proposals by a scripted acceptance profile.");
  mf.Declare(args);
  args.Option("--prompts", &prompts_path, "FILE|DIR|NAME",
              "JSONL, one prompt per line: {\"name\": ..., and \"prompt\": TEXT (tokenized), \"messages\": [...] "
              "(the model's chat template) or \"prompt_ids\": [...]}; or a directory of .txt prompts; or a shipped "
              "set of bench/prompts (chat, pair-heldout)");
  args.Option("--tokenizer", &tokenizer_dir, "DIR", "tokenizer directory or .gguf for text prompts (default: the model's own)");
  args.Option("--warmup", &warmup, "N", "untimed warm-up rounds");
  args.Option("--repeats", &repeats, "N", "timed rounds (median and min-max reported)");
  args.Option("--json", &json_path, "FILE", "also write the results as JSON (with --report: the report's, docs/plan.md)");
  args.Option("--report", &report_path, "FILE.md",
              "write the decision report: throughput, memory, baseline comparison with the cost model's prediction, "
              "recommendation; SVG charts next to it");
  args.Option("--acceptance", &acceptance_spec, "PROFILE",
              "scripted acceptance: the real draft runs, its proposals follow the plain run's tokens up to a sampled "
              "first mismatch; PROFILE is agent, code, math, chat (data/pairs.json figures) or a JSON file "
              "{\"name\", \"source\", \"accept_at_depth\": [...]}");
  args.Option("--acceptance-seed", &acceptance_seed, "N", "--acceptance: seed of the sampled mismatches");
  args.Flag("--verify-cost", &verify_cost, "time t(rows)/t(1) target passes instead of generating");
  args.Flag("--profile", &profile, "--verify-cost: also split each pass's time by stage (qkv, attention, ...)");
  args.Flag("--roofline", &roofline, "bandwidth, decode % of roofline, prefill and the verify cost curve");
  args.Option("--contexts", &contexts, "LIST", "context lengths for --verify-cost; --roofline without it uses 512,4096,16384");
  args.Option("--rows", &rows, "LIST", "row counts for --verify-cost / --roofline");
  args.Option("--bandwidth-mib", &bandwidth_mib, "N", "--roofline: MiB streamed by the bandwidth probe");
  args.Option("--prefill-tokens", &prefill_tokens, "N", "--roofline: tokens prefilled from empty");
  if (!args.Parse(argc, argv)) return 0;
  if (repeats < 1 || warmup < 0) Fail("--repeats must be >= 1 and --warmup >= 0");

  if ((verify_cost || roofline) && (!report_path.empty() || !acceptance_spec.empty())) {
    Fail("--report and --acceptance compare plain decoding with DFlash; --verify-cost and --roofline time target passes only");
  }
  if (verify_cost && roofline) Fail("--verify-cost and --roofline are alternatives (--roofline includes the curve)");
  if (profile && !verify_cost) Fail("--profile splits --verify-cost passes by stage; add --verify-cost");
  if (roofline && !args.Given("--contexts")) contexts = "512,4096,16384";
  if (verify_cost || roofline) {
    mf.mode = "ar";
    const std::vector<int> ctx_list = ParseIntList(contexts, "--contexts");
    const std::vector<int> row_list = ParseIntList(rows, "--rows");
    const int max_ctx = *std::max_element(ctx_list.begin(), ctx_list.end());
    const int max_rows = *std::max_element(row_list.begin(), row_list.end());
    if (!args.Given("--ctx")) mf.ctx = std::max(max_ctx + max_rows, roofline ? prefill_tokens : 0);
    mf.prefill_chunk = std::max(mf.prefill_chunk, max_rows);
    if (bandwidth_mib < 1) Fail("--bandwidth-mib must be at least 1, got ", bandwidth_mib);
    dflash::Engine engine(mf.Engine());
    if (!roofline) return VerifyCost(engine, mf, contexts, rows, repeats, profile, json_path);
    RooflineOptions opt;
    opt.contexts = ctx_list;
    opt.rows = row_list;
    opt.repeats = repeats;
    opt.bandwidth_bytes = int64_t{bandwidth_mib} << 20;
    opt.prefill_tokens = prefill_tokens;
    return Roofline(engine, mf, opt, json_path);
  }
  const EngineOptions engine_options = mf.Engine();
  std::vector<BenchPrompt> prompts;
  if (!prompts_path.empty()) {
    ModelText model_text(tokenizer_dir, mf.model);
    prompts = LoadPrompts(prompts_path, model_text);
  }
  dflash::Engine engine(engine_options);
  WarnIfContextUntrained(engine);
  const GenerateOptions gen = mf.Generation(args, engine);
  if (prompts.empty()) prompts = SyntheticPrompts(engine.target_config().decoder.vocab_size);
  const bool with_draft = gen.block_size > 1;
  if ((!report_path.empty() || !acceptance_spec.empty()) && !with_draft) {
    Fail("--report and --acceptance need a draft (-d DRAFT) and --mode dflash");
  }
  std::optional<Script> script;
  if (!acceptance_spec.empty()) {
    if (!gen.sampling.same_tokens_as_plain()) {
      Fail("--acceptance scripts which drafts the target accepts, which holds under greedy decoding or "
           "--spec-sampling reproducible, not rejection sampling");
    }
    script.emplace();
    script->profile = plan::LoadAcceptanceProfile(acceptance_spec, plan::LoadRegistry(plan::DefaultRegistryPath()), gen.block_size);
    script->seed = static_cast<uint32_t>(acceptance_seed);
    GenerateOptions plain = gen;
    plain.block_size = 1;
    for (size_t p = 0; p < prompts.size(); ++p) {
      std::vector<int32_t>& ref = script->references.emplace_back(prompts[p].ids);
      const GenerateResult r = engine.Generate(prompts[p].ids, plain);
      ref.insert(ref.end(), r.tokens.begin(), r.tokens.end());
      ShowProgress("reference", static_cast<int>(p + 1), static_cast<int>(prompts.size()));
    }
  }
  std::optional<BenchReport> report;
  if (!report_path.empty()) report.emplace();
  const int rc = CompareModes(engine, mf, gen, prompts, warmup, repeats, report ? "" : json_path,
                              script ? &*script : nullptr, report ? &*report : nullptr);
  if (report) {
    for (const std::string& f : WriteReport(*report, report_path, json_path)) std::printf("wrote %s\n", f.c_str());
  }
  return rc;
}

}  // namespace dflash::app
