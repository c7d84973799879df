// Streaming-read bandwidth probe. The read kernel sums 4 independent vectors of 64-bit words
// per step (enough loads in flight to saturate a core's share of memory bandwidth); each
// task's sum goes into an atomic, so the compiler cannot drop the loads.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/bandwidth.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#ifndef DFLASH_BENCH_BANDWIDTH_ONCE
#define DFLASH_BENCH_BANDWIDTH_ONCE
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "bench/bandwidth.h"
#include "core/error.h"
#include "core/huge_pages.h"
#endif

HWY_BEFORE_NAMESPACE();
namespace dflash::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sum of n 64-bit words at p (n a multiple of 4 vectors' lanes).
uint64_t ReadSum(const uint64_t* HWY_RESTRICT p, int64_t n) {
  const hn::ScalableTag<uint64_t> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  for (int64_t i = 0; i + 4 * N <= n; i += 4 * N) {
    a0 = hn::Add(a0, hn::LoadU(d, p + i));
    a1 = hn::Add(a1, hn::LoadU(d, p + i + N));
    a2 = hn::Add(a2, hn::LoadU(d, p + i + 2 * N));
    a3 = hn::Add(a3, hn::LoadU(d, p + i + 3 * N));
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

}  // namespace dflash::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash {
HWY_EXPORT(ReadSum);

Bandwidth MeasureReadBandwidth(ThreadPool& pool, int64_t bytes, int passes) {
  if (bytes < (int64_t{1} << 20)) Fail("bandwidth: buffer of ", bytes, " bytes is below 1 MiB");
  if (passes < 1) Fail("bandwidth: passes must be at least 1, got ", passes);
  constexpr int64_t kTaskBytes = int64_t{1} << 21;  // 2 MiB per task: many tasks, cheap to steal
  bytes = (bytes + kTaskBytes - 1) / kTaskBytes * kTaskBytes;
  // The same kind of memory the weights and KV caches live in (core/huge_pages.h), so the
  // roofline is what those buffers can be read at.
  std::unique_ptr<HugeBuffer> buffer;
  try {
    buffer = std::make_unique<HugeBuffer>(static_cast<size_t>(bytes));
  } catch (const std::bad_alloc&) {
    Fail("bandwidth: cannot allocate ", bytes, " bytes");
  }
  uint64_t* words = reinterpret_cast<uint64_t*>(buffer->data());
  const int64_t task_words = kTaskBytes / 8, tasks = bytes / kTaskBytes;
  // Written once by the pool so the pages are real (not the shared zero page) and spread
  // over the threads' memory the way the weights are.
  pool.ParallelFor(tasks, [&](int64_t t) {
    for (int64_t i = t * task_words; i < (t + 1) * task_words; ++i) words[i] = static_cast<uint64_t>(i);
  });
  std::atomic<uint64_t> sink{0};
  std::vector<double> gbs;
  for (int pass = 0; pass <= passes; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.ParallelFor(tasks, [&](int64_t t) {
      sink.fetch_add(HWY_DYNAMIC_DISPATCH(ReadSum)(words + t * task_words, task_words),
                     std::memory_order_relaxed);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (pass > 0) gbs.push_back(static_cast<double>(bytes) / s / 1e9);  // pass 0 warms up
  }
  std::sort(gbs.begin(), gbs.end());
  return Bandwidth{gbs[gbs.size() / 2], gbs.back(), bytes, passes};
}

}  // namespace dflash
#endif
