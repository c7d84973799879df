// The prefix cache's disk tier: a saved sequence reads back to the same bytes and continues
// exactly as a fresh generation; every validation path rejects a bad file (and leaves the
// sequence empty, never half loaded); the directory stays under its bound.
#include "serve/disk_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace dflash::serve {
namespace {

namespace fs = std::filesystem;

struct PairPaths {
  const char* name;
  fs::path target, draft;
};

const fs::path kSource = DFLASH_SOURCE_DIR;
const PairPaths kDense{"dense", kSource / "models/dflash-pair/target", kSource / "models/dflash-pair/draft"};
const PairPaths kHybrid{"hybrid", kSource / "tests/fixtures/qwen35-tiny", kSource / "tests/fixtures/dflash-qwen35"};

Engine MakeEngine(const PairPaths& p) {
  EngineOptions o;
  o.target_dir = p.target.string();
  o.draft_dir = p.draft.string();
  o.context = 256;
  o.threads = 1;
  o.kv_type = DType::kF16;
  return Engine(o);
}

GenerateOptions Greedy(const Engine& e, int n) {
  GenerateOptions g;
  g.max_new_tokens = n;
  g.ignore_stop = true;
  g.block_size = e.draft_config()->block_size;
  g.policy = SpecPolicy::kAlways;
  return g;
}

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(3 + (i * 37 + salt * 101) % 250);
  return p;
}

std::vector<uint8_t> Bytes(const Sequence& s, bool draft) {
  std::vector<uint8_t> b;
  const ByteSink out = [&](const void* d, size_t n) {
    b.insert(b.end(), static_cast<const uint8_t*>(d), static_cast<const uint8_t*>(d) + n);
  };
  s.target->Save(out);
  if (draft) s.draft.Save(out);
  return b;
}

std::vector<uint8_t> ReadFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

void WriteFile(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Rewrites the header's checksum to match a modified payload: a file that passes the checksum
// but lies about its sizes.
void Reseal(std::vector<uint8_t>& file) {
  Checksum c;
  c.Add(file.data() + kDiskCacheHeaderBytes, file.size() - kDiskCacheHeaderBytes);
  const uint64_t v = c.Value();
  std::memcpy(file.data() + 32, &v, 8);
}

class DiskCacheTest : public ::testing::TestWithParam<PairPaths> {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("disk_cache_" + std::string(GetParam().name) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<fs::path> Files() const {
    std::vector<fs::path> f;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == ".dfseq") f.push_back(e.path());
    }
    return f;
  }

  fs::path dir_;
};

// Saved, found and loaded: the same bytes, and a longer prompt continues from it exactly as a
// fresh generation does.
TEST_P(DiskCacheTest, RoundTripIsBitExactAndContinuesAsFresh) {
  Engine engine = MakeEngine(GetParam());
  const GenerateOptions g = Greedy(engine, 24);
  const std::vector<int32_t> turn1 = Prompt(90, 1);
  Sequence seq = engine.NewSequence();
  const GenerateResult r1 = engine.Continue(seq, turn1, g);
  DiskCache cache(engine, dir_.string(), 64 << 20, "identity A");
  cache.Save(seq);
  ASSERT_EQ(Files().size(), 1u);
  EXPECT_EQ(cache.counters().files_written, 1u);
  EXPECT_EQ(cache.counters().bytes_written, fs::file_size(Files()[0]));

  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), r1.tokens.begin(), r1.tokens.end());
  const std::vector<int32_t> more = Prompt(20, 2);
  turn2.insert(turn2.end(), more.begin(), more.end());
  DiskCache other(engine, dir_.string(), 64 << 20, "identity A");  // a second server
  const DiskCache::Match m = other.Find(turn2);
  EXPECT_EQ(m.common, static_cast<int>(seq.tokens.size()));
  Sequence loaded = engine.NewSequence();
  ASSERT_TRUE(other.Load(m, loaded));
  EXPECT_EQ(loaded.tokens, seq.tokens);
  EXPECT_EQ(Bytes(loaded, true), Bytes(seq, true));
  EXPECT_EQ(other.counters().bytes_read, fs::file_size(Files()[0]));

  const GenerateResult warm = engine.Continue(loaded, turn2, g);
  EXPECT_GT(warm.stats.cached_tokens, 0);
  EXPECT_EQ(warm.tokens, engine.Generate(turn2, g).tokens);

  // The same tokens again: not written twice.
  cache.Save(seq);
  EXPECT_EQ(Files().size(), 1u);
  EXPECT_EQ(cache.counters().files_written, 1u);
}

