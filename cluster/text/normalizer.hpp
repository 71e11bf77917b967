#pragma once

// Hugging Face normalizers the supported tokenizers use: NFC, NFD, NFKC,
// NFKD (utf8proc), Lowercase, Prepend, Replace, Strip and Sequence. Any
// other kind is refused when the tokenizer is loaded.

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace outrider::text {

class normalizer {
 public:
  virtual ~normalizer() = default;
  /// `s` normalized (well-formed UTF-8 in and out).
  virtual std::string apply(std::string s) const = 0;
};

/// From tokenizer.json's "normalizer" (null: none). nullptr and `*why` for
/// a kind this tokenizer does not support.
std::unique_ptr<normalizer> make_normalizer(const nlohmann::json& j,
                                            std::string* why);

} // namespace outrider::text
