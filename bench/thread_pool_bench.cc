// ParallelFor dispatch cost: one call of `tasks` empty tasks, back to back (the workers stay
// spinning) and after a pause longer than the spin budget (they must be woken).
//   DFLASH_THREADS=2 build/bin/dflash_microbench --benchmark_filter=ThreadPool
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/thread_pool.h"

namespace dflash {
namespace {

ThreadPool& Pool() {
  static ThreadPool pool(std::getenv("DFLASH_THREADS") ? std::atoi(std::getenv("DFLASH_THREADS")) : 0);
  return pool;
}

void BM_ParallelForBackToBack(benchmark::State& state) {
  std::atomic<int64_t> sink{0};
  for (auto _ : state) Pool().ParallelFor(state.range(0), [&](int64_t t) { sink.fetch_add(t, std::memory_order_relaxed); });
  state.SetLabel("threads=" + std::to_string(Pool().size()));
}
BENCHMARK(BM_ParallelForBackToBack)->Arg(16)->Arg(256)->UseRealTime();

void BM_ParallelForAfterSleep(benchmark::State& state) {
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    state.PauseTiming();
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // past the 50 us spin budget
    state.ResumeTiming();
    Pool().ParallelFor(16, [&](int64_t t) { sink.fetch_add(t, std::memory_order_relaxed); });
  }
  state.SetLabel("threads=" + std::to_string(Pool().size()));
}
BENCHMARK(BM_ParallelForAfterSleep)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dflash
