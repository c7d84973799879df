// AMX run-time checks. The kernel itself is per SIMD target, in ops/matmul_quant.cc.
#include "ops/amx.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace dflash::ops {
namespace {

bool DetectAmx() {
#if defined(__x86_64__) && defined(__linux__)
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool tile = (edx >> 24) & 1, int8 = (edx >> 25) & 1;
  if (!tile || !int8) return false;
  // Linux keeps the 8 KiB tile state off until a process asks for it; without this the first
  // tile instruction faults.
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

std::atomic<bool>& Allowed() {
  static std::atomic<bool> allowed{[] {
    const char* env = std::getenv("DFLASH_AMX");
    return !(env && std::strcmp(env, "0") == 0);
  }()};
  return allowed;
}

}  // namespace

bool AmxSupported() {
  static const bool supported = DetectAmx();
  return supported;
}

void SetAmxAllowed(bool allowed) { Allowed().store(allowed, std::memory_order_relaxed); }
bool AmxAllowed() { return Allowed().load(std::memory_order_relaxed); }
bool AmxActive() { return AmxAllowed() && AmxSupported(); }

bool AmxBf16Supported() {
  static const bool supported = [] {
#if defined(__x86_64__) && defined(__linux__)
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    return ((edx >> 22) & 1) && AmxSupported();
#else
    return false;
#endif
  }();
  return supported;
}

TileConfig& LoadedTileConfig() {
  thread_local TileConfig loaded = TileConfig::kNone;
  return loaded;
}

}  // namespace dflash::ops
