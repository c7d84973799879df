// Buffers of megabytes (weights, KV caches) on transparent huge pages where the kernel offers
// them (THP "always" or "madvise"). Decode streams hundreds of megabytes per token: with 4 KiB
// pages every 4 KiB is a TLB miss and a point where the hardware prefetcher stops and has to
// find the stream again. Measured on the 2-vCPU EPYC, interleaved runs: all 28 Qwen3-0.6B
// layers' matrices, one row, 1 thread (bench/matmul_bench.cc DecodeLayers, huge pages through
// glibc's malloc tunable) Q8_0 20.6-24.4 -> 15.8-19.1 ms, Q4_K 9.4-10.4 -> 7.9-8.4 ms; the
// whole Q8_0 model, 2 threads, one row at 4096 positions (dflash bench --roofline) 60.0-62.9
// -> 52.3-57.7 ms.
//
// Small allocations go to operator new. Large ones are their own mapping, aligned to 2 MiB
// and advised MADV_HUGEPAGE; a partial huge page at the end stays 4 KiB pages, so no memory
// is spent on rounding. Where the kernel refuses the advice the buffer works the same, slower.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace dflash {

// Allocations of at least this many bytes are mapped on their own and advised huge pages.
constexpr size_t kHugePageBytes = size_t{2} << 20;

// Throws std::bad_alloc when the mapping fails; FreeHugeBuffer takes the same byte count.
void* AllocateHugeBuffer(size_t bytes);
void FreeHugeBuffer(void* p, size_t bytes);

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: allocators convert implicitly

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePageBytes) return static_cast<T*>(::operator new(bytes));
    return static_cast<T*>(AllocateHugeBuffer(bytes));
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePageBytes) {
      ::operator delete(p);
    } else {
      FreeHugeBuffer(p, bytes);
    }
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
};

// Owned bytes of weights and caches.
using ByteBuffer = std::vector<uint8_t, HugePageAllocator<uint8_t>>;

// A huge-page buffer whose pages stay untouched (zero, not resident) until written: an arena
// that many small matrices are packed into, so that they too sit on huge pages (one of
// Qwen3-0.6B's 1024 x 1024 Q8_0 matrices alone is 1.1 MiB, too small to get any).
class HugeBuffer {
 public:
  explicit HugeBuffer(size_t bytes) : data_(static_cast<uint8_t*>(AllocateHugeBuffer(bytes))), size_(bytes) {}
  ~HugeBuffer() { FreeHugeBuffer(data_, size_); }
  HugeBuffer(HugeBuffer&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr, o.size_ = 0; }
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;
  HugeBuffer& operator=(HugeBuffer&&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_;
  size_t size_;
};

}  // namespace dflash
