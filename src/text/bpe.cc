#include "text/bpe.h"

#include <queue>

#include "text/byte_level.h"
#include "text/utf8.h"

namespace dflash::text {

namespace {

// A Json string that must hold a vocabulary entry; names the field on failure.
std::string TokenString(const Json& v, const std::string& where) {
  if (!v.is_string()) Fail(where, ": expected a string, got ", JsonSummary(v));
  return v.get<std::string>();
}

void RequireEmptyOrNull(const JsonObject& model, const std::string& key) {
  if (model.Has(key) && model.Get<std::string>(key) != "") {
    Fail(model.where(), ": field '", key, "' = '", model.Get<std::string>(key),
         "' is not supported by byte-level BPE");
  }
}

}  // namespace

BpeModel BpeModel::FromJson(const JsonObject& model) {
  BpeModel m;
  const std::string type = model.Get<std::string>("type", "BPE");
  if (type != "BPE") Fail(model.where(), ": model type '", type, "' is not supported (BPE only)");
  if (model.Has("dropout") && model.Get<double>("dropout") != 0.0) {
    Fail(model.where(), ": field 'dropout' must be null or 0 (dropout makes encoding random)");
  }
  if (model.Get<bool>("byte_fallback", false)) {
    Fail(model.where(), ": field 'byte_fallback' = true is not supported by byte-level BPE");
  }
  RequireEmptyOrNull(model, "continuing_subword_prefix");
  RequireEmptyOrNull(model, "end_of_word_suffix");
  m.ignore_merges_ = model.Get<bool>("ignore_merges", false);

  if (!model.Has("vocab") || !model.raw().at("vocab").is_object()) {
    Fail(model.where(), ": field 'vocab' is missing or not an object");
  }
  const Json& vocab = model.raw().at("vocab");
  m.vocab_.reserve(vocab.size());
  m.bytes_to_id_.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      Fail(model.where(), ".vocab: token '", token, "' has invalid id ", JsonSummary(id));
    }
    const auto tid = static_cast<int32_t>(id.get<int64_t>());
    m.vocab_.emplace(token, tid);
    if (auto bytes = CharsToBytes(token)) m.bytes_to_id_.emplace(std::move(*bytes), tid);
  }
  for (int b = 0; b < 256; ++b) {
    auto it = m.bytes_to_id_.find(std::string(1, static_cast<char>(b)));
    if (it == m.bytes_to_id_.end()) {
      std::string spelled;
      AppendUtf8(spelled, ByteToChar(static_cast<unsigned char>(b)));
      Fail(model.where(), ".vocab: no token for byte 0x", "0123456789abcdef"[b >> 4],
           "0123456789abcdef"[b & 15], " ('", spelled, "'); not a byte-level vocabulary");
    }
    m.byte_ids_[b] = it->second;
  }

  if (!model.Has("merges") || !model.raw().at("merges").is_array()) {
    Fail(model.where(), ": field 'merges' is missing or not an array");
  }
  const Json& merges = model.raw().at("merges");
  m.merges_.reserve(merges.size());
  auto lookup = [&](const std::string& tok, const auto& where) {
    auto it = m.vocab_.find(tok);
    if (it == m.vocab_.end()) Fail(where(), ": token '", tok, "' is not in the vocabulary");
    return it->second;
  };
  std::string left, right, joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    // Built only when something is wrong: this loop runs for every merge at load time.
    auto where = [&] { return model.where() + ".merges[" + std::to_string(i) + "]"; };
    const Json& e = merges[i];
    if (e.is_string()) {  // "left right"
      const std::string& s = e.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        Fail(where(), ": '", s, "' is not two tokens separated by one space");
      }
      left.assign(s, 0, sp);
      right.assign(s, sp + 1);
    } else if (e.is_array() && e.size() == 2) {  // ["left", "right"]
      left = TokenString(e[0], where());
      right = TokenString(e[1], where());
    } else {
      Fail(where(), ": expected \"left right\" or [left, right], got ", JsonSummary(e));
    }
    const int32_t left_id = lookup(left, where), right_id = lookup(right, where);
    joined.assign(left).append(right);
    const int32_t result = lookup(joined, where);
    // A repeated pair keeps its last rank, as in the reference's merge map.
    m.merges_.insert_or_assign(PairKey(left_id, right_id), Merge{static_cast<int32_t>(i), result});
  }
  return m;
}

void BpeModel::MergeWord(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id, prev, next;
    bool alive;
  };
  struct Candidate {
    int32_t rank, pos, result;
    // std::priority_queue pops the largest; the lowest rank, then leftmost, must win.
    bool operator<(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  const int n = static_cast<int>(word.size());
  std::vector<Symbol> sym(n);
  for (int i = 0; i < n; ++i) {
    sym[i] = {byte_ids_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  }
  std::vector<Candidate> heap_storage;
  heap_storage.reserve(n);
  std::priority_queue<Candidate> heap(std::less<Candidate>(), std::move(heap_storage));
  auto consider = [&](int left) {
    const int right = sym[left].next;
    if (right < 0) return;
    auto it = merges_.find(PairKey(sym[left].id, sym[right].id));
    if (it != merges_.end()) heap.push({it->second.rank, left, it->second.result});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = sym[c.pos];
    if (!left.alive || left.next < 0) continue;
    // Stale if either side has merged since this pair was queued.
    auto it = merges_.find(PairKey(left.id, sym[left.next].id));
    if (it == merges_.end() || it->second.result != c.result) continue;
    Symbol& right = sym[left.next];
    left.id = c.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = c.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(c.pos);
  }
  for (int i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

void BpeModel::Encode(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (ignore_merges_) {
    auto it = bytes_to_id_.find(std::string(word));
    if (it != bytes_to_id_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= kCacheMaxWordBytes;
  std::string key;
  if (cacheable) {
    key.assign(word);
    std::lock_guard<std::mutex> lock(cache_->mu);
    auto it = cache_->map.find(key);
    if (it != cache_->map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  MergeWord(word, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (cache_->map.size() < kCacheWords) {
      cache_->map.emplace(std::move(key), std::vector<int32_t>(out.begin() + first, out.end()));
    }
  }
}

}  // namespace dflash::text
