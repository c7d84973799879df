// `dflash bench --roofline`: how close decoding runs to this machine's memory bandwidth.
// Decode reads every weight and the attended KV once per token, so
//   roofline % = (DecodeBytes(ctx) / t(1)) / measured read bandwidth,
// and the same run reports prefill throughput and the verify cost curve t(rows)/t(1) at each
// context (bench/verify_cost.h), which together decide whether speculation can pay here.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/bandwidth.h"
#include "bench/verify_cost.h"
#include "core/thread_pool.h"
#include "model/target.h"

namespace dflash {

struct RooflineOptions {
  std::vector<int> contexts{512, 4096, 16384};
  std::vector<int> rows{1, 2, 4, 8, 16, 32};
  int repeats = 3;
  int64_t bandwidth_bytes = int64_t{1} << 30;  // well past any last-level cache
  int prefill_tokens = 512;
};

struct DecodePoint {
  int context = 0;
  double ms = 0;            // median t(1)
  double tok_s = 0;
  int64_t bytes = 0;        // DecodeBytes(context)
  double gbs = 0;           // bytes / t(1)
  double roofline_pct = 0;  // gbs / roofline_gbs
};

struct RooflineResult {
  // Probed before and after the timings: a shared machine's bandwidth can change within a run
  // (31 vs 50 GB/s minutes apart on one VM), and a roofline below what the machine just did
  // would flatter the decode. roofline_gbs is the higher median.
  Bandwidth bandwidth, bandwidth_after;
  double roofline_gbs = 0;
  double prefill_tok_s = 0;  // median over repeats of prefilling prefill_tokens from empty
  std::vector<DecodePoint> decode;      // one per context, ascending
  std::vector<VerifyCostPoint> verify;  // every (context, rows)
};

// Times prefilling `tokens` filler tokens from an empty cache in max_rows() chunks, `repeats`
// times; returns the median tokens per second. The cache is left empty.
double MeasurePrefill(TargetModel& target, int tokens, int repeats);

RooflineResult MeasureRoofline(TargetModel& target, ThreadPool& pool, const RooflineOptions& options,
                               const Progress& progress = {});

}  // namespace dflash
