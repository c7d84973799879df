// dflash plan: which published pair fits this machine, the commands to set it up and run it,
// and what DFlash should give here, before anything is downloaded (src/plan/).
#include <cstdio>
#include <fstream>

#include "args.h"
#include "bench/bandwidth.h"
#include "bench/compute_peak.h"
#include "bench/machine.h"
#include "commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "plan/plan.h"

namespace dflash::app {

namespace {

// Bandwidth probe buffer: well past any last-level cache, quick to stream a few times.
constexpr int64_t kProbeBytes = int64_t{512} << 20;
constexpr int kProbePasses = 3;

void WriteOutput(const std::string& text, const std::string& path) {
  if (path.empty()) {
    std::fputs(text.c_str(), stdout);
    return;
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) Fail(path, ": cannot write");
}

}  // namespace

int Plan(int argc, char** argv) {
  double memory_gb = 0, bandwidth_gbs = 0;
  int threads = 0, context = 4096;
  bool calibrate = false;
  plan::CalibrationOptions calibration;
  std::string label, task = "chat", pair, format = "md", output, registry_path;
  Args args("plan",
            "Which published DFlash pair fits this machine, in which format, the commands to download and run it\n"
            "(printed, never run), and a prediction of plain and DFlash tok/s and a recommendation: analytic\n"
            "(uncalibrated), or with --calibrate from this machine's costs measured on synthetic weights of the\n"
            "chosen pair's shapes (nothing downloaded).");
  args.Option("--memory-gb", &memory_gb, "N", "plan for N GiB of memory (default: this machine's MemTotal)");
  args.Option("-t,--threads", &threads, "N", "threads to plan and measure with (0 = one per physical core)");
  args.Option("--machine-label", &label, "L", "a name for this machine in the report");
  args.Option("-c,--context", &context, "N", "context length the pair must hold (KV cache positions)");
  args.Option("--task", &task, "code|math|chat|agent", "which reported acceptance (tau) to predict with");
  args.Option("--pair", &pair, "NAME", "plan for this registry pair only (see data/pairs.json)");
  args.Option("--format", &format, "md|json", "report format (json: the schema of docs/plan.md)");
  args.Option("-o,--output", &output, "FILE", "write the report to FILE instead of stdout");
  args.Option("--bandwidth-gbs", &bandwidth_gbs, "N", "memory read bandwidth to assume instead of measuring it");
  args.Option("--registry", &registry_path, "FILE", "pairs registry (default: data/pairs.json of this checkout)");
  args.Flag("--calibrate", &calibrate,
            "measure the chosen pair's decode, verify, draft and prefill costs here on synthetic weights");
  args.Option("--calibrate-layers", &calibration.target_layers, "N",
              "--calibrate: target layers to build (the rest extrapolated per layer)");
  args.Option("--calibrate-draft-layers", &calibration.draft_layers, "N", "--calibrate: draft layers to build");
  args.Option("--calibrate-repeats", &calibration.repeats, "N", "--calibrate: timed passes per point (median)");
  if (!args.Parse(argc, argv)) return 0;
  if (calibration.target_layers < 1 || calibration.draft_layers < 1 || calibration.repeats < 1) {
    Fail("--calibrate-layers, --calibrate-draft-layers and --calibrate-repeats must be at least 1");
  }
  if (format != "md" && format != "json") Fail("--format must be md or json, got '", format, "'");
  if (args.Given("--memory-gb") && !(memory_gb > 0)) Fail("--memory-gb must be positive, got ", memory_gb);
  if (args.Given("--bandwidth-gbs") && !(bandwidth_gbs > 0)) Fail("--bandwidth-gbs must be positive, got ", bandwidth_gbs);

  const plan::Registry registry = plan::LoadRegistry(registry_path.empty() ? plan::DefaultRegistryPath() : registry_path);
  const MachineInfo machine = DescribeMachine();
  ThreadPool pool(threads);
  plan::PlanRequest r;
  r.cpu = machine.cpu;
  r.simd_target = machine.simd_target;
  r.label = label;
  r.hardware_threads = machine.hardware_threads;
  r.threads = pool.size();
  r.memory_gb = args.Given("--memory-gb") ? memory_gb : machine.memory_gb;
  r.memory_source = args.Given("--memory-gb") ? "--memory-gb" : "detected";
  r.rates.bandwidth_gbs = args.Given("--bandwidth-gbs") ? bandwidth_gbs
                                                         : MeasureReadBandwidth(pool, kProbeBytes, kProbePasses).median_gbs;
  r.bandwidth_source = args.Given("--bandwidth-gbs") ? "--bandwidth-gbs" : "measured";
  const ComputePeak peak = MeasureComputePeak(pool);
  r.rates.f32_gmacs = peak.f32_gmacs;
  r.rates.int8_gmacs = peak.int8_gmacs;
  r.context = context;
  r.task = task;
  r.pair = pair;
  plan::Plan p = plan::MakePlan(registry, r);
  if (calibrate) plan::CalibratePlan(p, pool, calibration);
  WriteOutput(format == "json" ? plan::PlanJson(p).dump(2) + "\n" : plan::PlanMarkdown(p), output);
  return 0;
}

}  // namespace dflash::app
