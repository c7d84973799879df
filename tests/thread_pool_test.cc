// The pool runs every task exactly once per ParallelFor, whether its workers are spinning,
// asleep (calls further apart than the spin budget) or oversubscribed (more threads than cores).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace dflash {
namespace {

void ExpectEveryTaskOnce(ThreadPool& pool, int64_t tasks) {
  std::vector<std::atomic<int>> hits(tasks);
  pool.ParallelFor(tasks, [&](int64_t t) { hits[t].fetch_add(1, std::memory_order_relaxed); });
  for (int64_t t = 0; t < tasks; ++t) ASSERT_EQ(hits[t].load(), 1) << "task " << t << " of " << tasks;
}

TEST(ThreadPool, EveryTaskOnceWhileSpinningAndAfterSleeping) {
  for (int threads : {1, 2, 3, 8}) {  // 8 threads on this 2-core machine: oversubscribed
    ThreadPool pool(threads);
    for (int call = 0; call < 400; ++call) {
      ExpectEveryTaskOnce(pool, 1 + call % 37);
      // Now and then wait past the spin budget, so the workers (and the caller's wait for a
      // slow worker) take the sleeping path.
      if (call % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
}

TEST(ThreadPool, CallerWaitsForASlowWorker) {
  ThreadPool pool(2);
  std::atomic<int> done{0};
  // One task outlasts the spin budget many times over: the caller must sleep and be woken.
  pool.ParallelFor(2, [&](int64_t t) {
    if (t == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    done.fetch_add(1);
  });
  EXPECT_EQ(done.load(), 2);
}

}  // namespace
}  // namespace dflash
