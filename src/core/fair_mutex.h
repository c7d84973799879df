// A mutex that hands itself out in arrival order (a ticket lock). Sequences that share one
// model take turns per step through it; a plain std::mutex lets the thread that just released
// it win again, starving the others.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace dflash {

class FairMutex {
 public:
  void lock() {
    std::unique_lock<std::mutex> l(m_);
    const uint64_t ticket = next_++;
    cv_.wait(l, [&] { return serving_ == ticket; });
  }
  void unlock() {
    {
      std::lock_guard<std::mutex> l(m_);
      ++serving_;
    }
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  uint64_t next_ = 0, serving_ = 0;
};

}  // namespace dflash
