// CPU features that kernels check at run time beyond what the Highway target implies (AVX3_DL,
// for one, does not imply AVX512_BF16: Ice Lake lacks it). ops/amx.h has the AMX checks.
#pragma once

namespace dflash::ops {

inline bool CpuHasAvx512Bf16() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

}  // namespace dflash::ops
