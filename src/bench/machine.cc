#include "bench/machine.h"


#include <fstream>
#include <thread>

#include "ops/amx.h"
#include "ops/ops.h"

namespace dflash {

namespace {
// The value after "key:" on the first /proc line starting with key, trimmed.
std::string ProcField(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}
}  // namespace

MachineInfo DescribeMachine() {
  MachineInfo m;
  m.cpu = ProcField("/proc/cpuinfo", "model name");
  if (m.cpu.empty()) m.cpu = "unknown";
  // "model\t\t: 2": the key with its tab, so that "model name" does not match.
  const std::string family = ProcField("/proc/cpuinfo", "cpu family"), model = ProcField("/proc/cpuinfo", "model\t");
  if (!family.empty() && !model.empty()) m.cpu += " (family " + family + " model " + model + ")";
  m.hardware_threads = static_cast<int>(std::thread::hardware_concurrency());
  m.simd_target = ops::SimdTargetName();
  if (ops::AmxActive()) m.simd_target += "+AMX";
  if (ops::Bf16DotActive()) m.simd_target += "+BF16";
  const std::string mem = ProcField("/proc/meminfo", "MemTotal");  // "24576000 kB"
  if (!mem.empty()) m.memory_gb = std::stod(mem) / (1024.0 * 1024.0);
  return m;
}

Json MachineJson(const MachineInfo& m, int threads) {
  return Json{{"cpu", m.cpu},
              {"hardware_threads", m.hardware_threads},
              {"threads", threads},
              {"simd_target", m.simd_target},
              {"memory_gb", m.memory_gb}};
}

}  // namespace dflash
