#pragma once

// A compiled PCRE2 pattern (UTF + UCP, JIT-compiled where PCRE2 has a JIT)
// for the tokenizer's pre-tokenizer and normalizer patterns. Subjects are
// checked for well-formed UTF-8 once by the caller, never per match.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace outrider::text {

class regex {
 public:
  /// nullptr and `*why` when PCRE2 does not accept it. `literal`: the
  /// pattern is a plain string.
  static std::unique_ptr<regex> compile(const std::string& pattern,
                                        bool literal, std::string* why);
  ~regex();
  regex(const regex&) = delete;
  regex& operator=(const regex&) = delete;

  /// Calls `on_match(begin, end)` for every non-overlapping match in
  /// `subject`, left to right (an empty match moves one character on).
  void for_each(std::string_view subject,
                const std::function<void(size_t, size_t)>& on_match) const;

 private:
  regex() = default;
  void* code_ = nullptr; // pcre2_code_8
  bool jit_ = false;
};

/// A pattern as tokenizer.json writes it: {"String": ...} (literal) or
/// {"Regex": ...}.
std::unique_ptr<regex> pattern_from_json(const nlohmann::json& p,
                                         std::string* why);

} // namespace outrider::text
