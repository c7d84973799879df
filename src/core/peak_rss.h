// The peak resident memory of this process, for reports and diagnostics.
#pragma once

namespace dflash {

// In MiB: VmHWM from /proc/self/status, else getrusage's ru_maxrss. VmHWM first because Linux
// carries ru_maxrss across exec, so a process started by a large parent (a test runner, a
// benchmark script) would report the parent's peak as its own.
double PeakRssMiB();

}  // namespace dflash
