#include "bench/report.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/svg_chart.h"
#include "core/error.h"

namespace dflash {

namespace {

// A measured gain below this is within run-to-run noise on a busy machine: not worth the
// draft's memory and the verify's variance.
constexpr double kWorthwhileSpeedup = 1.05;

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) Fail(path, ": cannot write");
}

std::string CostChart(const BenchReport& r) {
  std::vector<double> x(r.curve_rows.begin(), r.curve_rows.end()), model;
  for (int rows : r.curve_rows) model.push_back(plan::VerifyMs(r.costs, rows) / r.costs.step_ms);
  return SvgLineChart({"Verify cost at context " + std::to_string(r.curve_context), "rows in the target pass",
                       "t(rows) / t(1)"},
                      x, {{"measured", r.curve_ratios}, {"cost model fit", model}});
}

std::string AcceptanceChart(const BenchReport& r) {
  std::vector<double> depth;
  for (size_t d = 1; d <= r.accept_at_depth.size(); ++d) depth.push_back(double(d));
  if (depth.empty()) depth.push_back(1);
  std::vector<double> a = r.accept_at_depth;
  if (a.empty()) a.push_back(0);
  return SvgLineChart({"Acceptance per draft depth (" + r.acceptance + ")", "draft depth d",
                       "P(draft d accepted | 1..d-1 were)"},
                      depth, {{"acceptance", a}});
}

std::string ThroughputChart(const BenchReport& r) {
  std::vector<std::string> names;
  ChartSeries plain{"plain", {}}, dflash{"DFlash", {}};
  for (const ReportPrompt& p : r.prompts) {
    names.push_back(p.name);
    plain.values.push_back(p.plain_tok_s);
    dflash.values.push_back(p.dflash_tok_s);
  }
  names.push_back("all");
  plain.values.push_back(r.plain_tok_s);
  dflash.values.push_back(r.dflash_tok_s);
  return SvgBarChart({"Decode speed, plain vs DFlash", "prompt", "tokens / s"}, names, {plain, dflash});
}

}  // namespace

std::vector<double> AcceptanceAtDepth(const std::vector<int>& hist) {
  // A cycle committing k tokens accepted drafts 1..k-1: depth d was reached by the cycles
  // committing at least d tokens and accepted by those committing at least d + 1. A block of
  // hist.size() - 1 rows has one draft fewer.
  std::vector<double> at_least(hist.size() + 1, 0), a;
  for (size_t k = hist.size(); k-- > 0;) at_least[k] = at_least[k + 1] + hist[k];
  for (size_t d = 1; d + 1 < hist.size() && at_least[d] > 0; ++d) a.push_back(at_least[d + 1] / at_least[d]);
  return a;
}

void Analyse(BenchReport& r) {
  if (r.curve_rows.size() != r.curve_ratios.size() || r.curve_rows.empty()) Fail("internal: report without a verify cost curve");
  // The runs' draft time includes picking the drafts, which the cost model counts as picks.
  const double draft_pass_ms = std::max(0.0, r.draft_ms - r.pick_ms * r.drafts_per_cycle);
  // The measured curve already holds a MoE target's expert growth: fitted as a line, no expert term.
  r.costs = {r.curve_step_ms, draft_pass_ms, plan::FitVerifySlope(r.curve_rows, r.curve_ratios), r.pick_ms, r.append_ms, {}};
  const std::vector<double> curve = r.accept_at_depth.empty() ? std::vector<double>{0.0} : r.accept_at_depth;
  r.prediction = plan::Predict(r.costs, curve, std::max(2, r.block));
  const double measured = Ratio(r.dflash_tok_s, r.plain_tok_s);
  const double predicted = Ratio(r.prediction.adaptive_tok_s, r.prediction.plain_tok_s);
  r.verify_rows = r.prediction.best_rows;
  if (measured >= kWorthwhileSpeedup) {
    r.use_dflash = true;
    r.why = "DFlash measured " + Fixed(measured, 2) + "x plain decoding on these prompts";
  } else if (predicted >= kWorthwhileSpeedup) {
    r.use_dflash = true;
    r.why = "DFlash (policy " + r.policy + ") measured " + Fixed(measured, 2) +
            "x, but the cost model on this run's costs and acceptance predicts " + Fixed(predicted, 2) + "x verifying " +
            std::to_string(r.verify_rows) + " rows, which the adaptive policy chooses by itself";
  } else {
    r.use_dflash = false;
    r.why = "DFlash measured " + Fixed(measured, 2) + "x and the cost model predicts at best " + Fixed(predicted, 2) +
            "x at any verify length: the draft's acceptance does not pay for its passes and verifies here";
  }
  r.policy_advice = r.use_dflash ? "--spec-policy adaptive (it verifies about " + std::to_string(r.verify_rows) +
                                       " rows at this context and falls back to plain decoding where DFlash loses)"
                                 : "run without -d (plain decoding), or keep --spec-policy adaptive, which decodes "
                                   "plainly while DFlash loses";
}

