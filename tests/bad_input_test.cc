// Broken checkpoints and bad flags: a clear error naming the file, tensor or field, a non-zero
// exit from the CLI, never a crash. Each case corrupts a fresh copy of a committed fixture.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "core/error.h"
#include "io/json_file.h"
#include "spec/engine.h"
#include "testing/files.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;

using testing::WriteAll;
const fs::path& kFixtures = testing::kFixturesDir;

// A fresh copy of the tiny pair as dir/target and dir/draft.
class BadInput : public testing::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    CopyFixture("qwen3-tiny", "target");
    CopyFixture("dflash-tiny", "draft");
  }

  // Rewrites the safetensors header of dir/which/model.safetensors through `edit`, keeping the data.
  void EditHeader(const std::string& which, const std::function<void(Json&)>& edit) {
    testing::EditSafetensorsHeader(dir_ / which / "model.safetensors", edit);
  }

  void EditConfig(const std::string& which, const std::function<void(Json&)>& edit) {
    testing::EditJsonFile(dir_ / which / "config.json", edit);
  }

  // Loading must throw an Error whose message contains every one of `needles`.
  void ExpectLoadError(std::initializer_list<std::string> needles, bool with_draft = true) {
    EngineOptions o;
    o.target_dir = (dir_ / "target").string();
    if (with_draft) o.draft_dir = (dir_ / "draft").string();
    o.context = 256;
    o.threads = 1;
    try {
      Engine engine(o);
      ADD_FAILURE() << "loading succeeded but should have failed";
    } catch (const Error& e) {
      for (const std::string& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  }
};

TEST_F(BadInput, MissingTensorIsNamed) {
  EditHeader("target", [](Json& h) { h.erase("model.layers.1.mlp.up_proj.weight"); });
  ExpectLoadError({"model.layers.1.mlp.up_proj.weight", "missing"});
}

TEST_F(BadInput, WrongShapeIsNamedWithBothShapes) {
  // Transposed: same bytes, so the file is valid but the tensor does not fit the config.
  EditHeader("target", [](Json& h) {
    Json& s = h["model.layers.0.mlp.gate_proj.weight"]["shape"];
    std::swap(s[0], s[1]);
  });
  ExpectLoadError({"model.layers.0.mlp.gate_proj.weight", "shape"});
}

TEST_F(BadInput, TruncatedSafetensorsNamesTheFile) {
  const fs::path file = dir_ / "target" / "model.safetensors";
  fs::resize_file(file, fs::file_size(file) / 2);
  ExpectLoadError({"model.safetensors"});
}

TEST_F(BadInput, GarbageHeaderNamesTheFile) {
  WriteAll(dir_ / "target" / "model.safetensors", std::string("\xff\xff\xff\xff\xff\xff\xff\x7f{", 9));
  ExpectLoadError({"model.safetensors"});
}

TEST_F(BadInput, DraftHiddenSizeMismatchIsNamed) {
  EditConfig("draft", [](Json& j) { j["hidden_size"] = j["hidden_size"].get<int>() * 2; });
  ExpectLoadError({"hidden_size"});
}

TEST_F(BadInput, DraftLayerIdBeyondTargetIsNamed) {
  EditConfig("draft", [](Json& j) { j["dflash_config"]["target_layer_ids"] = {0, 99}; });
  ExpectLoadError({"target_layer_ids", "99"});
}

TEST_F(BadInput, UnknownArchitectureIsNamed) {
  EditConfig("target", [](Json& j) { j["architectures"] = {"MambaForCausalLM"}; });
  ExpectLoadError({"MambaForCausalLM"}, /*with_draft=*/false);
}

TEST_F(BadInput, MalformedAndMissingConfig) {
  WriteAll(dir_ / "target" / "config.json", "{\"hidden_size\": 64,");
  ExpectLoadError({"config.json"}, false);
  fs::remove(dir_ / "target" / "config.json");
  ExpectLoadError({"config.json"}, false);
}

// The CLI turns every one of these into "error: ..." on stderr and exit status 1.
int RunCli(const std::string& args, std::string* err) {
  const std::string cmd = std::string(DFLASH_BINARY) + " " + args + " 2>&1 >/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[512];
  while (fgets(buf, sizeof buf, p)) *err += buf;
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(BadInput, CliExitsNonZeroWithMessage) {
  EditHeader("target", [](Json& h) { h.erase("model.norm.weight"); });
  std::string err;
  EXPECT_EQ(RunCli("generate -m " + (dir_ / "target").string() + " --prompt-ids 1,2 -n 2", &err), 1);
  EXPECT_NE(err.find("model.norm.weight"), std::string::npos) << err;
  err.clear();
  EXPECT_EQ(RunCli("generate -m " + (kFixtures / "qwen3-tiny").string() + " --prompt-ids 1,x", &err), 1);
  EXPECT_NE(err.find("--prompt-ids"), std::string::npos) << err;
  err.clear();
  EXPECT_EQ(RunCli("generate -m " + (kFixtures / "qwen3-tiny").string() + " --prompt-ids 1,99999 -n 2", &err), 1);
  EXPECT_NE(err.find("99999"), std::string::npos) << err;
  err.clear();
  EXPECT_EQ(RunCli("generate -m " + (kFixtures / "qwen3-tiny").string() + " --prompt-ids 1,2 --temp -1", &err), 1);
  EXPECT_NE(err.find("temp"), std::string::npos) << err;
  err.clear();
  EXPECT_EQ(RunCli("generate --bogus-flag", &err), 1);
  EXPECT_NE(err.find("--bogus-flag"), std::string::npos) << err;
  err.clear();
  EXPECT_EQ(RunCli("generate -m /nonexistent/dir --prompt-ids 1", &err), 1);
  EXPECT_NE(err.find("/nonexistent/dir"), std::string::npos) << err;
}

TEST_F(BadInput, PromptOverContextIsRejected) {
  std::string ids = "1";
  for (int i = 0; i < 300; ++i) ids += ",1";
  std::string err;
  EXPECT_EQ(RunCli("generate -m " + (kFixtures / "qwen3-tiny").string() + " --ctx 128 -n 4 --prompt-ids " + ids, &err), 1);
  EXPECT_NE(err.find("context"), std::string::npos) << err;
}

}  // namespace
}  // namespace dflash
