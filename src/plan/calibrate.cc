#include "plan/calibrate.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "bench/verify_cost.h"
#include "core/error.h"
#include "draft/dflash_draft.h"
#include "io/quantize_store.h"
#include "model/qwen3.h"
#include "ops/ops.h"
#include "plan/loop_costs.h"
#include "plan/synthetic_model.h"

namespace dflash::plan {

namespace {

double NowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Appends and picks take microseconds: more of them than of the passes.
constexpr int kLoopRepeats = 15;
// A stretch of consecutive steps long enough to span several scheduler slices.
constexpr int kSustainedSteps = 16;
constexpr double kSustainedMs = 1000;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Total(const PassProfile& p) {
  double t = 0;
  for (double ms : p.ms) t += ms;
  return t;
}

// The load-time quantisation that gives `format`, and what stands in where the engine has no
// calibration path of the format's own.
std::optional<DType> FormatQuant(const std::string& format, std::string* note) {
  if (format == "q8_0") return DType::kQ8_0;
  if (format == "q4_0") return DType::kQ4_0;
  if (format == "q4_k") return DType::kQ4_K;
  if (format == "bf16") return std::nullopt;
  if (format == "mlx-4bit") {
    *note = "mlx-4bit timed as q4_0 (4-bit blocks of 32 with a scale; MLX's affine groups of 64 read about as many bytes)";
    return DType::kQ4_0;
  }
  Fail("calibration: format '", format, "' is not one of q8_0, q4_0, q4_k, bf16, mlx-4bit");
}

void Prepare(TensorStore& store, const std::optional<DType>& quant, ThreadPool& pool) {
  if (quant) QuantizeMatrices(store, *quant, pool);
  PackMatrices(store, pool);
}

// A pass of the built layers scaled to the whole model: the LM head's share stays, the
// layers' share grows by layers / built.
double Extrapolate(double ms, double head_share, double layer_scale) {
  return ms * (head_share + (1 - head_share) * layer_scale);
}

// Multiply-adds of appending one row to a draft's context: the fc projection of its captured
// features and each layer's K and V projections (the synthetic draft captures one layer and
// builds a few, so the timed append is scaled by this count).
double AppendMacs(const ModelShape& draft, int capture_layers, int layers) {
  const double H = draft.hidden;
  return capture_layers * H * H + layers * 2.0 * H * draft.kv_heads * draft.head_dim;
}

}  // namespace

Calibration Calibrate(const ModelShape& target, const ModelShape& draft, const std::string& format, int64_t context,
                      ThreadPool& pool, const CalibrationOptions& opt) {
  CheckSyntheticShape(target);
  if (context < 1) Fail("calibration: context must be at least 1, got ", context);
  if (opt.repeats < 1 || opt.rows.empty()) Fail("calibration: needs repeats >= 1 and row counts");
  Calibration c;
  c.format = format;
  const std::optional<DType> quant = FormatQuant(format, &c.format_note);
  const int block = std::max(2, draft.block_size);
  c.context = context;
  c.target_layers = target.layers;
  c.draft_layers = draft.layers;
  c.target_layers_built = std::clamp(opt.target_layers, 1, target.layers);
  c.draft_layers_built = std::clamp(opt.draft_layers, 1, draft.layers);
  c.rows = opt.rows;
  if (std::find(c.rows.begin(), c.rows.end(), 1) == c.rows.end()) c.rows.insert(c.rows.begin(), 1);
  std::sort(c.rows.begin(), c.rows.end());
  const int max_rows = std::max({64, c.rows.back(), block});
  const int capacity = static_cast<int>(context) + max_rows + 1;

  const double t0 = NowMs();
  SyntheticTarget st = MakeSyntheticTarget(target, c.target_layers_built, capacity, 1);
  Prepare(st.weights.store, quant, pool);
  TargetOptions topt;
  topt.kv_capacity = capacity;
  topt.max_rows = max_rows;
  topt.kv_type = ops::Bf16DotActive() ? DType::kBF16 : DType::kF16;  // the CLI's default cache
  topt.capture_layers = {c.target_layers_built - 1};
  c.kv_type = DTypeName(topt.kv_type);
  Qwen3Model model(st.config, st.weights.store, topt, pool);
  SyntheticDraft sd = MakeSyntheticDraft(draft, st.config, c.draft_layers_built, 2);
  Prepare(sd.weights.store, quant, pool);
  DraftOptions dopt;
  dopt.max_block = block;
  dopt.context_capacity = capacity;
  dopt.max_append = max_rows;
  DFlashDraft draft_model(sd.config, sd.weights.store, model, dopt, pool);
  c.build_s = (NowMs() - t0) / 1e3;

  // Verify cost per row count at the context; the 1-row pass is the plain decode step.
  const double t1 = NowMs();
  const double target_scale = double(c.target_layers) / c.target_layers_built;
  const std::vector<VerifyCostPoint> pts =
      MeasureVerifyCost(model, {static_cast<int>(context)}, c.rows, opt.repeats, {}, /*profile=*/true);
  double head_ms_per_row = 0;
  for (const VerifyCostPoint& p : pts) {
    const double total = Total(p.stages), head = p.stages[PassStage::kLmHead];
    const double share = total > 0 ? head / total : 0;
    c.lm_head_share.push_back(share);
    c.verify_ms.push_back(Extrapolate(p.ms, share, target_scale));
    head_ms_per_row = share * p.ms / p.rows;  // the widest pass's, the draft's kind of head
  }
  // What a decode sees now: plain steps and the loop's work scale by the sustained step over
  // the median pass.
  c.sustained_factor = MeasureSustainedStepMs(model, static_cast<int>(context), kSustainedSteps, kSustainedMs) / pts.front().ms;

  // Prefill: one chunk at half the context stands for the mean chunk of a prompt that long.
  model.Truncate(0);
  model.FillSyntheticKv(static_cast<int>(context / 2));
  const int chunk = std::min<int>(64, max_rows);
  const std::vector<int32_t> tokens(chunk, 1);
  PassProfile prefill_profile;
  std::vector<double> chunk_ms;
  for (int r = 0; r <= opt.repeats; ++r) {
    model.set_profile(r > 0 ? &prefill_profile : nullptr);
    const double s = NowMs();
    model.Forward(tokens, /*all_logits=*/false);
    if (r > 0) chunk_ms.push_back(NowMs() - s);
    model.Truncate(static_cast<int>(context / 2));
  }
  model.set_profile(nullptr);
  const double prefill_total = Total(prefill_profile);
  const double prefill_share = prefill_total > 0 ? prefill_profile[PassStage::kLmHead] / prefill_total : 0;
  c.prefill_tok_s = chunk / Extrapolate(Median(chunk_ms), prefill_share, target_scale) * 1e3;
  c.ttft_ms = double(context) / c.prefill_tok_s * 1e3;

  // A draft pass over a block at the context, after filling the draft's context.
  const int64_t H = target.hidden;
  std::vector<float> features(static_cast<size_t>(max_rows) * H);
  for (size_t i = 0; i < features.size(); ++i) features[i] = float(int(i % 7) - 3) * 0.25f;
  for (int pos = 0; pos < context; pos += max_rows) {
    draft_model.AppendContext(features.data(), std::min<int>(max_rows, static_cast<int>(context) - pos), pos);
  }
  // The loop's own work: an append at the context (cropped back) and a pick over the vocabulary.
  const int loop_repeats = std::min(max_rows, kLoopRepeats);
  const LoopCosts loop = MeasureLoopCosts(draft_model, H, target.vocab, static_cast<int>(context), loop_repeats);
  draft_model.TruncateContext(static_cast<int>(context));
  const int captures = std::max(1, draft.capture_layers);
  c.pick_ms = loop.pick_ms;
  c.append_ms = loop.append_ms * AppendMacs(draft, captures, c.draft_layers) / AppendMacs(draft, 1, c.draft_layers_built);
  std::vector<double> draft_ms;
  for (int r = 0; r <= opt.repeats; ++r) {
    const double s = NowMs();
    draft_model.Propose(1, static_cast<int>(context), block, block - 1);
    if (r > 0) draft_ms.push_back(NowMs() - s);
  }
  const double draft_head = head_ms_per_row * (block - 1);
  c.draft_ms = draft_head + double(c.draft_layers) / c.draft_layers_built * std::max(0.0, Median(draft_ms) - draft_head);
  c.measure_s = (NowMs() - t1) / 1e3;

  // Cycles back to back, a draft pass and a full-block verify, scale the draft and the
  // multi-row verifies: on a busy machine a pass of many rows loses more to preemption than a
  // 1-row step does (every parallel stage waits for both threads, for longer).
  const size_t widest = c.rows.size() - 1;
  model.FillSyntheticKv(static_cast<int>(context));
  const std::vector<int32_t> verify_tokens(c.rows[widest], 1);
  int cycles = 0;
  const double cycles_start = NowMs();
  while (cycles < opt.repeats || NowMs() - cycles_start < kSustainedMs) {
    draft_model.Propose(1, static_cast<int>(context), block, block - 1);
    model.Forward(verify_tokens, /*all_logits=*/true);
    model.Truncate(static_cast<int>(context));
    ++cycles;
  }
  c.cycle_factor = (NowMs() - cycles_start) / cycles / (Median(draft_ms) + pts[widest].ms);
  for (double* ms : {&c.pick_ms, &c.append_ms, &c.ttft_ms}) *ms *= c.sustained_factor;
  c.prefill_tok_s /= c.sustained_factor;
  c.draft_ms *= c.cycle_factor;
  for (size_t i = 0; i < c.verify_ms.size(); ++i) c.verify_ms[i] *= i == 0 ? c.sustained_factor : c.cycle_factor;
  std::vector<double> ratios;
  for (double ms : c.verify_ms) ratios.push_back(ms / c.verify_ms.front());
  // Dense targets only (synthetic_model.h): no expert term.
  c.costs = {c.verify_ms.front(), c.draft_ms, FitVerifySlope(c.rows, ratios), c.pick_ms, c.append_ms, {}};
  return c;
}

}  // namespace dflash::plan
