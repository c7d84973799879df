// The prefix cache's disk tier (--cache-dir, --cache-disk): sequences (the tokens, the target's
// state of their used length, the draft's context rows) saved as one file each, so that a
// restarted server, or another server on the same directory, reuses a long prompt's prefix.
//
// A file is DIR/<identity hash>-<tokens hash>.dfseq:
//   header (40 bytes):     magic "DFSEQ\0\0\1", u32 format version, u32 tokens,
//                          u64 identity hash, u64 payload bytes, u64 payload checksum
//   payload:               tokens (i32 each), TargetState::Save, DraftContext::Save
// The identity (DiskCacheIdentity) names everything the saved bytes depend on: the model files
// (name, size, mtime, a hash of their headers), the binary, the kernels chosen for this CPU, the
// quantisation and the KV type. Nothing in a file is trusted: magic, version, identity, size and
// checksum are checked before its bytes reach a sequence, and each size inside is checked again
// as it is read; a file that fails is ignored with a warning (the request then prefills).
// Servers sharing a directory write under flock(DIR/.lock) to a temporary name and rename it
// in place, so a reader sees a whole file or none. The directory stays under its bound: files
// are evicted least recently used first (a hit refreshes the file's mtime, which orders them).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "spec/engine.h"

namespace dflash::serve {

inline constexpr uint32_t kDiskCacheVersion = 1;
inline constexpr size_t kDiskCacheHeaderBytes = 40;

// A 64-bit checksum that can be fed in pieces of any size (the same result as one piece).
class Checksum {
 public:
  void Add(const void* data, size_t n);
  uint64_t Value() const;

 private:
  void Word(uint64_t w);
  uint64_t h_ = 0x243f6a8885a308d3ull, length_ = 0;
  uint8_t tail_[8] = {};
  int tail_n_ = 0;
};

// What a saved sequence's bytes depend on, as text (one "name: value" per line).
std::string DiskCacheIdentity(const Engine& engine);

struct DiskCacheCounters {
  uint64_t files_read = 0, files_written = 0, bytes_read = 0, bytes_written = 0, rejected = 0, evicted = 0;
};

class DiskCache {
 public:
  // Creates `dir` if needed. `identity`: DiskCacheIdentity(engine) (tests pass their own).
  DiskCache(const Engine& engine, std::string dir, uint64_t max_bytes, const std::string& identity);

  struct Match {
    std::string file;  // empty: none
    int common = 0;    // tokens its sequence shares with the prompt, at most prompt.size() - 1
  };
  // The saved sequence sharing the longest prefix with `prompt`.
  Match Find(std::span<const int32_t> prompt);
  // Reads `m` into `seq` (its previous contents are lost). False, with a warning on stderr and
  // `seq` left empty, when the file is missing or is not a valid sequence of this engine.
  bool Load(const Match& m, Sequence& seq);
  // Writes `seq` unless it is too short to be worth a file, a file holds it already, or it
  // does not fit the bound; evicts the least recently used files to make room.
  void Save(const Sequence& seq);

  DiskCacheCounters counters() const;
  // Prometheus lines: hits, files and bytes read and written, rejected and evicted files.
  std::string RenderMetrics() const;
  const std::string& dir() const { return dir_; }

  // Sequences shorter than this are not written: their prefill costs less than a file.
  static constexpr int kMinTokens = 64;

 private:
  struct Entry {
    int64_t size = 0, mtime_ns = 0;
    bool usable = false;          // header read and identity ours
    std::vector<int32_t> tokens;  // when usable
  };
  void Scan();  // with mu_ held: refreshes index_ from the directory
  Entry ReadEntry(const std::string& name, int64_t size, int64_t mtime_ns);
  void Warn(const std::string& file, const std::string& why);
  void Reject(const std::string& file, const std::string& why);  // Warn, and Find skips it
  void Evict(uint64_t room);  // with the directory lock held
  std::string NameFor(std::span<const int32_t> tokens) const;
  uint64_t SavedBytes(const Sequence& seq) const;

  const Engine& engine_;
  std::string dir_;
  uint64_t max_bytes_;
  uint64_t identity_hash_;
  std::mutex mu_;  // index_ and writes
  std::map<std::string, Entry> index_;
  mutable std::mutex counters_mu_;
  DiskCacheCounters counters_;
};

}  // namespace dflash::serve
