// What a benchmark records about the machine it ran on, so numbers can be compared honestly.
#pragma once

#include <string>

#include "io/json_file.h"

namespace dflash {

struct MachineInfo {
  // /proc/cpuinfo model name and, since a virtual machine's name often omits the generation
  // ("AMD EPYC"), its family and model numbers: "AMD EPYC (family 26 model 2)".
  std::string cpu;
  int hardware_threads = 0;
  std::string simd_target;  // Highway target chosen at run time, "+AMX" / "+BF16" where tiles / bf16 dot products are used
  double memory_gb = 0;     // MemTotal
};

MachineInfo DescribeMachine();
Json MachineJson(const MachineInfo& m, int threads);

}  // namespace dflash
