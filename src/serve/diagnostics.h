// --diagnostics DIR: one JSON line per generation request in DIR/requests.jsonl (usage and
// timing fields, TTFT, wall time, finish reason, cache hit, peak memory) and DIR/summary.json,
// rewritten after every request, with totals and means over the run.
#pragma once

#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace dflash::serve {

class Diagnostics {
 public:
  explicit Diagnostics(const std::string& dir);  // creates DIR; throws Error when it cannot
  void Write(const nlohmann::ordered_json& record);

 private:
  std::mutex mu_;
  std::string dir_;
  std::ofstream log_;
  nlohmann::ordered_json summary_;
};

// Peak resident memory of this process, in MiB (getrusage).
double PeakRssMiB();

}  // namespace dflash::serve
