// The BPE model of a byte-level tokenizer.json: a word (raw bytes) starts as one symbol
// per byte and adjacent pairs merge in rank order until none is in the merge table. The
// vocabulary and merges are converted from the byte-level alphabet to bytes at load time,
// so encoding never touches the alphabet.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/json_file.h"

namespace dflash::text {

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object. Every byte must have its own token: a
  // byte-level vocabulary without one is broken, and failing here beats dropping bytes.
  static BpeModel FromJson(const JsonObject& model);

  // Appends the ids of one pre-tokenized word. Thread-safe.
  void Encode(std::string_view word, std::vector<int32_t>& out) const;

  // Vocabulary entries as tokenizer.json spells them (byte-level alphabet).
  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void MergeWord(std::string_view word, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t> vocab_;        // alphabet spelling -> id
  std::unordered_map<std::string, int32_t> bytes_to_id_;  // raw bytes -> id
  std::unordered_map<uint64_t, Merge> merges_;            // (left, right) -> rank, result
  int32_t byte_ids_[256];                                 // the one-byte tokens
  bool ignore_merges_ = false;

  // word -> ids for words seen before; text repeats words, so this is most of the speed.
  struct Cache {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>> map;
  };
  static constexpr size_t kCacheWords = 1 << 17;     // then new words are merged uncached
  static constexpr size_t kCacheMaxWordBytes = 128;  // long words rarely repeat
  std::unique_ptr<Cache> cache_ = std::make_unique<Cache>();
};

}  // namespace dflash::text
