#include "core/thread_pool.h"

#include <chrono>
#include <system_error>

#include "core/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define DFLASH_PAUSE() _mm_pause()
#else
#define DFLASH_PAUSE() ((void)0)
#endif

namespace dflash {

namespace {
// How long a waiting thread spins before it sleeps: long enough to bridge the gap between
// the kernels of one forward pass (a few microseconds of single-threaded norms and rope),
// short enough that a thread whose partner was descheduled gives its core back quickly.
constexpr int64_t kSpinNs = 50'000;

// Spins until done() or kSpinNs pass; returns done().
template <class Done>
bool SpinBriefly(const Done& done) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      DFLASH_PAUSE();
    }
    if (std::chrono::steady_clock::now() - start > std::chrono::nanoseconds(kSpinNs)) return done();
  }
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads > kMaxThreads) {
    Fail("thread count ", num_threads, " exceeds the supported ", kMaxThreads,
         " (0 uses one per hardware thread, here ", std::thread::hardware_concurrency(), ")");
  }
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (num_threads <= 0) num_threads = 1;
  workers_.reserve(num_threads - 1);
  try {
    for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  } catch (const std::system_error& e) {
    // Out of threads (ulimit, memory): without joining the started ones, unwinding the
    // vector of joinable threads would terminate the process.
    const size_t started = workers_.size();
    StopWorkers();
    Fail("cannot start thread ", started + 2, " of ", num_threads, ": ", e.what());
  }
}

ThreadPool::~ThreadPool() { StopWorkers(); }

void ThreadPool::StopWorkers() {
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
  epoch_.notify_all();  // a syscall only when some worker sleeps
  DrainTasks();
  const auto idle = [this] { return busy_.load(std::memory_order_acquire) == 0; };
  if (SpinBriefly(idle)) return;
  for (int b; (b = busy_.load(std::memory_order_acquire)) != 0;) busy_.wait(b, std::memory_order_acquire);
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;  // the epoch at construction: a late-starting thread must not skip a Run
  for (;;) {
    const auto changed = [&] { return epoch_.load(std::memory_order_acquire) != seen; };
    if (!SpinBriefly(changed)) {
      while (!changed()) epoch_.wait(seen, std::memory_order_acquire);
    }
    seen = epoch_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    DrainTasks();
    // The last worker out wakes the caller if it went to sleep (no syscall if it is spinning).
    if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) busy_.notify_one();
  }
}

}  // namespace dflash