Json ReportJson(const BenchReport& r) {
  Json prompts = Json::array();
  for (const ReportPrompt& p : r.prompts) {
    Json jp{{"name", p.name}, {"prompt_tokens", p.prompt_tokens}, {"plain_decode_tok_s", p.plain_tok_s},
            {"dflash_decode_tok_s", p.dflash_tok_s}, {"speedup", p.speedup},
            {"plain_ttft_ms", p.plain_ttft_ms}, {"dflash_ttft_ms", p.dflash_ttft_ms}, {"tau", p.tau}};
    jp["identical"] = r.sampling_identical ? Json(p.identical) : Json(nullptr);
    prompts.push_back(jp);
  }
  Json curve = Json::array();
  for (size_t i = 0; i < r.curve_rows.size(); ++i) {
    curve.push_back({{"rows", r.curve_rows[i]}, {"ratio", r.curve_ratios[i]},
                     {"model_ratio", plan::VerifyMs(r.costs, r.curve_rows[i]) / r.costs.step_ms}});
  }
  const plan::Prediction& p = r.prediction;
  const double predicted_dflash = r.policy == "always" ? p.full_block_tok_s : p.adaptive_tok_s;
  Json j;
  j["schema"] = 1;
  j["machine"] = MachineJson(r.machine, r.threads);
  j["config"] = {{"model", r.model}, {"draft", r.draft}, {"target_quant", r.target_quant}, {"kv_type", r.kv_type},
                 {"spec_policy", r.policy}, {"new_tokens", r.new_tokens}, {"block_size", r.block},
                 {"context", r.context}, {"warmup", r.warmup}, {"repeats", r.repeats}};
  j["acceptance"] = r.acceptance;
  j["acceptance_source"] = r.acceptance_source;
  j["throughput"] = {{"plain_decode_tok_s", r.plain_tok_s}, {"dflash_decode_tok_s", r.dflash_tok_s},
                     {"speedup", Ratio(r.dflash_tok_s, r.plain_tok_s)}, {"plain_ttft_ms", r.plain_ttft_ms},
                     {"dflash_ttft_ms", r.dflash_ttft_ms}, {"tau", r.tau}, {"accept_hist", r.accept_hist},
                     {"accept_at_depth", r.accept_at_depth},
                     {"identical", r.sampling_identical ? Json(r.identical) : Json(nullptr)}, {"prompts", prompts}};
  const plan::MemoryNeed& m = r.memory_estimate;
  j["memory"] = {{"peak_rss_mib", r.peak_rss_mib},
                 {"cache_bytes", r.cache_bytes},
                 {"estimate", {{"target_weights_bytes", m.target_weights}, {"draft_weights_bytes", m.draft_weights},
                               {"kv_cache_bytes", m.kv_cache}, {"draft_cache_bytes", m.draft_cache},
                               {"recurrent_state_bytes", m.recurrent_state}, {"buffers_bytes", m.buffers},
                               {"load_files_bytes", m.load_files}, {"total_bytes", m.total()}}},
                 {"estimate_error", Ratio(double(m.total()) / (1 << 20), r.peak_rss_mib) - 1}};
  j["cost_model"] = {{"curve_context", r.curve_context}, {"verify_cost", curve}, {"step_ms", r.costs.step_ms},
                     {"draft_ms", r.costs.draft_ms}, {"verify_slope", r.costs.slope}, {"pick_ms", r.costs.pick_ms},
                     {"sustained_factor", r.sustained_factor},
                     {"append_ms", r.costs.append_ms},
                     {"predicted_plain_tok_s", p.plain_tok_s}, {"predicted_dflash_tok_s", predicted_dflash},
                     {"predicted_adaptive_tok_s", p.adaptive_tok_s}, {"predicted_full_block_tok_s", p.full_block_tok_s},
                     {"plain_error", Ratio(p.plain_tok_s, r.plain_tok_s) - 1},
                     {"dflash_error", Ratio(predicted_dflash, r.dflash_tok_s) - 1}};
  j["recommendation"] = {{"dflash", r.use_dflash}, {"verify_rows", r.verify_rows}, {"policy", r.policy_advice},
                         {"why", r.why}};
  return j;
}

