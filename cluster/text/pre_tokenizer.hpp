#pragma once

// Hugging Face pre-tokenizers the supported tokenizers use: Split (a
// pattern and a behaviour), ByteLevel (GPT-2's pattern when use_regex),
// Metaspace, Digits and Sequence. Any other kind is refused when the
// tokenizer is loaded.

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace outrider::text {

class pre_tokenizer {
 public:
  virtual ~pre_tokenizer() = default;
  /// Splits each of `pieces` further, in place. `first`: the pieces begin
  /// the text (no added token before them), for Metaspace's "first".
  virtual void split(std::vector<std::string>& pieces, bool first) const = 0;
};

/// From tokenizer.json's "pre_tokenizer" (null: none). nullptr and `*why`
/// for a kind this tokenizer does not support.
std::unique_ptr<pre_tokenizer> make_pre_tokenizer(const nlohmann::json& j,
                                                  std::string* why);

/// GPT-2's own pre-tokenizer pattern (ByteLevel with use_regex).
extern const char* const gpt2_pattern;

} // namespace outrider::text
