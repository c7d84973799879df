// What every fuzz target shares. The loaders take paths, so a target writes its input into a
// scratch directory of its own (one per process, reused for every input) and loads that. For
// bad input the only acceptable outcome is the project's clean error; anything else (another
// exception, a sanitizer report, a hang, a huge allocation) escapes to libFuzzer as a finding.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/tensor_store.h"

namespace dflash::fuzz {

namespace fs = std::filesystem;

// Inputs that stand for several files (a model directory) put this line between them; the
// seeds in fuzz/corpus carry it, so mutations mostly keep it.
inline constexpr std::string_view kFileSeparator = "\n--dflash-fuzz-next-file--\n";

// Created on first use, removed when the process exits normally (a crash leaves it for
// inspection, next to the crash's input).
inline const fs::path& ScratchDir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("dflash-fuzz-" + std::to_string(getpid()));
    fs::create_directories(d);
    std::atexit([] { std::error_code ignored; fs::remove_all(ScratchDir(), ignored); });
    return d;
  }();
  return dir;
}

// Empties the scratch directory, so no file of the previous input is read with this one.
inline void ClearScratch() {
  for (const auto& entry : fs::directory_iterator(ScratchDir())) fs::remove_all(entry.path());
}

// Writes `bytes` to ScratchDir()/name and returns the path.
inline std::string WriteScratch(const std::string& name, std::string_view bytes) {
  const fs::path path = ScratchDir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path.string();
}

// Links ScratchDir()/name to a file of the source tree (fixture weights the input does not carry).
inline void LinkScratch(const std::string& name, const std::string& source_relative) {
  fs::create_symlink(fs::path(DFLASH_SOURCE_DIR) / source_relative, ScratchDir() / name);
}

// The input cut at kFileSeparator; the last part takes the rest, separators included, so
// the parts always cover the whole input and there are at most `max_parts`.
inline std::vector<std::string_view> SplitFiles(std::string_view input, size_t max_parts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    const size_t at = input.find(kFileSeparator);
    if (at == std::string_view::npos) break;
    parts.push_back(input.substr(0, at));
    input.remove_prefix(at + kFileSeparator.size());
  }
  parts.push_back(input);
  return parts;
}

// Runs `load`; throwing `Clean` (dflash::Error unless named) counts as handling bad input.
template <typename Clean = Error, typename F>
void ExpectCleanError(F&& load) {
  try {
    std::forward<F>(load)();
  } catch (const Clean&) {
  }
}

// Reads every byte of every tensor in `store`, so a data pointer or size past its file is
// caught here (ASan, or SIGSEGV past the mapping) rather than in some later kernel.
// The sum goes to a volatile so the reads are not optimised away.
inline volatile unsigned touched_sum = 0;
inline void TouchTensors(const TensorStore& store) {
  unsigned sum = 0;
  for (const std::string& name : store.Names()) {
    const Tensor& t = *store.Find(name);
    for (size_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
  }
  touched_sum = sum;
}

// The input as bytes to write or parse.
inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace dflash::fuzz
