#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>
#include <utility>

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
// Measured on the shipped pair (2 cores, plain decode, bench/busy_machine.sh): 5 us against
// 50 us raised -t 2 / -t 1 under one busy loop per core from 0.82-0.97 to 0.99-1.26, and -t 2
// alone from 496-540 to 555-665 tok/s: a thread that spins less accrues less CPU time, so the
// scheduler lets it preempt a competitor when it is woken.
constexpr int64_t kSpinNs = 5'000;

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

// The integer in a one-line sysfs file, or -1 if it cannot be read.
int ReadSysfsInt(const std::filesystem::path& file) {
  std::ifstream in(file);
  int value = -1;
  return in >> value ? value : -1;
}

bool IsCpuEntry(const std::string& name) {
  return name.size() > 3 && name.starts_with("cpu") &&
         std::all_of(name.begin() + 3, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}
}  // namespace

int CountPhysicalCores(const std::string& cpu_dir) {
  std::set<std::pair<int, int>> cores;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(cpu_dir, ec)) {
    if (!IsCpuEntry(entry.path().filename().string())) continue;
    const auto topology = entry.path() / "topology";
    const int package = ReadSysfsInt(topology / "physical_package_id");
    const int core = ReadSysfsInt(topology / "core_id");
    if (package >= 0 && core >= 0) cores.emplace(package, core);  // offline CPUs have no topology
  }
  return static_cast<int>(cores.size());
}

int ThreadPool::DefaultThreads() {
  int n = CountPhysicalCores("/sys/devices/system/cpu");
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(n, 1, kMaxThreads);
}

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads > kMaxThreads) {
    Fail("thread count ", num_threads, " exceeds the supported ", kMaxThreads,
         " (0 uses one per physical core, here ", DefaultThreads(), ")");
  }
  if (num_threads <= 0) num_threads = DefaultThreads();
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

// Claims tasks one at a time until none is left. A claim is a compare-and-swap on unclaimed_,
// never a blind decrement: a worker that woke late for a Run that has already returned finds
// 0 there, or the next Run's count, and then claims a task of that Run, whose num_tasks_,
// fn_ and ctx_ its acquire makes visible. The Run cannot return before a claimed task counts
// itself done, so the caller's state is never read after Run returns.
void ThreadPool::DrainTasks() {
  for (;;) {
    int64_t unclaimed = unclaimed_.load(std::memory_order_relaxed);
    do {
      if (unclaimed == 0) return;
    } while (!unclaimed_.compare_exchange_weak(unclaimed, unclaimed - 1, std::memory_order_acquire,
                                               std::memory_order_relaxed));
    const int64_t num_tasks = num_tasks_;
    fn_(ctx_, num_tasks - unclaimed);  // tasks go out in order 0, 1, ...
    // The last task wakes the caller if it went to sleep (no syscall if nobody sleeps).
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == num_tasks) done_.notify_one();
  }
}

void ThreadPool::Run(int64_t num_tasks, TaskFn fn, const void* ctx) {
  num_tasks_ = num_tasks;
  fn_ = fn;
  ctx_ = ctx;
  done_.store(0, std::memory_order_relaxed);
  unclaimed_.store(num_tasks, std::memory_order_release);  // publishes the fields above
  epoch_.fetch_add(1, std::memory_order_release);
  epoch_.notify_all();  // a syscall only when some worker sleeps
  DrainTasks();
  // Wait only for tasks that workers hold: one that has not claimed any is not waited for.
  const auto all_done = [&] { return done_.load(std::memory_order_acquire) == num_tasks; };
  if (SpinBriefly(all_done)) return;
  for (int64_t d; (d = done_.load(std::memory_order_acquire)) != num_tasks;) done_.wait(d, std::memory_order_acquire);
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
  }
}

}  // namespace dflash
