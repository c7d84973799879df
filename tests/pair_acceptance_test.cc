// Per-cycle acceptance on the shipped pair against z-lab's own dflash_generate
// (tests/goldens/pair_acceptance.json, tools/make_pair_acceptance_goldens.py). The fixture drafts
// accept almost nothing, so their cycle-by-cycle comparison (golden_test) never rolls back after
// a partial acceptance; the shipped draft accepts at 11 lengths in 1..16 here (1-8, 11, 13, 16),
// so a wrong context row, position or rollback after a verify changes some cycle's length.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "io/json_file.h"
#include "spec/engine.h"
#include "testing/goldens.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = fs::path(DFLASH_SOURCE_DIR);

const Json& Goldens() {
  static const Json g = ReadJsonFile((kSource / "tests" / "goldens" / "pair_acceptance.json").string());
  return g;
}

TEST(PairAcceptance, PerCycleLengthsMatchZlab) {
  const Json& g = Goldens();
  EngineOptions eo;
  eo.target_dir = (kSource / g["pair"].get<std::string>() / "target").string();
  eo.draft_dir = (kSource / g["pair"].get<std::string>() / "draft").string();
  eo.context = 512;
  eo.kv_type = DType::kF32;  // z-lab ran in float32 on the stored weights, as this path does
  eo.prefill_chunk = 16;     // several chunks: the draft context is appended in pieces too
  Engine engine(eo);
  GenerateOptions go;
  go.max_new_tokens = g["max_new_tokens"].get<int>();
  go.ignore_stop = true;
  go.block_size = g["block_size"].get<int>();
  go.policy = SpecPolicy::kAlways;  // z-lab speculates every cycle
  std::set<int> lengths;
  for (const Json& p : g["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    std::vector<int> per_commit;
    const GenerateResult r = engine.Generate(p["prompt_ids"].get<std::vector<int32_t>>(), go,
                                             [&](std::span<const int32_t> t) {
                                               per_commit.push_back(static_cast<int>(t.size()));
                                               return true;
                                             });
    EXPECT_EQ(r.tokens, p["output"].get<std::vector<int32_t>>());
    const std::vector<int32_t> zlab = p["acceptance_lengths"].get<std::vector<int32_t>>();
    const int compared = testing::ExpectUnclampedCyclesMatch(per_commit, zlab, go.max_new_tokens, go.block_size);
    EXPECT_GT(compared, 0);
    lengths.insert(zlab.begin(), zlab.begin() + compared);
  }
  // What makes the comparison worth having: many distinct partial acceptances.
  EXPECT_GE(lengths.size(), 11u);
}

}  // namespace
}  // namespace dflash
