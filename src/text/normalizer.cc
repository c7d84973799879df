#include "text/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include <cstdint>

namespace dflash::text {

void Normalizer::Add(const JsonObject& step) {
  const std::string type = step.Get<std::string>("type");
  if (type == "Sequence") {
    const Json& list = step.raw().at("normalizers");
    if (!list.is_array()) Fail(step.where(), ": field 'normalizers' is not an array");
    for (size_t i = 0; i < list.size(); ++i) {
      Add(JsonObject(list[i], step.where() + ".normalizers[" + std::to_string(i) + "]"));
    }
    return;
  }
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* form = nullptr;
  if (type == "NFC") form = icu::Normalizer2::getNFCInstance(status);
  else if (type == "NFD") form = icu::Normalizer2::getNFDInstance(status);
  else if (type == "NFKC") form = icu::Normalizer2::getNFKCInstance(status);
  else if (type == "NFKD") form = icu::Normalizer2::getNFKDInstance(status);
  else Fail(step.where(), ": normalizer type '", type, "' is not supported (NFC, NFD, NFKC, NFKD, Sequence)");
  if (U_FAILURE(status)) Fail(step.where(), ": ICU cannot load ", type, " data: ", u_errorName(status));
  forms_.push_back(form);
}

Normalizer Normalizer::FromJson(const Json& j, const std::string& where) {
  Normalizer n;
  if (j.is_null()) return n;
  n.Add(JsonObject(j, where + ": normalizer"));
  return n;
}

std::string Normalizer::Apply(std::string text) const {
  if (text.size() > static_cast<size_t>(INT32_MAX)) Fail("normalizer: text of ", text.size(), " bytes exceeds ICU's 2 GiB limit");
  for (const icu::Normalizer2* form : forms_) {
    UErrorCode status = U_ZERO_ERROR;
    const icu::StringPiece in(text.data(), static_cast<int32_t>(text.size()));
    // Most text is already normalized; the quick check avoids copying it.
    if (form->isNormalizedUTF8(in, status) && U_SUCCESS(status)) continue;
    status = U_ZERO_ERROR;
    std::string out;
    icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
    form->normalizeUTF8(0, in, sink, nullptr, status);
    if (U_FAILURE(status)) Fail("normalizer: ICU failed: ", u_errorName(status));
    text = std::move(out);
  }
  return text;
}

}  // namespace dflash::text
