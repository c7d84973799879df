// File and error helpers the bad-input tests share: whole-file reads and writes, rewriting a
// safetensors header in place, a per-test scratch directory, and the message of an expected Error.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>

#include "core/error.h"
#include "io/json_file.h"

namespace dflash::testing {

namespace fs = std::filesystem;

inline const fs::path kTestsDir = fs::path(DFLASH_SOURCE_DIR) / "tests";
inline const fs::path kFixturesDir = kTestsDir / "fixtures";

inline std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteAll(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
}

// Writes a safetensors file from its header text and data bytes (the header's length is not
// checked against anything: tests use this to write broken files).
inline void WriteSafetensors(const fs::path& file, const std::string& header, const std::string& data) {
  const uint64_t n = header.size();
  WriteAll(file, std::string(reinterpret_cast<const char*>(&n), 8) + header + data);
}

// Rewrites the JSON header of a safetensors file through `edit`, keeping its data bytes.
inline void EditSafetensorsHeader(const fs::path& file, const std::function<void(Json&)>& edit) {
  const std::string bytes = ReadAll(file);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  Json header = Json::parse(bytes.substr(8, n));
  edit(header);
  WriteSafetensors(file, header.dump(), bytes.substr(8 + n));
}

inline void EditJsonFile(const fs::path& file, const std::function<void(Json&)>& edit) {
  Json j = Json::parse(ReadAll(file));
  edit(j);
  WriteAll(file, j.dump(2));
}

// The message of the Error `f` throws; fails the test when it throws nothing.
inline std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

inline void ExpectMentions(const std::string& msg, std::initializer_list<std::string> needles) {
  for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
}

// An empty directory for the running test, removed when it ends.
class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dflash_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A fresh copy of a committed fixture under the scratch directory, as `as` (default: its name).
  fs::path CopyFixture(const std::string& fixture, const std::string& as = "") {
    if (!fs::exists(kFixturesDir / fixture)) ADD_FAILURE() << "fixture " << fixture << " missing: run `make goldens`";
    const fs::path to = dir_ / (as.empty() ? fixture : as);
    fs::copy(kFixturesDir / fixture, to, fs::copy_options::recursive);
    return to;
  }

  fs::path dir_;
};

}  // namespace dflash::testing
