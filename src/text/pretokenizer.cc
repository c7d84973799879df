#include "text/pretokenizer.h"

#include <algorithm>

namespace dflash::text {

namespace {

// The split GPT-2 introduced; ByteLevel applies it when use_regex is true.
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Segment {
  size_t begin, end;
  bool is_match;
};

}  // namespace

void PreTokenizer::Add(const JsonObject& step) {
  const std::string type = step.Get<std::string>("type");
  if (has_byte_level_) {
    Fail(step.where(), ": pre-tokenizer '", type,
         "' after ByteLevel is not supported (it would see byte-level characters)");
  }
  if (type == "Sequence") {
    const Json& list = step.raw().contains("pretokenizers") ? step.raw().at("pretokenizers") : Json();
    if (!list.is_array()) Fail(step.where(), ": field 'pretokenizers' is missing or not an array");
    for (size_t i = 0; i < list.size(); ++i) {
      Add(JsonObject(list[i], step.where() + ".pretokenizers[" + std::to_string(i) + "]"));
    }
    return;
  }
  Step s;
  if (type == "ByteLevel") {
    s.byte_level = true;
    s.add_prefix_space = step.Get<bool>("add_prefix_space", false);
    if (step.Get<bool>("use_regex", true)) s.regex.emplace_back(kGpt2Pattern, false, step.where());
    has_byte_level_ = true;
  } else if (type == "Split") {
    const JsonObject pattern = step.Child("pattern");
    if (pattern.Has("Regex")) {
      s.regex.emplace_back(pattern.Get<std::string>("Regex"), false, pattern.where());
    } else if (pattern.Has("String")) {
      s.regex.emplace_back(pattern.Get<std::string>("String"), true, pattern.where());
    } else {
      Fail(pattern.where(), ": expected a 'Regex' or 'String' field");
    }
    const std::string behavior = step.Get<std::string>("behavior");
    if (behavior == "Removed") s.behavior = Behavior::kRemoved;
    else if (behavior == "Isolated") s.behavior = Behavior::kIsolated;
    else if (behavior == "MergedWithPrevious") s.behavior = Behavior::kMergedWithPrevious;
    else if (behavior == "MergedWithNext") s.behavior = Behavior::kMergedWithNext;
    else if (behavior == "Contiguous") s.behavior = Behavior::kContiguous;
    else Fail(step.where(), ": field 'behavior' has unknown value '", behavior, "'");
    s.invert = step.Get<bool>("invert", false);
  } else {
    Fail(step.where(), ": pre-tokenizer type '", type,
         "' is not supported (Split, ByteLevel, Sequence)");
  }
  steps_.push_back(std::move(s));
}

PreTokenizer PreTokenizer::FromJson(const Json& j, const std::string& where) {
  PreTokenizer p;
  if (!j.is_null()) p.Add(JsonObject(j, where + ": pre_tokenizer"));
  return p;
}

void PreTokenizer::SplitWord(const Step& step, const std::string& word, std::vector<Match>& scratch,
                             std::vector<std::string>& out) {
  scratch.clear();
  step.regex[0].FindAll(word, scratch);
  // Matches and the gaps between them, in order; `invert` swaps which is which.
  std::vector<Segment> segs;
  segs.reserve(scratch.size() * 2 + 1);
  size_t prev = 0;
  for (const Match& m : scratch) {
    if (m.begin != prev) segs.push_back({prev, m.begin, step.invert});
    segs.push_back({m.begin, m.end, !step.invert});
    prev = m.end;
  }
  if (prev != word.size()) segs.push_back({prev, word.size(), step.invert});

  // Where a delimiter (a match) goes: the same folds as the reference, so that runs of
  // matches and empty matches come out identically.
  std::vector<Segment> pieces;
  bool previous_match = false;
  switch (step.behavior) {
    case Behavior::kIsolated:
      pieces = std::move(segs);
      break;
    case Behavior::kRemoved:
      for (const Segment& s : segs) {
        if (!s.is_match) pieces.push_back(s);
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const Segment& s : segs) {
        if (s.is_match && !previous_match && !pieces.empty()) pieces.back().end = s.end;
        else pieces.push_back(s);
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->is_match && !previous_match && !pieces.empty()) pieces.back().begin = it->begin;
        else pieces.push_back(*it);
        previous_match = it->is_match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    case Behavior::kContiguous:
      for (size_t i = 0; i < segs.size(); ++i) {
        if (i > 0 && segs[i].is_match == previous_match) pieces.back().end = segs[i].end;
        else pieces.push_back(segs[i]);
        previous_match = segs[i].is_match;
      }
      break;
  }
  for (const Segment& s : pieces) {
    if (s.end > s.begin) out.emplace_back(word, s.begin, s.end - s.begin);
  }
}

void PreTokenizer::Apply(std::vector<std::string>& words) const {
  std::vector<std::string> next;
  std::vector<Match> scratch;
  for (const Step& step : steps_) {
    next.clear();
    next.reserve(words.size());
    for (std::string& word : words) {
      if (step.add_prefix_space && word[0] != ' ') word.insert(word.begin(), ' ');
      if (step.regex.empty()) next.push_back(std::move(word));
      else SplitWord(step, word, scratch, next);
    }
    words.swap(next);
  }
}

}  // namespace dflash::text
