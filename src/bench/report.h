// `dflash bench --report`: the decision report for one model pair on this machine. Plain
// decoding against DFlash on the same prompts, with peak memory, TTFT, decode tok/s both ways,
// tau and acceptance per draft depth, the cost model's prediction (plan/cost_model.h) from
// costs measured in the same run beside the measurement, and a recommendation. Markdown with
// four required sections (throughput, memory, baseline comparison, recommendation), JSON
// (schema in docs/plan.md) and three SVG charts next to the Markdown.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/machine.h"
#include "io/json_file.h"
#include "plan/cost_model.h"
#include "plan/memory_model.h"

namespace dflash {

struct ReportPrompt {
  std::string name;
  int prompt_tokens = 0;
  double plain_tok_s = 0, dflash_tok_s = 0;  // decode, median of the repeats
  double speedup = 0;  // plain ms per token / DFlash ms per token over all repeats
  double plain_ttft_ms = 0, dflash_ttft_ms = 0;  // median of the repeats
  double tau = 0;
  bool identical = true;
};

struct BenchReport {
  MachineInfo machine;
  int threads = 0;
  std::string model, draft, target_quant, kv_type, policy;
  int new_tokens = 0, block = 0, warmup = 0, repeats = 0;
  // "measured (the draft's own proposals)" or "scripted (profile NAME)": acceptance_source
  // says where a scripted profile's figures come from.
  std::string acceptance, acceptance_source;
  std::vector<ReportPrompt> prompts;
  double plain_tok_s = 0, dflash_tok_s = 0;  // decode, all prompts' tokens over all their time
  double plain_ttft_ms = 0, dflash_ttft_ms = 0;  // mean over prompts
  bool sampling_identical = true;  // the sampling promises identical tokens (greedy, reproducible)
  bool identical = true;
  double tau = 0;
  std::vector<int> accept_hist;         // [k] = cycles committing k tokens
  std::vector<double> accept_at_depth;  // measured, from accept_hist
  double peak_rss_mib = 0;
  plan::MemoryNeed memory_estimate;  // plan::EstimateRunMemory for this run's files and options
  int64_t cache_bytes = 0;  // one sequence's KV cache and draft context at --ctx
  int context = 0;
  // The target's verify cost t(rows)/t(1) at curve_context, measured in this run.
  int curve_context = 0;
  std::vector<int> curve_rows;
  std::vector<double> curve_ratios;
  double curve_step_ms = 0;  // t(1) there: the mean of consecutive 1-row passes (plan/loop_costs.h)
  double sustained_factor = 1;  // that over the curve's median 1-row pass
  double draft_ms = 0;       // mean draft pass of the DFlash runs, its picks of the drafts included
  double drafts_per_cycle = 0;
  double pick_ms = 0, append_ms = 0;  // the loop's own work (plan/loop_costs.h), measured in this run
  plan::StepCosts costs;        // t(1) and slope of that curve, the draft pass, the loop's work
  plan::Prediction prediction;  // the cost model on those costs and accept_at_depth
  // The recommendation.
  bool use_dflash = false;
  int verify_rows = 1;
  std::string policy_advice, why;
};

// The acceptance of draft depth d = 1..block-1 given the drafts before it were accepted, from an
// accept histogram ([k] = cycles committing k tokens); stops at the first depth no cycle reached.
std::vector<double> AcceptanceAtDepth(const std::vector<int>& accept_hist);

// Fills costs, prediction and the recommendation from the measured fields.
void Analyse(BenchReport& report);

Json ReportJson(const BenchReport& report);
// `chart_stem`: the charts' file names without "-cost.svg" etc., relative to the Markdown.
std::string ReportMarkdown(const BenchReport& report, const std::string& chart_stem);
// Writes the Markdown to md_path, the charts next to it (STEM-cost.svg, STEM-acceptance.svg,
// STEM-throughput.svg) and the JSON to json_path when not empty. Returns the files written.
std::vector<std::string> WriteReport(const BenchReport& report, const std::string& md_path, const std::string& json_path);

}  // namespace dflash
