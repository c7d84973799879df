// dflash doctor: this machine's facts, the defaults that will apply, and whether a model
// (and draft) will load and how much memory it needs, without loading any weights.
#include <cstdio>
#include <optional>

#include "args.h"
#include "bench/bandwidth.h"
#include "bench/machine.h"
#include "commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/ops.h"
#include "plan/inspect.h"
#include "plan/memory_model.h"

namespace dflash::app {

namespace {

constexpr int64_t kProbeBytes = int64_t{256} << 20;
constexpr int kProbePasses = 3;

double MiB(int64_t bytes) { return double(bytes) / double(1 << 20); }
double GiB(int64_t bytes) { return double(bytes) / double(int64_t{1} << 30); }

void PrintMachine(const MachineInfo& m, ThreadPool& pool) {
  const Bandwidth bw = MeasureReadBandwidth(pool, kProbeBytes, kProbePasses);
  std::printf("machine\n  cpu: %s\n  SIMD path: %s\n  threads: %d (of %d hardware threads)\n  memory: %.1f GiB\n"
              "  read bandwidth: %.1f GB/s (median of %d passes over %.0f MiB)\n",
              m.cpu.c_str(), m.simd_target.c_str(), pool.size(), m.hardware_threads, m.memory_gb, bw.median_gbs,
              bw.passes, MiB(bw.bytes));
}

void PrintDefaults(int context) {
  std::printf("defaults\n  context: %d positions (-c)\n  KV cache: %s (--kv-type auto)\n  prefill chunk: 64 rows\n"
              "  speculation: adaptive policy, block = the draft's block_size\n  weights: as stored (no --target-quant)\n",
              context, ops::Bf16DotActive() ? "bf16" : "f16");
}

void PrintFiles(const char* role, const plan::ModelFiles& f) {
  std::printf("%s %s\n  format: %s, architecture '%s'\n", role, f.path.c_str(), f.kind == "gguf" ? "GGUF" : "Hugging Face",
              f.architecture.c_str());
  std::printf("  weights: %d tensors, %.1f MiB (", f.tensors, MiB(f.weight_bytes));
  const char* sep = "";
  for (const auto& [dtype, bytes] : f.dtype_bytes) {
    std::printf("%s%s %.1f MiB", sep, dtype.c_str(), MiB(bytes));
    sep = ", ";
  }
  std::printf(")\n  loads: %s\n", f.loads ? "yes" : ("no: " + f.why_not).c_str());
}

// The published draft for a target of this shape, from the registry (when one is readable).
std::optional<plan::ModelShape> SuggestDraft(const plan::ModelShape& target, const std::string& registry_path) {
  const plan::Registry registry = plan::LoadRegistry(registry_path.empty() ? plan::DefaultRegistryPath() : registry_path);
  const plan::PairEntry* p = plan::PairForTarget(registry, target);
  if (!p) {
    std::printf("draft: none given, and no registry pair has this target's shape\n");
    return std::nullopt;
  }
  std::printf("draft: none given; the published draft for this shape is %s (registry pair '%s'):\n"
              "  hf download %s --local-dir models/%s\n",
              p->draft.id.c_str(), p->name.c_str(), p->draft.id.c_str(), p->draft.id.substr(p->draft.id.find('/') + 1).c_str());
  return p->draft.shape;
}

// Weights as stored, plus the KV cache, draft context and buffers the memory model adds.
void PrintMemory(const plan::ModelFiles& target, const plan::ModelFiles* draft, const std::optional<plan::ModelShape>& draft_shape,
                 int context, double machine_gb) {
  const plan::ModelShape ts = plan::ShapeOf(*target.target);
  const int kv_bytes = 2;
  const plan::MemoryNeed m = plan::EstimateRunMemory(ts, draft_shape ? &*draft_shape : nullptr, target.weight_bytes,
                                                     draft ? draft->weight_bytes : 0, "", context, kv_bytes);
  const double predicted = plan::CountParams(ts).total();
  std::printf("memory at context %d\n  target weights: %.1f MiB (%.0f parameters from its config)\n"
              "  draft weights: %.1f MiB%s\n  KV cache: %.1f MiB (%.2f MiB per 1k positions)\n  draft context cache: %.1f MiB\n"
              "  recurrent state: %.2f MiB (%d linear-attention layers)\n"
              "  buffers and runtime: %.1f MiB\n  total: %.2f GiB of %.1f GiB\n",
              context, MiB(m.target_weights), predicted, MiB(m.draft_weights), draft ? "" : " (none given)", MiB(m.kv_cache),
              MiB(m.kv_per_1k), MiB(m.draft_cache), MiB(m.recurrent_state), ts.layers - ts.full_attention_layers,
              MiB(m.buffers), GiB(m.total()), machine_gb);
}

}  // namespace

int Doctor(int argc, char** argv) {
  std::string model, draft, registry_path;
  int threads = 0, context = 4096;
  Args args("doctor",
            "This machine's facts and the defaults that will apply; with -m, whether the model (and -d draft) will\n"
            "load and how much memory it needs. Reads config.json, safetensors headers or GGUF metadata only.");
  args.Option("-m,--model", &model, "PATH", "target model directory or .gguf file");
  args.Option("-d,--draft", &draft, "PATH", "DFlash draft directory or .gguf file");
  args.Option("-c,--ctx", &context, "N", "context length to size the KV cache for");
  args.Option("-t,--threads", &threads, "N", "threads (0 = one per physical core)");
  args.Option("--registry", &registry_path, "FILE", "pairs registry for suggesting a draft (default: data/pairs.json)");
  if (!args.Parse(argc, argv)) return 0;
  if (context < 1) Fail("-c/--ctx must be at least 1, got ", context);
  if (!draft.empty() && model.empty()) Fail("-d/--draft needs -m/--model");
  // Files first: a bad path is reported before any time goes into measuring the machine.
  std::optional<plan::ModelFiles> target, draft_files;
  if (!model.empty()) target = plan::InspectTarget(model);
  if (!draft.empty()) draft_files = plan::InspectDraft(draft);

  const MachineInfo machine = DescribeMachine();
  ThreadPool pool(threads);
  PrintMachine(machine, pool);
  PrintDefaults(context);
  if (!target) return 0;
  PrintFiles("model", *target);
  bool ok = target->loads;
  std::optional<plan::ModelShape> draft_shape;
  if (draft_files) {
    PrintFiles("draft", *draft_files);
    ok = ok && draft_files->loads;
    if (target->target && draft_files->draft) {
      CheckDraftMatchesTarget(*draft_files->draft, *target->target, draft);
      std::printf("  matches the target: yes (hidden size, vocabulary, capture layers, mask token)\n");
      draft_shape = plan::ShapeOf(*draft_files->draft);
    }
  } else if (target->target) {
    draft_shape = SuggestDraft(plan::ShapeOf(*target->target), registry_path);
  }
  if (target->target) PrintMemory(*target, draft_files ? &*draft_files : nullptr, draft_shape, context, machine.memory_gb);
  std::printf("verdict: %s\n", ok ? "will load" : "will not load (see above)");
  return ok ? 0 : 1;
}

}  // namespace dflash::app
