#include "serve/diagnostics.h"

#include <unistd.h>

#include <ctime>
#include <filesystem>

#include "core/error.h"
#include "core/peak_rss.h"
#include "serve/json_text.h"

namespace dflash::serve {

namespace {

// DIR/YYYYMMDD-HHMMSS-PID: runs never mix, and sort by start time.
std::string RunDir(const std::string& dir) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char name[64];
  std::strftime(name, sizeof name, "%Y%m%d-%H%M%S", &local);
  return dir + "/" + name + "-" + std::to_string(getpid());
}

}  // namespace

Diagnostics::Diagnostics(const std::string& dir, const nlohmann::ordered_json& config) : dir_(RunDir(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) Fail(dir_, ": cannot create the diagnostics directory: ", ec.message());
  log_.open(dir_ + "/requests.jsonl", std::ios::app);
  if (!log_) Fail(dir_, "/requests.jsonl: cannot open for writing");
  summary_ = {{"config", config},  {"requests", 0},     {"prompt_tokens", 0},   {"cached_tokens", 0},
              {"completion_tokens", 0}, {"cache_hits", 0}, {"wall_s", 0.0},     {"predicted_ms", 0.0},
              {"prompt_ms", 0.0},  {"draft_ms", 0.0},   {"verify_ms", 0.0},     {"draft_n", 0},
              {"draft_n_accepted", 0}, {"cycles", 0},   {"verified_rows", 0},   {"plain_steps", 0},
              {"fallbacks", 0},    {"probes", 0},       {"steps", 0},           {"step_experts", 0},
              {"verify_experts", 0}, {"finish_reasons", nlohmann::ordered_json::object()}};
}

void Diagnostics::Write(const nlohmann::ordered_json& r) {
  std::lock_guard<std::mutex> l(mu_);
  log_ << DumpJson(r) << "\n";
  log_.flush();
  nlohmann::ordered_json& s = summary_;
  const auto add = [&](const char* key, const nlohmann::ordered_json& v) {
    if (v.is_number_integer()) s[key] = s[key].get<int64_t>() + v.get<int64_t>();
    else if (v.is_number()) s[key] = s[key].get<double>() + v.get<double>();
  };
  s["requests"] = s["requests"].get<int64_t>() + 1;
  add("prompt_tokens", r["usage"]["prompt_tokens"]);
  add("cached_tokens", r["timings"]["cache_n"]);
  add("completion_tokens", r["usage"]["completion_tokens"]);
  add("cache_hits", r["cache_hit"].get<bool>() ? 1 : 0);
  add("wall_s", r["wall_ms"].get<double>() / 1000.0);
  add("predicted_ms", r["timings"]["predicted_ms"]);
  add("prompt_ms", r["timings"]["prompt_ms"]);
  add("draft_n", r["timings"]["draft_n"]);
  add("draft_n_accepted", r["timings"]["draft_n_accepted"]);
  for (const char* key : {"draft_ms", "verify_ms", "cycles", "verified_rows", "plain_steps", "fallbacks", "probes", "steps",
                          "step_experts", "verify_experts"}) {
    add(key, r["spec"][key]);
  }
  const std::string reason = r["finish_reason"].get<std::string>();
  s["finish_reasons"][reason] = s["finish_reasons"].value(reason, 0) + 1;
  const double predicted_ms = s["predicted_ms"].get<double>();
  s["mean_predicted_per_second"] = predicted_ms > 0 ? s["completion_tokens"].get<int64_t>() / (predicted_ms / 1000.0) : 0.0;
  const int64_t drafted = s["draft_n"].get<int64_t>();
  s["acceptance"] = drafted > 0 ? static_cast<double>(s["draft_n_accepted"].get<int64_t>()) / drafted : 0.0;
  const int64_t cycles = s["cycles"].get<int64_t>();
  s["verified_rows_per_cycle"] = cycles > 0 ? static_cast<double>(s["verified_rows"].get<int64_t>()) / cycles : 0.0;
  // A MoE target's distinct routed experts read per pass (summed over its sparse layers): a
  // verify's grows with its rows and costs what reading them costs.
  const int64_t steps = s["steps"].get<int64_t>();
  s["experts_per_step"] = steps > 0 ? static_cast<double>(s["step_experts"].get<int64_t>()) / steps : 0.0;
  s["experts_per_verify"] = cycles > 0 ? static_cast<double>(s["verify_experts"].get<int64_t>()) / cycles : 0.0;
  s["peak_rss_mib"] = PeakRssMiB();
  const std::string tmp = dir_ + "/summary.json.tmp";
  {
    std::ofstream out(tmp);
    out << DumpJson(s, 2) << "\n";
  }
  std::filesystem::rename(tmp, dir_ + "/summary.json");
}

}  // namespace dflash::serve