std::string ReportMarkdown(const BenchReport& r, const std::string& stem) {
  const plan::Prediction& p = r.prediction;
  const double predicted_dflash = r.policy == "always" ? p.full_block_tok_s : p.adaptive_tok_s;
  std::ostringstream o;
  o << "# dflash bench report\n\n"
    << "- machine: " << r.machine.cpu << ", " << r.machine.simd_target << ", " << r.threads << " threads, "
    << Fixed(r.machine.memory_gb, 1) << " GiB\n"
    << "- target `" << r.model << "` (" << r.target_quant << "), draft `" << r.draft << "`, KV " << r.kv_type << "\n"
    << "- " << r.prompts.size() << " prompts, " << r.new_tokens << " new tokens each, block " << r.block << ", policy "
    << r.policy << ", " << r.warmup << " warm-up + " << r.repeats << " repeats (medians)\n"
    << "- acceptance: **" << r.acceptance << "**" << (r.acceptance_source.empty() ? "" : " (" + r.acceptance_source + ")")
    << "\n\n";

  o << "## Throughput\n\n"
    << "| prompt | tokens | plain tok/s | DFlash tok/s | speedup | plain TTFT ms | DFlash TTFT ms | tau | identical |\n"
    << "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
  for (const ReportPrompt& q : r.prompts) {
    o << "| " << q.name << " | " << q.prompt_tokens << " | " << Fixed(q.plain_tok_s, 2) << " | " << Fixed(q.dflash_tok_s, 2)
      << " | " << Fixed(q.speedup, 2) << "x | " << Fixed(q.plain_ttft_ms, 1) << " | "
      << Fixed(q.dflash_ttft_ms, 1) << " | " << Fixed(q.tau, 2) << " | "
      << (!r.sampling_identical ? "n/a" : q.identical ? "yes" : "NO") << " |\n";
  }
  o << "| **all** | | " << Fixed(r.plain_tok_s, 2) << " | " << Fixed(r.dflash_tok_s, 2) << " | "
    << Fixed(Ratio(r.dflash_tok_s, r.plain_tok_s), 2) << "x | " << Fixed(r.plain_ttft_ms, 1) << " | "
    << Fixed(r.dflash_ttft_ms, 1) << " | " << Fixed(r.tau, 2) << " | |\n\n"
    << "Acceptance per draft depth (" << r.acceptance << "):";
  for (double a : r.accept_at_depth) o << " " << Fixed(a, 2);
  o << "\n\n![decode speed](" << stem << "-throughput.svg)\n\n![acceptance per depth](" << stem
    << "-acceptance.svg)\n\n";

  const plan::MemoryNeed& m = r.memory_estimate;
  const auto mib = [](int64_t bytes) { return Fixed(double(bytes) / (1 << 20), 1); };
  o << "## Memory\n\n"
    << "| | MiB |\n| --- | ---: |\n"
    << "| measured peak RSS (both models loaded, plain and DFlash runs) | " << Fixed(r.peak_rss_mib, 0) << " |\n"
    << "| estimate (`src/plan/memory_model.h`, from headers and shapes) | " << mib(m.total()) << " |\n"
    << "| - target weights | " << mib(m.target_weights) << " |\n| - draft weights | " << mib(m.draft_weights) << " |\n"
    << "| - the largest stored matrix, read while quantising at load | " << mib(m.load_files) << " |\n"
    << "| - KV cache at --ctx " << r.context << " | " << mib(m.kv_cache) << " |\n"
    << "| - draft context cache | " << mib(m.draft_cache) << " |\n"
    << "| - buffers and runtime | " << mib(m.buffers) << " |\n\n"
    << "The estimate is " << Fixed(100 * (Ratio(double(m.total()) / (1 << 20), r.peak_rss_mib) - 1), 1)
    << "% off the measured peak. One sequence's KV cache and draft context as allocated: "
    << Fixed(double(r.cache_bytes) / (1 << 20), 1) << " MiB.\n\n";

  o << "## Baseline comparison\n\n"
    << "Plain decoding is the baseline. The cost model (`src/plan/cost_model.h`, the adaptive policy's own) is run "
    << "on costs measured in this run: a decode step t(1) = " << Fixed(r.costs.step_ms, 2) << " ms (the mean of "
    << "consecutive steps, " << Fixed(r.sustained_factor, 2) << "x the median single pass: the share of the machine "
    << "this run got) and the verify slope " << Fixed(r.costs.slope, 3) << " from the verify-cost curve at context " << r.curve_context
    << ", the draft pass " << Fixed(r.costs.draft_ms, 2) << " ms from the DFlash runs, the loop's own work (a pick "
    << Fixed(r.costs.pick_ms, 3) << " ms per logits row read, a draft-context append " << Fixed(r.costs.append_ms, 3)
    << " ms per step or cycle) and the acceptance per depth above.\n\n"
    << "| | measured tok/s | predicted tok/s | prediction error |\n| --- | ---: | ---: | ---: |\n"
    << "| plain | " << Fixed(r.plain_tok_s, 2) << " | " << Fixed(p.plain_tok_s, 2) << " | "
    << Fixed(100 * (Ratio(p.plain_tok_s, r.plain_tok_s) - 1), 1) << "% |\n"
    << "| DFlash (" << r.policy << ") | " << Fixed(r.dflash_tok_s, 2) << " | " << Fixed(predicted_dflash, 2) << " | "
    << Fixed(100 * (Ratio(predicted_dflash, r.dflash_tok_s) - 1), 1) << "% |\n"
    << "| DFlash, best verify length (" << p.best_rows << " rows) | | " << Fixed(p.adaptive_tok_s, 2) << " | |\n\n"
    << "| rows | t(rows)/t(1) measured | cost model |\n| ---: | ---: | ---: |\n";
  for (size_t i = 0; i < r.curve_rows.size(); ++i) {
    o << "| " << r.curve_rows[i] << " | " << Fixed(r.curve_ratios[i], 2) << " | "
      << Fixed(plan::VerifyMs(r.costs, r.curve_rows[i]) / r.costs.step_ms, 2) << " |\n";
  }
  o << "\n![verify cost](" << stem << "-cost.svg)\n\n";

  o << "## Recommendation\n\n"
    << "- **DFlash " << (r.use_dflash ? "on" : "off") << "**: " << r.why << ".\n"
    << "- verify length: " << (r.use_dflash ? std::to_string(r.verify_rows) + " rows" : std::string("n/a")) << "; "
    << r.policy_advice << ".\n";
  if (r.acceptance.rfind("scripted", 0) == 0) {
    o << "- The acceptance was scripted, not the draft's own: this says what DFlash would give here if the draft "
         "accepted as the profile says; run without --acceptance on your prompts for the real figure.\n";
  }
  return o.str();
}

std::vector<std::string> WriteReport(const BenchReport& r, const std::string& md_path, const std::string& json_path) {
  namespace fs = std::filesystem;
  const fs::path md(md_path);
  const std::string stem = md.stem().string();
  const fs::path dir = md.parent_path();
  std::vector<std::string> written;
  auto put = [&](const fs::path& path, const std::string& text) {
    WriteFile(path.string(), text);
    written.push_back(path.string());
  };
  put(md, ReportMarkdown(r, stem));
  put(dir / (stem + "-cost.svg"), CostChart(r));
  put(dir / (stem + "-acceptance.svg"), AcceptanceChart(r));
  put(dir / (stem + "-throughput.svg"), ThroughputChart(r));
  if (!json_path.empty()) put(json_path, ReportJson(r).dump(2) + "\n");
  return written;
}

}  // namespace dflash
