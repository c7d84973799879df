// `dflash plan`: which published pair fits this machine, in which format, what to download and
// run, and what the cost model (plan/cost_model.h) predicts for it. Renders as Markdown or as
// JSON with the stable schema of docs/plan.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/json_file.h"
#include "plan/analytic_costs.h"
#include "plan/calibrate.h"
#include "plan/cost_model.h"
#include "plan/memory_model.h"
#include "plan/registry.h"

namespace dflash::plan {

struct PlanRequest {
  // The machine (detected or overridden; *_source says which).
  std::string cpu, simd_target, label;
  int hardware_threads = 0, threads = 0;
  double memory_gb = 0;
  std::string memory_source;  // "detected" | "--memory-gb"
  MachineRates rates;
  std::string bandwidth_source;  // "measured" | "--bandwidth-gbs"
  // What the user asks for.
  int64_t context = 4096;
  std::string task = "chat";  // math | code | chat | agent
  std::string pair;           // "" = choose
};

struct Candidate {
  const PairEntry* pair = nullptr;
  std::string format;
  MemoryNeed memory;
  bool fits = false;
};

struct Plan {
  PlanRequest request;
  std::string registry_path;
  std::vector<Candidate> candidates;  // every pair x format, registry order
  int choice = -1;                    // index into candidates; -1: nothing fits or runs
  std::string reason;                 // why this choice (or why none)
  std::vector<std::string> setup;     // commands for the user to run, never run here
  std::string run, bench;
  // The prediction for the choice (valid when choice >= 0).
  StepCosts costs;
  Prediction prediction;
  double tau = 0;
  std::string tau_source;  // how tau was chosen, in words
  std::vector<double> accept_at_depth;  // tau as a geometric per-depth curve
  std::optional<Calibration> calibration;  // --calibrate: costs measured here replace the analytic ones
};

// Formats the planner considers for a pair: load-time q8_0 and q4_k from the Hugging Face
// weights, bf16 as published, and mlx-4bit where the registry lists an mlx-community copy.
std::vector<std::string> PlanFormats(const PairEntry& p);

// Throws Error for an unknown --pair or --task, or a context < 1.
Plan MakePlan(const Registry& registry, const PlanRequest& request);

// --calibrate: measures the choice's costs on this machine (plan/calibrate.h) and predicts from
// them instead of the analytic estimate. Throws Error when nothing was chosen.
void CalibratePlan(Plan& plan, ThreadPool& pool, const CalibrationOptions& options = {});

// DFlash on or off, verify length, format and draft window, from the prediction.
struct Recommendation {
  bool dflash = false;
  int verify_rows = 1;
  std::string format, draft_window, why;
};
Recommendation Recommend(const Plan& plan);

Json PlanJson(const Plan& plan);
std::string PlanMarkdown(const Plan& plan);

}  // namespace dflash::plan
