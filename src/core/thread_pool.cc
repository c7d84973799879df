#include "core/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define DFLASH_PAUSE() _mm_pause()
#else
#define DFLASH_PAUSE() ((void)0)
#endif

namespace dflash {

namespace {
// How long an idle worker spins before it sleeps: long enough to bridge the gap between the
// kernels of one forward pass, short enough not to burn a core between requests.
constexpr int kSpinIterations = 20000;
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (num_threads <= 0) num_threads = 1;
  workers_.reserve(num_threads - 1);
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  epoch_.fetch_add(1);
  epoch_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::DrainTasks() {
  for (;;) {
    const int64_t t = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (t >= num_tasks_) break;
    fn_(ctx_, t);
  }
}

void ThreadPool::Run(int64_t num_tasks, TaskFn fn, const void* ctx) {
  num_tasks_ = num_tasks;
  fn_ = fn;
  ctx_ = ctx;
  next_task_.store(0, std::memory_order_relaxed);
  busy_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  epoch_.fetch_add(1, std::memory_order_release);
  epoch_.notify_all();
  DrainTasks();
  while (busy_.load(std::memory_order_acquire) != 0) DFLASH_PAUSE();
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;  // the epoch at construction: a late-starting thread must not skip a Run
  for (;;) {
    int spins = 0;
    uint64_t now;
    while ((now = epoch_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kSpinIterations) {
        DFLASH_PAUSE();
      } else {
        epoch_.wait(seen);
      }
    }
    seen = now;
    if (stop_.load()) return;
    DrainTasks();
    busy_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace dflash
