// How the matmul kernels spread output columns over the thread pool. Which columns share a
// task decides only speed, never the order of any sum, so batch invariance does not depend on it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "core/error.h"
#include "core/thread_pool.h"

namespace dflash::ops {

// One weight's output columns in a pass: y is M x cols, bias (or null) is added to it.
struct ColumnSegment {
  int64_t cols = 0;
  const float* bias = nullptr;
  float* y = nullptr;
};

// The most weights one pass takes (q, k, v is the widest use).
constexpr int kMaxSegments = 4;

// Runs columns(segment, n_begin, n_end) over every segment's [0, cols) in one ParallelFor, in
// tasks of a multiple of `tile` columns that never straddle two segments (about 8 per thread
// over all segments, to balance uneven progress), then adds the segment's bias to those
// columns inside the same task while they are still in cache.
template <class Columns>
void ForColumnTasks(int64_t M, std::span<const ColumnSegment> segments, int64_t tile,
                    ThreadPool& pool, const Columns& columns) {
  if (segments.size() > kMaxSegments) Fail("ForColumnTasks: ", segments.size(), " segments (max ", kMaxSegments, ")");
  int64_t total = 0;
  for (const ColumnSegment& s : segments) total += s.cols;
  const int64_t target_tasks = 8 * pool.size();
  int64_t cols_per_task = (total + target_tasks - 1) / target_tasks;
  cols_per_task = std::max<int64_t>(tile, (cols_per_task + tile - 1) / tile * tile);
  int64_t first_task[kMaxSegments + 1] = {0};  // segment s owns tasks [first_task[s], first_task[s + 1])
  for (size_t s = 0; s < segments.size(); ++s)
    first_task[s + 1] = first_task[s] + (segments[s].cols + cols_per_task - 1) / cols_per_task;
  pool.ParallelFor(first_task[segments.size()], [&](int64_t task) {
    int s = 0;
    while (task >= first_task[s + 1]) ++s;
    const ColumnSegment& seg = segments[s];
    const int64_t n_begin = (task - first_task[s]) * cols_per_task;
    const int64_t n_end = std::min(seg.cols, n_begin + cols_per_task);
    columns(s, n_begin, n_end);
    if (!seg.bias) return;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = n_begin; n < n_end; ++n) seg.y[m * seg.cols + n] += seg.bias[n];
  });
}

// The same for one weight: columns(n_begin, n_end) over [0, Nout) of the M x Nout y.
template <class Columns>
void ForColumnTasks(int64_t M, int64_t Nout, int64_t tile, const float* bias, float* y,
                    ThreadPool& pool, const Columns& columns) {
  const ColumnSegment segment{Nout, bias, y};
  ForColumnTasks(M, std::span<const ColumnSegment>(&segment, 1), tile, pool,
                 [&](int, int64_t n_begin, int64_t n_end) { columns(n_begin, n_end); });
}

}  // namespace dflash::ops
