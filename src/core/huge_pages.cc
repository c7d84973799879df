#include "core/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

namespace dflash {
namespace {

size_t PageRounded(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

void* AllocateHugeBuffer(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t len = PageRounded(bytes);
  // Map a huge page more than needed, then unmap what lies before the first 2 MiB boundary
  // and after the buffer: the kernel can only back 2 MiB-aligned ranges with huge pages.
  const size_t reserve = len + kHugePageBytes;
  void* raw = mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = aligned + len, reserve_end = start + reserve;
  if (reserve_end > end) munmap(reinterpret_cast<void*>(end), reserve_end - end);
  madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);  // advice: refusal is fine
  return reinterpret_cast<void*>(aligned);
}

void FreeHugeBuffer(void* p, size_t bytes) {
  if (p) munmap(p, PageRounded(bytes));
}

}  // namespace dflash
