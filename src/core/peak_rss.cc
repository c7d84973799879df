#include "core/peak_rss.h"

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace dflash {

double PeakRssMiB() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      double kib = 0;
      if (status >> kib) return kib / 1024.0;
      break;
    }
    status.ignore(1 << 20, '\n');
  }
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

}  // namespace dflash
