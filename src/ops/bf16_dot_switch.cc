// Whether bf16 caches may take attention's bf16 dot path (ops.h: Bf16DotActive). By default on
// AMD and on CPUs with AMX-BF16: on the Xeon (Sapphire Rapids) of 2026-12-06 vdpbf16ps attention
// measured slower than the f32 FMA path at every row count (README), while on Zen 5 it cut a
// 16-row pass at 4k keys by a third (attention 43%); Zen 4 has the instruction too but was not
// measured. Where the CPU has AMX-BF16, the path's dot products are tile dot products
// (ops/attention_amx-inl.h), which beat the f32 path on that Xeon (bench/README.md).
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "ops/amx.h"
#include "ops/ops.h"

namespace dflash::ops {
namespace {

std::atomic<bool>& Allowed() {
  static std::atomic<bool> allowed{[] {
    const char* env = std::getenv("DFLASH_BF16_DOT");
    if (env && *env) return std::strcmp(env, "0") != 0;
    return __builtin_cpu_is("amd") || AmxBf16Supported();
  }()};
  return allowed;
}

}  // namespace

bool Bf16DotAllowed() { return Allowed().load(std::memory_order_relaxed); }
void SetBf16DotAllowed(bool allowed) { Allowed().store(allowed, std::memory_order_relaxed); }

}  // namespace dflash::ops