// Each way a file can be wrong is caught before its bytes are used; the sequence is left
// empty and the rejection counted.
TEST_P(DiskCacheTest, EveryValidationPathRejects) {
  Engine engine = MakeEngine(GetParam());
  const std::vector<int32_t> prompt = Prompt(100, 3);
  Sequence seq = engine.NewSequence();
  engine.Continue(seq, prompt, Greedy(engine, 8));
  DiskCache writer(engine, dir_.string(), 64 << 20, "identity A");
  writer.Save(seq);
  ASSERT_EQ(Files().size(), 1u);
  const fs::path file = Files()[0];
  const std::vector<uint8_t> good = ReadFile(file);
  const size_t payload = kDiskCacheHeaderBytes;
  const size_t target_state = payload + seq.tokens.size() * 4;

  struct Case {
    const char* what;
    std::function<void(std::vector<uint8_t>&)> spoil;
    bool found;  // whether Find still offers it (the index reads only the header and tokens)
  };
  const auto i32_at = [](std::vector<uint8_t>& b, size_t at, int32_t v) { std::memcpy(b.data() + at, &v, 4); };
  const std::vector<Case> cases = {
      {"truncated", [](std::vector<uint8_t>& b) { b.resize(b.size() - 100); }, false},
      {"header only", [](std::vector<uint8_t>& b) { b.resize(20); }, false},
      {"bad magic", [](std::vector<uint8_t>& b) { b[0] ^= 1; }, false},
      {"other version", [&](std::vector<uint8_t>& b) { i32_at(b, 8, kDiskCacheVersion + 1); }, false},
      {"too many tokens", [&](std::vector<uint8_t>& b) { i32_at(b, 12, 1 << 20); }, false},
      {"tampered byte", [](std::vector<uint8_t>& b) { b[b.size() - 7] ^= 0x40; }, true},
      {"tampered token", [&](std::vector<uint8_t>& b) { b[payload + 8] ^= 1; }, true},
      {"token outside the vocabulary, resealed", [&](std::vector<uint8_t>& b) { i32_at(b, payload + 4, 1 << 30); Reseal(b); }, true},
      {"KV heads, resealed", [&](std::vector<uint8_t>& b) { i32_at(b, target_state + 4, 99); Reseal(b); }, true},
      {"KV positions over capacity, resealed", [&](std::vector<uint8_t>& b) { i32_at(b, target_state + 12, 1 << 20); Reseal(b); }, true},
      {"KV positions negative, resealed", [&](std::vector<uint8_t>& b) { i32_at(b, target_state + 12, -5); Reseal(b); }, true},
      {"KV positions fewer than tokens, resealed", [&](std::vector<uint8_t>& b) { i32_at(b, target_state + 12, 10); Reseal(b); }, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<uint8_t> bad = good;
    c.spoil(bad);
    WriteFile(file, bad);
    DiskCache reader(engine, dir_.string(), 64 << 20, "identity A");
    const DiskCache::Match m = reader.Find(prompt);
    EXPECT_EQ(!m.file.empty(), c.found);
    if (m.file.empty()) {
      EXPECT_EQ(reader.counters().rejected, 1u);
      continue;
    }
    Sequence into = engine.NewSequence();
    EXPECT_FALSE(reader.Load(m, into));
    EXPECT_TRUE(into.tokens.empty());
    EXPECT_EQ(into.target->length(), 0);
    EXPECT_EQ(into.draft.length, 0);
    EXPECT_EQ(reader.counters().rejected, 1u);
    EXPECT_EQ(reader.counters().files_read, 0u);
    // Rejected once, not offered again.
    EXPECT_TRUE(reader.Find(prompt).file.empty());
  }

  // Another model's or settings' file (another identity) is not offered.
  WriteFile(file, good);
  DiskCache foreign(engine, dir_.string(), 64 << 20, "identity B");
  EXPECT_TRUE(foreign.Find(prompt).file.empty());
  EXPECT_EQ(foreign.counters().rejected, 1u);
  // The intact file loads.
  DiskCache reader(engine, dir_.string(), 64 << 20, "identity A");
  Sequence into = engine.NewSequence();
  EXPECT_TRUE(reader.Load(reader.Find(prompt), into));
  EXPECT_EQ(into.tokens, seq.tokens);
}

// A state's Load given a stream that ends early throws and leaves the state empty.
TEST_P(DiskCacheTest, ShortStreamLeavesAnEmptyState) {
  Engine engine = MakeEngine(GetParam());
  Sequence seq = engine.NewSequence();
  engine.Continue(seq, Prompt(80, 4), Greedy(engine, 8));
  const std::vector<uint8_t> bytes = Bytes(seq, false);
  for (const size_t keep : {size_t{3}, size_t{16}, bytes.size() / 2, bytes.size() - 1}) {
    size_t at = 0;
    const ByteSource in = [&](void* d, size_t n) {
      if (n > keep - std::min(at, keep)) Fail("short");
      std::memcpy(d, bytes.data() + at, n);
      at += n;
    };
    Sequence into = engine.NewSequence();
    EXPECT_THROW(into.target->Load(in), Error) << keep;
    EXPECT_EQ(into.target->length(), 0);
  }
}

// Many sequences through a small bound: the directory never exceeds it, and the most recently
// used files are the ones kept.
TEST_P(DiskCacheTest, SizeBoundEvictsLeastRecentlyUsed) {
  Engine engine = MakeEngine(GetParam());
  Sequence seq = engine.NewSequence();
  engine.Continue(seq, Prompt(100, 5), Greedy(engine, 4));
  uint64_t one = 0;
  {
    DiskCache probe(engine, (dir_ / "probe").string(), 1 << 30, "x");
    probe.Save(seq);
    one = probe.counters().bytes_written;
  }
  fs::remove_all(dir_ / "probe");
  const uint64_t bound = one * 5 / 2;  // room for two files
  DiskCache cache(engine, dir_.string(), bound, "identity A");
  std::vector<std::vector<int32_t>> saved;
  for (int i = 0; i < 6; ++i) {
    Sequence s = engine.NewSequence();
    saved.push_back(Prompt(100, 10 + i));
    engine.Continue(s, saved.back(), Greedy(engine, 4));
    cache.Save(s);
    uint64_t total = 0;
    for (const auto& e : fs::directory_iterator(dir_)) total += e.is_regular_file() ? e.file_size() : 0;
    EXPECT_LE(total, bound);
  }
  EXPECT_EQ(Files().size(), 2u);
  EXPECT_EQ(cache.counters().evicted, 4u);
  EXPECT_TRUE(cache.Find(saved[0]).file.empty());
  EXPECT_FALSE(cache.Find(saved[5]).file.empty());
  // A file larger than the whole bound is not written.
  DiskCache tiny(engine, (dir_ / "tiny").string(), one / 2, "identity A");
  tiny.Save(seq);
  EXPECT_EQ(tiny.counters().files_written, 0u);
}

INSTANTIATE_TEST_SUITE_P(Pairs, DiskCacheTest, ::testing::Values(kDense, kHybrid),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Checksum, PiecesGiveTheSameValueAsOneAndEveryByteCounts) {
  std::vector<uint8_t> b(1000);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 7 + 3);
  Checksum whole;
  whole.Add(b.data(), b.size());
  Checksum parts;
  for (size_t at = 0, n = 1; at < b.size(); at += n, n = n % 13 + 1) parts.Add(b.data() + at, std::min(n, b.size() - at));
  EXPECT_EQ(parts.Value(), whole.Value());
  for (size_t i : {size_t{0}, size_t{500}, size_t{999}}) {
    std::vector<uint8_t> c = b;
    c[i] ^= 1;
    Checksum changed;
    changed.Add(c.data(), c.size());
    EXPECT_NE(changed.Value(), whole.Value()) << i;
  }
  Checksum shorter;
  shorter.Add(b.data(), b.size() - 1);
  EXPECT_NE(shorter.Value(), whole.Value());
}

}  // namespace
}  // namespace dflash::serve
