// --diagnostics DIR: each server run writes into a folder of its own, DIR/YYYYMMDD-HHMMSS-PID:
// requests.jsonl, one JSON line per generation request (usage and timing fields, TTFT, wall
// time, finish reason, cache hit, the speculation counters, peak memory), and summary.json,
// rewritten after every request, with the run's configuration, totals and means.
#pragma once

#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace dflash::serve {

class Diagnostics {
 public:
  // Creates the run's folder under `dir`; throws Error when it cannot. `config`: the settings
  // of the run (model pair, block size, quantisations, ...), copied into summary.json.
  Diagnostics(const std::string& dir, const nlohmann::ordered_json& config);
  void Write(const nlohmann::ordered_json& record);
  const std::string& dir() const { return dir_; }

 private:
  std::mutex mu_;
  std::string dir_;
  std::ofstream log_;
  nlohmann::ordered_json summary_;
};

}  // namespace dflash::serve
