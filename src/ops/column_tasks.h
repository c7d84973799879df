// How the matmul kernels spread output columns over the thread pool. Which columns share a
// task decides only speed, never the order of any sum, so batch invariance does not depend on it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/thread_pool.h"

namespace dflash::ops {

// Runs columns(n_begin, n_end) over [0, Nout) in tasks that are multiples of `tile` (about 8
// per thread, to balance uneven progress), then adds bias[n] to those columns of the M x Nout
// output y, inside the same task while they are still in cache.
template <class Columns>
void ForColumnTasks(int64_t M, int64_t Nout, int64_t tile, const float* bias, float* y,
                    ThreadPool& pool, const Columns& columns) {
  const int64_t target_tasks = 8 * pool.size();
  int64_t cols_per_task = (Nout + target_tasks - 1) / target_tasks;
  cols_per_task = std::max<int64_t>(tile, (cols_per_task + tile - 1) / tile * tile);
  const int64_t num_tasks = (Nout + cols_per_task - 1) / cols_per_task;
  pool.ParallelFor(num_tasks, [&](int64_t task) {
    const int64_t n_begin = task * cols_per_task;
    const int64_t n_end = std::min(Nout, n_begin + cols_per_task);
    columns(n_begin, n_end);
    if (!bias) return;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = n_begin; n < n_end; ++n) y[m * Nout + n] += bias[n];
  });
}

}  // namespace dflash::ops
