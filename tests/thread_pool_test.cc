// The pool runs every task exactly once per ParallelFor, whether its workers are spinning,
// asleep (calls further apart than the spin budget), oversubscribed (more threads than cores)
// or descheduled; and the default size is the machine's physical cores.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
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

// Tiny tasks, many Runs, each Run with its own task function over its own buffer: a worker
// that woke late for a Run that had returned and called its function (or counted a task as
// done in the next Run) would show up as a miss or a double here, or as a use after scope
// under ASan.
TEST(ThreadPool, EveryTaskOnceOverManyTinyRuns) {
  for (int threads : {2, 3, 4, 8}) {
    ThreadPool pool(threads);
    for (int call = 0; call < 5000; ++call) ExpectEveryTaskOnce(pool, 2 + call % 11);
  }
}

// A worker that is descheduled (here: held in a signal handler, the closest a test gets to
// the scheduler taking its core away) must not hold up a Run it has claimed nothing of: the
// caller runs every task and returns. Deterministic: the worker is parked before the Runs
// start and released only after them; if Run waited for it, the watchdog's release after 3 s
// would be what lets Run return, and the test says so.
std::atomic<bool> parked{false};
std::atomic<bool> release_parked{false};

void ParkUntilReleased(int) {
  parked.store(true);
  const timespec ms{0, 1'000'000};
  while (!release_parked.load()) nanosleep(&ms, nullptr);  // async-signal-safe
}

// The pthread id of a worker of a two-thread pool (some thread other than the caller).
pthread_t AWorkerOf(ThreadPool& pool) {
  const pthread_t caller = pthread_self();
  std::atomic<bool> seen{false};
  pthread_t worker{};
  pool.ParallelFor(2, [&](int64_t) {
    if (pthread_equal(pthread_self(), caller)) {
      while (!seen.load()) std::this_thread::yield();  // leaves the other task to the worker
    } else {
      worker = pthread_self();
      seen.store(true);
    }
  });
  return worker;
}

TEST(ThreadPool, RunDoesNotWaitForAWorkerThatClaimedNothing) {
  struct sigaction park{}, old{};
  park.sa_handler = ParkUntilReleased;
  sigemptyset(&park.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &park, &old), 0);
  parked = false;
  release_parked = false;

  ThreadPool pool(2);
  ASSERT_EQ(pthread_kill(AWorkerOf(pool), SIGUSR1), 0);
  while (!parked.load()) std::this_thread::yield();

  std::atomic<bool> finished{false}, watchdog_released{false};
  std::thread watchdog([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!finished.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!finished.load()) watchdog_released = true;
    release_parked = true;
  });
  for (int call = 0; call < 100; ++call) ExpectEveryTaskOnce(pool, 64);
  EXPECT_FALSE(watchdog_released.load()) << "Run returned only once the parked worker was released";
  finished = true;
  watchdog.join();
  // Back from the handler, the worker finds the Runs it slept through gone and takes part again.
  for (int call = 0; call < 100; ++call) ExpectEveryTaskOnce(pool, 64);
  sigaction(SIGUSR1, &old, nullptr);
}

// One per (package, core) pair: hyperthread siblings count once, entries that are not CPUs
// or have no topology (offline) not at all, and an unreadable directory gives 0.
TEST(ThreadPool, CountsPhysicalCoresFromTopology) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::TempDir()) / "thread_pool_cpus";
  fs::remove_all(dir);
  const auto cpu = [&](const std::string& name, int package, int core) {
    fs::create_directories(dir / name / "topology");
    std::ofstream(dir / name / "topology" / "physical_package_id") << package << "\n";
    std::ofstream(dir / name / "topology" / "core_id") << core << "\n";
  };
  cpu("cpu0", 0, 0);
  cpu("cpu1", 0, 1);
  cpu("cpu2", 0, 0);  // sibling of cpu0
  cpu("cpu3", 0, 1);  // sibling of cpu1
  cpu("cpu4", 1, 0);  // second socket, same core_id as cpu0
  cpu("cpufreq", 0, 7);
  fs::create_directories(dir / "cpu5");  // offline: no topology
  EXPECT_EQ(CountPhysicalCores(dir.string()), 3);
  EXPECT_EQ(CountPhysicalCores((dir / "missing").string()), 0);
  fs::remove_all(dir);
  EXPECT_GE(ThreadPool::DefaultThreads(), 1);
  EXPECT_LE(ThreadPool::DefaultThreads(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace dflash
