// The one thread pool. ParallelFor hands out task indices [0, n) to the caller and the
// workers; results must not depend on which thread runs a task (kernels split output
// columns or rows, never a reduction), so numerics are independent of the thread count.
//
// Dispatch allocates nothing and takes no lock. Both sides of a hand-off spin only briefly
// (kSpinNs) and then sleep on the atomic (C++20 wait/notify: a futex on Linux): on a machine
// shared with other processes a spinning thread would take the core that the thread it waits
// for needs. Tasks are claimed one at a time from a shared counter and the caller waits for
// claimed tasks, not for workers: a worker that is descheduled before it claims anything
// costs nothing (the caller and the others run its share), one descheduled inside a task
// delays only that task.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace dflash {

// The distinct (physical_package_id, core_id) pairs under cpu_dir/cpu<N>/topology (Linux
// sysfs layout; cpu_dir is normally /sys/devices/system/cpu); 0 when none can be read.
int CountPhysicalCores(const std::string& cpu_dir);

class ThreadPool {
 public:
  // The largest pool: above the biggest machines today (2 sockets x 192 cores x 2 hardware
  // threads = 768). A fixed bound, not a multiple of this machine's threads, so that a
  // setting valid on one machine is valid on all; --threads 100000 is a typo, not a machine.
  static constexpr int kMaxThreads = 1024;

  // num_threads counts the calling thread; 0 means DefaultThreads(). Throws Error above
  // kMaxThreads or when the system cannot start that many threads.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // One thread per physical core: a second hardware thread on a core shares its SIMD units
  // and its bandwidth, so it adds little to these kernels and one more thread to wait for.
  // Falls back to the hardware threads where the topology cannot be read.
  static int DefaultThreads();

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
  std::atomic<uint64_t> epoch_{0};     // bumped once per Run (and at shutdown): wakes the workers
  std::atomic<int64_t> unclaimed_{0};  // tasks of the current Run nobody has claimed yet
  std::atomic<int64_t> done_{0};       // tasks of the current Run that have finished
  std::atomic<bool> stop_{false};
  // The current Run, written before unclaimed_ is set; read only by a thread holding a claim.
  int64_t num_tasks_ = 0;
  TaskFn fn_ = nullptr;
  const void* ctx_ = nullptr;
};

}  // namespace dflash
