// The memory roofline of this machine: how fast all pool threads together can stream-read a
// buffer much larger than the caches. Decode reads every weight (and the KV cache) once per
// token, so bytes per token / this bandwidth is the fastest a decode step can possibly be.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace dflash {

struct Bandwidth {
  double median_gbs = 0;  // median over the timed passes
  double best_gbs = 0;
  int64_t bytes = 0;      // buffer size read per pass
  int passes = 0;
};

// Reads a `bytes`-sized buffer (rounded to whole 4 KiB pages) `passes` times after one
// warm-up pass, split into tasks over `pool`. Throws Error when bytes < 1 MiB or passes < 1.
Bandwidth MeasureReadBandwidth(ThreadPool& pool, int64_t bytes, int passes);

}  // namespace dflash
