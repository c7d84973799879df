// tokenizer.json "normalizer": Unicode normalization forms (NFC for Qwen), alone or in a
// Sequence, computed with ICU. Anything else is rejected at load time, naming the type,
// rather than skipped: a skipped normalizer silently changes token ids.
#pragma once

#include <string>
#include <vector>

#include <unicode/uversion.h>

#include "io/json_file.h"

U_NAMESPACE_BEGIN
class Normalizer2;
U_NAMESPACE_END

namespace dflash::text {

class Normalizer {
 public:
  Normalizer() = default;  // the identity (tokenizer.json "normalizer": null)
  // `j` is the "normalizer" value; `where` names the file for errors.
  static Normalizer FromJson(const Json& j, const std::string& where);

  bool empty() const { return forms_.empty(); }
  // `text` must be valid UTF-8.
  std::string Apply(std::string text) const;

 private:
  void Add(const JsonObject& step);
  std::vector<const icu::Normalizer2*> forms_;  // ICU singletons, applied in order
};

}  // namespace dflash::text
