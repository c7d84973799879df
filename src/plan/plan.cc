#include "plan/plan.h"

#include <cstdio>
#include <sstream>

#include "core/error.h"

namespace dflash::plan {

namespace {

// The default KV cache element (f16, or bf16 with AVX512_BF16): 2 bytes.
constexpr int kKvBytes = 2;
// Preference among formats that fit: q8_0 keeps nearly bf16's quality at about half its bytes
// per token (decode is bound by bytes read), q4_k halves that again at some quality cost; bf16
// itself reads twice q8_0's bytes per token for no measurable gain in greedy output.
const std::vector<std::string> kPreference{"q8_0", "q4_k", "mlx-4bit", "bf16"};

double GiB(int64_t bytes) { return double(bytes) / double(int64_t{1} << 30); }

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Basename(const std::string& repo) { return repo.substr(repo.find('/') + 1); }

const Format* FindFormat(const PairEntry& p, const std::string& name) {
  for (const Format& f : p.formats) {
    if (f.format == name) return &f;
  }
  return nullptr;
}

// Index of the best candidate: the largest runnable target with a format that fits, that
// pair's most preferred fitting format. -1 when none.
int Choose(const std::vector<Candidate>& cs) {
  int best = -1;
  auto rank = [](const std::string& f) {
    for (size_t i = 0; i < kPreference.size(); ++i) {
      if (kPreference[i] == f) return int(i);
    }
    return int(kPreference.size());
  };
  for (int i = 0; i < int(cs.size()); ++i) {
    if (!cs[i].fits || !cs[i].pair->runs_today) continue;
    if (best < 0) {
      best = i;
      continue;
    }
    const double size = CountParams(cs[i].pair->target.shape).total(), best_size = CountParams(cs[best].pair->target.shape).total();
    if (size > best_size || (size == best_size && rank(cs[i].format) < rank(cs[best].format))) best = i;
  }
  return best;
}

std::string Reason(const Plan& plan, int64_t usable) {
  const std::string budget = Fixed(GiB(usable), 1) + " GiB usable (" + Fixed(plan.request.memory_gb, 1) +
                             " GiB less headroom for the OS)";
  if (plan.choice < 0) {
    bool any_runnable = false;
    for (const Candidate& c : plan.candidates) any_runnable |= c.pair->runs_today;
    if (!any_runnable) return "no considered pair runs in dflash.cpp today (see each pair's why_not)";
    return "no pair that dflash.cpp runs fits " + budget + " at context " + std::to_string(plan.request.context);
  }
  const Candidate& c = plan.candidates[plan.choice];
  std::string why = c.pair->name + " in " + c.format + " needs " + Fixed(GiB(c.memory.total()), 1) + " GiB of " + budget +
                    " at context " + std::to_string(plan.request.context) +
                    "; it is the largest pair dflash.cpp runs today that fits";
  if (c.format != "bf16") why += ", and " + c.format + " is the most precise format of it that fits (decode speed follows bytes per token)";
  for (const Candidate& o : plan.candidates) {
    if (!o.pair->runs_today && o.fits && CountParams(o.pair->target.shape).total() > CountParams(c.pair->target.shape).total()) {
      why += "; larger pairs that would fit do not run yet (" + o.pair->name + ": " + o.pair->why_not + ")";
      break;
    }
  }
  return why;
}

void AddCommands(Plan& plan) {
  const Candidate& c = plan.candidates[plan.choice];
  const PairEntry& p = *c.pair;
  const Format* mlx = c.format == "mlx-4bit" ? FindFormat(p, "mlx-4bit") : nullptr;
  const std::string target_repo = mlx ? mlx->repo : p.target.id;
  const std::string target_dir = "models/" + Basename(target_repo), draft_dir = "models/" + Basename(p.draft.id);
  plan.setup = {"pip install -U huggingface_hub   # provides the `hf` command",
                "hf download " + target_repo + " --local-dir " + target_dir,
                "hf download " + p.draft.id + " --local-dir " + draft_dir};
  std::string flags = "-m " + target_dir + " -d " + draft_dir;
  if (c.format == "q8_0" || c.format == "q4_k") flags += " --target-quant " + c.format + " --draft-quant " + c.format;
  flags += " -c " + std::to_string(plan.request.context) + " -t " + std::to_string(plan.request.threads);
  plan.run = "dflash generate " + flags + " --chat -p 'How many positive whole-number divisors does 196 have?' -n 256";
  plan.bench = "dflash bench " + flags + " -n 256";
}

// tau for the request's task, and where it came from in words.
double ChooseTau(const Registry& r, const PairEntry& p, const std::string& task, std::string* source) {
  if (task == "agent") {
    *source = "agent requests at " + std::to_string(r.agent.context) + " tokens of context: midpoint of " +
              Fixed(r.agent.tokens_per_cycle_lo, 1) + "-" + Fixed(r.agent.tokens_per_cycle_hi, 1) +
              " tokens per cycle (" + r.agent.source + ")";
    return (r.agent.tokens_per_cycle_lo + r.agent.tokens_per_cycle_hi) / 2;
  }
  bool borrowed = false;
  const double tau = TaskAcceptance(r, p, task, &borrowed);
  *source = borrowed ? "z-lab's " + task + " tau for Qwen3-8B, borrowed: none reported for " + p.name + " (" + r.default_tau.source + ")"
                     : "z-lab's " + task + " tau for " + p.name + " (" + p.tau.source + ")";
  return tau;
}

std::vector<std::string> CalibratedAssumptions(const Calibration& c) {
  std::vector<std::string> a;
  if (c.extrapolated()) {
    a.push_back("built " + std::to_string(c.target_layers_built) + " of the target's " + std::to_string(c.target_layers) +
                " layers and " + std::to_string(c.draft_layers_built) + " of the draft's " + std::to_string(c.draft_layers) +
                "; each pass's time was extrapolated per layer (the LM head's measured share kept, the rest scaled)");
  }
  if (!c.format_note.empty()) a.push_back(c.format_note);
  a.push_back("the draft pass's LM head share is the target's widest pass's per-row LM head time x (block - 1) rows");
  a.push_back("a plain step is the 1-row pass plus one pick and one draft-context append (the draft's context is "
              "kept current in plain steps too); a cycle adds one append and a pick per draft and per target row read; "
              "the append was timed with one captured layer and scaled to the draft's capture layers and layers by "
              "multiply-adds");
  a.push_back("the step, the loop's work and prefill are scaled by " + Fixed(c.sustained_factor, 2) +
              " (the mean of consecutive 1-row passes over the median single pass), the draft and multi-row verifies "
              "by " + Fixed(c.cycle_factor, 2) + " (the same for back-to-back cycles): the share of the cores a decode "
              "gets now (both 1 on a quiet machine)");
  a.push_back("prefill speed is one 64-token chunk at half the context; TTFT = context / that speed");
  a.push_back("acceptance falls geometrically with draft depth, matched to the reported tau at the full block");
  a.push_back("tau comes from z-lab's GPU runs (greedy, thinking off); it does not depend on the hardware, but does on "
              "the prompts");
  return a;
}

}  // namespace

std::vector<std::string> PlanFormats(const PairEntry& p) {
  std::vector<std::string> formats{"q8_0", "q4_k", "bf16"};
  if (FindFormat(p, "mlx-4bit")) formats.push_back("mlx-4bit");
  return formats;
}

Plan MakePlan(const Registry& registry, const PlanRequest& request) {
  if (request.context < 1) Fail("--context must be at least 1, got ", request.context);
  if (request.task != "math" && request.task != "code" && request.task != "chat" && request.task != "agent") {
    Fail("--task must be code, math, chat or agent, got '", request.task, "'");
  }
  if (!request.pair.empty() && !registry.Find(request.pair)) {
    std::string names;
    for (const std::string& n : registry.Names()) names += (names.empty() ? "" : ", ") + n;
    Fail("--pair '", request.pair, "' is not in the registry ", registry.path, " (", names, ")");
  }
  Plan plan;
  plan.request = request;
  plan.registry_path = registry.path;
  const int64_t machine = static_cast<int64_t>(request.memory_gb * double(int64_t{1} << 30));
  const int64_t usable = machine - Headroom(machine);
  for (const PairEntry& p : registry.pairs) {
    if (!request.pair.empty() && p.name != request.pair) continue;
    for (const std::string& f : PlanFormats(p)) {
      Candidate c{&p, f, EstimateMemory(p.target.shape, p.draft.shape, FindWeightFormat(f), request.context, kKvBytes)};
      c.fits = c.memory.total() <= usable;
      plan.candidates.push_back(c);
    }
  }
  plan.choice = Choose(plan.candidates);
  plan.reason = Reason(plan, usable);
  if (plan.choice < 0) return plan;
  AddCommands(plan);
  const Candidate& c = plan.candidates[plan.choice];
  const int block = c.pair->draft.shape.block_size;
  plan.costs = AnalyticCosts(c.pair->target.shape, c.pair->draft.shape, FindWeightFormat(c.format), request.context,
                             kKvBytes, request.rates);
  plan.tau = ChooseTau(registry, *c.pair, request.task, &plan.tau_source);
  plan.accept_at_depth = GeometricCurve(plan.tau, block);
  plan.prediction = Predict(plan.costs, plan.accept_at_depth, block);
  return plan;
}

void CalibratePlan(Plan& plan, ThreadPool& pool, const CalibrationOptions& options) {
  if (plan.choice < 0) Fail("--calibrate: no pair was chosen to calibrate (", plan.reason, ")");
  const Candidate& c = plan.candidates[plan.choice];
  plan.calibration = Calibrate(c.pair->target.shape, c.pair->draft.shape, c.format, plan.request.context, pool, options);
  plan.costs = plan.calibration->costs;
  plan.prediction = Predict(plan.costs, plan.accept_at_depth, c.pair->draft.shape.block_size);
}

namespace {
// A predicted gain below this is within the prediction's error (docs/plan.md).
constexpr double kWorthwhileSpeedup = 1.1;
// A draft pass costing more than this share of the cycle it serves is worth bounding.
constexpr double kDraftShareForWindow = 0.4;
}  // namespace

Recommendation Recommend(const Plan& plan) {
  Recommendation r;
  if (plan.choice < 0) return r;
  const Prediction& p = plan.prediction;
  const Candidate& c = plan.candidates[plan.choice];
  const double speedup = p.adaptive_tok_s / p.plain_tok_s;
  r.dflash = p.best_rows > 1 && speedup >= kWorthwhileSpeedup;
  r.verify_rows = r.dflash ? p.best_rows : 1;
  r.format = c.format;
  const int rows = std::max(2, p.best_rows);
  const double cycle_ms = CycleMs(plan.costs, ExpectedTokens(plan.accept_at_depth, rows), rows);
  r.draft_window = plan.costs.draft_ms > kDraftShareForWindow * cycle_ms && plan.request.context > 4096
                       ? "--draft-window 2048: the draft pass is " + Fixed(100 * plan.costs.draft_ms / cycle_ms, 0) +
                             "% of a cycle at this context; a bounded draft context caps it (check tau with bench)"
                       : "unbounded (the default): the draft pass is " + Fixed(100 * plan.costs.draft_ms / cycle_ms, 0) +
                             "% of a cycle at this context";
  r.why = r.dflash ? "predicted " + Fixed(speedup, 2) + "x plain decoding verifying " + std::to_string(p.best_rows) + " rows"
                   : p.best_rows > 1 ? "predicted only " + Fixed(speedup, 2) + "x, within the prediction's error"
                                     : "no verify length beats plain decoding at this tau and these costs";
  return r;
}

Json PlanJson(const Plan& plan) {
  const PlanRequest& r = plan.request;
  Json j;
  j["schema"] = 1;
  j["machine"] = {{"label", r.label},
                  {"cpu", r.cpu},
                  {"simd_target", r.simd_target},
                  {"hardware_threads", r.hardware_threads},
                  {"threads", r.threads},
                  {"memory_gb", r.memory_gb},
                  {"memory_source", r.memory_source},
                  {"bandwidth_gbs", r.rates.bandwidth_gbs},
                  {"bandwidth_source", r.bandwidth_source},
                  {"f32_gmacs", r.rates.f32_gmacs},
                  {"int8_gmacs", r.rates.int8_gmacs}};
  j["request"] = {{"context", r.context}, {"task", r.task}, {"pair", r.pair}};
  j["registry"] = plan.registry_path;
  Json cands = Json::array();
  for (const Candidate& c : plan.candidates) {
    const MemoryNeed& m = c.memory;
    cands.push_back({{"pair", c.pair->name},
                     {"target", c.pair->target.id},
                     {"draft", c.pair->draft.id},
                     {"format", c.format},
                     {"runs_today", c.pair->runs_today},
                     {"why_not", c.pair->why_not},
                     {"verified", c.pair->target.verified && c.pair->draft.verified},
                     {"fits", c.fits},
                     {"memory", {{"target_weights_bytes", m.target_weights},
                                 {"draft_weights_bytes", m.draft_weights},
                                 {"kv_cache_bytes", m.kv_cache},
                                 {"kv_bytes_per_1k", m.kv_per_1k},
                                 {"draft_cache_bytes", m.draft_cache},
                                 {"recurrent_state_bytes", m.recurrent_state},
                                 {"buffers_bytes", m.buffers},
                                 {"total_bytes", m.total()}}}});
  }
  j["candidates"] = cands;
  j["choice"] = plan.choice < 0 ? Json(nullptr)
                                : Json{{"pair", plan.candidates[plan.choice].pair->name},
                                       {"format", plan.candidates[plan.choice].format}};
  j["reason"] = plan.reason;
  j["commands"] = plan.choice < 0 ? Json(nullptr) : Json{{"setup", plan.setup}, {"run", plan.run}, {"bench", plan.bench}};
  if (plan.choice < 0) {
    j["prediction"] = j["calibration"] = j["recommendation"] = nullptr;
    return j;
  }
  const Prediction& p = plan.prediction;
  j["calibration"] = nullptr;
  if (plan.calibration) {
    const Calibration& c = *plan.calibration;
    j["calibration"] = {{"format", c.format},
                        {"format_note", c.format_note},
                        {"kv_type", c.kv_type},
                        {"context", c.context},
                        {"target_layers_built", c.target_layers_built},
                        {"target_layers", c.target_layers},
                        {"draft_layers_built", c.draft_layers_built},
                        {"draft_layers", c.draft_layers},
                        {"extrapolated", c.extrapolated()},
                        {"rows", c.rows},
                        {"verify_ms", c.verify_ms},
                        {"lm_head_share", c.lm_head_share},
                        {"draft_ms", c.draft_ms},
                        {"pick_ms", c.pick_ms},
                        {"sustained_factor", c.sustained_factor},
                        {"cycle_factor", c.cycle_factor},
                        {"append_ms", c.append_ms},
                        {"prefill_tok_s", c.prefill_tok_s},
                        {"ttft_ms", c.ttft_ms},
                        {"build_s", c.build_s},
                        {"measure_s", c.measure_s}};
  }
  const Recommendation rec = Recommend(plan);
  j["recommendation"] = {{"dflash", rec.dflash}, {"verify_rows", rec.verify_rows}, {"format", rec.format},
                         {"draft_window", rec.draft_window}, {"why", rec.why}};
  j["prediction"] = {{"label", plan.calibration ? "calibrated (measured on this machine)" : "uncalibrated (analytic)"},
                     {"plain_tok_s", p.plain_tok_s},
                     {"dflash_tok_s", p.adaptive_tok_s},
                     {"dflash_full_block_tok_s", p.full_block_tok_s},
                     {"speedup", p.adaptive_tok_s / p.plain_tok_s},
                     {"verify_rows", p.best_rows},
                     {"per_depth_acceptance", plan.accept_at_depth.front()},
                     {"tau", plan.tau},
                     {"tau_source", plan.tau_source},
                     {"step_ms", plan.costs.step_ms},
                     {"draft_ms", plan.costs.draft_ms},
                     {"verify_slope", plan.costs.slope},
                     {"pick_ms", plan.costs.pick_ms},
                     {"append_ms", plan.costs.append_ms},
                     {"ttft_ms", plan.calibration ? Json(plan.calibration->ttft_ms) : Json(nullptr)},
                     {"assumptions", plan.calibration ? CalibratedAssumptions(*plan.calibration) : AnalyticAssumptions()}};
  return j;
}

namespace {

void MachineSection(std::ostringstream& o, const PlanRequest& r) {
  o << "## Machine" << (r.label.empty() ? "" : ": " + r.label) << "\n\n"
    << "- CPU: " << r.cpu << " (" << r.hardware_threads << " hardware threads; planning for " << r.threads << ")\n"
    << "- SIMD: " << r.simd_target << "\n"
    << "- memory: " << Fixed(r.memory_gb, 1) << " GiB (" << r.memory_source << ")\n"
    << "- read bandwidth: " << Fixed(r.rates.bandwidth_gbs, 1) << " GB/s (" << r.bandwidth_source << "); compute peak "
    << Fixed(r.rates.f32_gmacs, 0) << " GMAC/s f32, " << Fixed(r.rates.int8_gmacs, 0) << " GMAC/s int8\n\n";
}

void PairsSection(std::ostringstream& o, const Plan& plan) {
  o << "## Pairs at context " << plan.request.context << "\n\n"
    << "| pair | format | runs today | shapes verified | weights GiB | draft GiB | KV GiB (per 1k) | state GiB | total GiB | fits |\n"
    << "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n";
  for (const Candidate& c : plan.candidates) {
    const MemoryNeed& m = c.memory;
    o << "| " << c.pair->name << " | " << c.format << " | " << (c.pair->runs_today ? "yes" : "no") << " | "
      << (c.pair->target.verified && c.pair->draft.verified ? "yes" : c.pair->target.verified ? "target only" : "no") << " | "
      << Fixed(GiB(m.target_weights), 2) << " | " << Fixed(GiB(m.draft_weights), 2) << " | " << Fixed(GiB(m.kv_cache), 2)
      << " (" << Fixed(GiB(m.kv_per_1k), 3) << ") | " << Fixed(GiB(m.recurrent_state), 3) << " | "
      << Fixed(GiB(m.total()), 2) << " | " << (c.fits ? "yes" : "no") << " |\n";
  }
  o << "\nPairs that do not run yet:\n\n";
  const PairEntry* last = nullptr;
  for (const Candidate& c : plan.candidates) {
    if (c.pair == last || c.pair->runs_today) continue;
    last = c.pair;
    o << "- " << c.pair->name << ": " << c.pair->why_not << "\n";
  }
  o << "\n";
}

void PredictionSection(std::ostringstream& o, const Plan& plan) {
  const Prediction& p = plan.prediction;
  o << (plan.calibration ? "## Prediction: calibrated (measured on this machine)\n\n" : "## Prediction: uncalibrated (analytic)\n\n")
    << "- plain decoding: " << Fixed(p.plain_tok_s, 1) << " tok/s (step " << Fixed(plan.costs.step_ms, 1) << " ms)\n"
    << "- DFlash, adaptive policy: " << Fixed(p.adaptive_tok_s, 1) << " tok/s ("
    << (p.best_rows > 1 ? "verifying " + std::to_string(p.best_rows) + " rows" : "decodes plainly: no verify length pays")
    << "; " << Fixed(p.adaptive_tok_s / p.plain_tok_s, 2) << "x)\n"
    << "- DFlash, full block every cycle: " << Fixed(p.full_block_tok_s, 1) << " tok/s\n"
    << "- tau " << Fixed(plan.tau, 2) << ": " << plan.tau_source << "; per-depth acceptance " << Fixed(plan.accept_at_depth.front(), 3) << "\n"
    << "- costs: draft pass " << Fixed(plan.costs.draft_ms, 1) << " ms, verify slope " << Fixed(plan.costs.slope, 3)
    << " (t_verify(k) = t_step x (1 + slope x (k - 1))); the loop's own work: a pick " << Fixed(plan.costs.pick_ms, 3)
    << " ms per logits row read, a draft-context append " << Fixed(plan.costs.append_ms, 3) << " ms per step or cycle\n";
  if (plan.calibration) {
    const Calibration& c = *plan.calibration;
    o << "- TTFT for a " << c.context << "-token prompt: " << Fixed(c.ttft_ms / 1e3, 1) << " s (prefill "
      << Fixed(c.prefill_tok_s, 1) << " tok/s)\n\n"
      << "Measured here on synthetic " << c.format << " weights of the pair's shapes, KV " << c.kv_type << ", context "
      << c.context << " (built in " << Fixed(c.build_s, 1) << " s, timed in " << Fixed(c.measure_s, 1) << " s):\n\n"
      << "| rows | verify ms | t(rows)/t(1) | LM head share |\n| ---: | ---: | ---: | ---: |\n";
    for (size_t i = 0; i < c.rows.size(); ++i) {
      o << "| " << c.rows[i] << " | " << Fixed(c.verify_ms[i], 2) << " | " << Fixed(c.verify_ms[i] / c.verify_ms[0], 2)
        << " | " << Fixed(100 * c.lm_head_share[i], 1) << "% |\n";
    }
    o << "\nAssumptions:\n\n";
    for (const std::string& a : CalibratedAssumptions(c)) o << "- " << a << "\n";
  } else {
    o << "\nAssumptions (none of these numbers was measured on the pair itself; `--calibrate` measures them, the "
         "bench command measures the pair):\n\n";
    for (const std::string& a : AnalyticAssumptions()) o << "- " << a << "\n";
  }
  const Recommendation r = Recommend(plan);
  o << "\n## Recommendation\n\n"
    << "- DFlash " << (r.dflash ? "on" : "off") << ": " << r.why << "\n"
    << "- verify length: " << (r.dflash ? std::to_string(r.verify_rows) + " rows (--spec-policy adaptive finds it by itself)" : std::string("n/a")) << "\n"
    << "- format: " << r.format << "\n"
    << "- draft window: " << r.draft_window << "\n\n";
}

}  // namespace

std::string PlanMarkdown(const Plan& plan) {
  std::ostringstream o;
  o << "# dflash plan\n\n";
  MachineSection(o, plan.request);
  PairsSection(o, plan);
  o << "## Choice\n\n" << plan.reason << ".\n\n";
  if (plan.choice < 0) return o.str();
  o << "## Setup (run these yourself; nothing was downloaded)\n\n```sh\n";
  for (const std::string& s : plan.setup) o << s << "\n";
  o << "```\n\nNo conversion step: dflash reads the safetensors directly"
    << " and quantises at load time where a --target-quant is given.\n\n"
    << "## Run and benchmark\n\n```sh\n" << plan.run << "\n" << plan.bench << "\n```\n\n";
  PredictionSection(o, plan);
  return o.str();
}

}  // namespace dflash::plan
