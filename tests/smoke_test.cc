#include <gtest/gtest.h>

#include <atomic>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace dflash {

TEST(ThreadPool, RunsEveryTaskOnce) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(1000);
  for (int rep = 0; rep < 50; ++rep) {
    pool.ParallelFor(1000, [&](int64_t t) { hits[t].fetch_add(1); });
  }
  for (auto& h : hits) EXPECT_EQ(h.load(), 50);
}

TEST(DType, Bf16RoundTrip) {
  EXPECT_EQ(BF16ToF32(F32ToBF16(1.5f)), 1.5f);
  EXPECT_EQ(F16ToF32(F32ToF16(-2.25f)), -2.25f);
  EXPECT_EQ(F16ToF32(0x0001), 5.9604644775390625e-08f);  // smallest subnormal
}

}  // namespace dflash
