// The one thread pool. ParallelFor hands out task indices [0, n) to the caller and the
// workers; results must not depend on which thread runs a task (kernels split output
// columns or rows, never a reduction), so numerics are independent of the thread count.
//
// Dispatch allocates nothing and takes no lock. Both sides of a hand-off spin only briefly
// (kSpinNs) and then sleep on the atomic (C++20 wait/notify: a futex on Linux): on a machine
// shared with other processes a spinning thread would take the core that the thread it waits
// for needs, so unbounded spinning is what made the old pool collapse under load. Tasks are
// claimed one at a time from a shared counter, so a descheduled thread delays only the task
// it holds, and the caller works too.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace dflash {

class ThreadPool {
 public:
  // The largest pool: above the biggest machines today (2 sockets x 192 cores x 2 hardware
  // threads = 768). A fixed bound, not a multiple of this machine's threads, so that a
  // setting valid on one machine is valid on all; --threads 100000 is a typo, not a machine.
  static constexpr int kMaxThreads = 1024;

  // num_threads counts the calling thread; 0 means one per hardware thread. Throws Error
  // above kMaxThreads or when the system cannot start that many threads.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(task) for every task in [0, num_tasks); returns when all are done.
  template <class Fn>
  void ParallelFor(int64_t num_tasks, const Fn& fn) {
    if (num_tasks <= 0) return;
    if (num_tasks == 1 || workers_.empty()) {
      for (int64_t t = 0; t < num_tasks; ++t) fn(t);
      return;
    }
    Run(num_tasks, [](const void* ctx, int64_t t) { (*static_cast<const Fn*>(ctx))(t); }, &fn);
  }

 private:
  using TaskFn = void (*)(const void* ctx, int64_t task);
  void Run(int64_t num_tasks, TaskFn fn, const void* ctx);
  void WorkerLoop();
  void StopWorkers();  // wakes every worker to exit, and joins them
  void DrainTasks();

  std::vector<std::thread> workers_;
  std::atomic<uint64_t> epoch_{0};  // bumped once per Run (and at shutdown)
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> busy_{0};        // workers that have not finished the current Run
  std::atomic<bool> stop_{false};
  int64_t num_tasks_ = 0;
  TaskFn fn_ = nullptr;
  const void* ctx_ = nullptr;
};

}  // namespace dflash
