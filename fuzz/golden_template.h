// A real chat template for the fuzz targets that feed it hostile values: Qwen3's, from the
// template goldens (tests/goldens/templates), read once per process.
#pragma once

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "text/chat_template.h"

namespace dflash::fuzz {

inline const ChatTemplate& Qwen3Template() {
  static const ChatTemplate t = [] {
    const std::string path = std::string(DFLASH_SOURCE_DIR) + "/tests/goldens/templates/Qwen-Qwen3-0.6B.json";
    std::ifstream in(path);
    const nlohmann::ordered_json golden = nlohmann::ordered_json::parse(in);
    return ChatTemplate({{"default", golden.at("template").get<std::string>()}}, golden.at("special_tokens"), path);
  }();
  return t;
}

// A fixed clock for strftime_now, so a render depends on the input alone.
inline jinja::RenderOptions FixedClock() {
  std::tm now{};
  now.tm_year = 2025 - 1900;
  now.tm_mon = 2;
  now.tm_mday = 14;
  return {now};
}

}  // namespace dflash::fuzz
