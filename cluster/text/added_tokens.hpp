#pragma once

// Added tokens (special tokens such as <|im_start|>, and others a model
// adds to its vocabulary) are found in the raw text before anything else
// runs, the longest one at the leftmost place, and are never split.
// lstrip/rstrip take the whitespace beside a match with it; single_word
// matches only between word boundaries.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace outrider::text {

struct added_token {
  uint32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false, rstrip = false, single_word = false;
};

class added_token_matcher {
 public:
  void add(added_token t);
  /// Splits `text` into segments: plain text (id < 0) and added tokens.
  struct segment {
    std::string_view text;
    int64_t id = -1;
  };
  std::vector<segment> split(std::string_view text) const;
  const added_token* by_id(uint32_t id) const;
  const added_token* by_content(std::string_view c) const;
  bool empty() const { return tokens_.empty(); }
  uint32_t max_id() const { return max_id_; }

 private:
  bool match_at(std::string_view text, size_t at, size_t* len,
                const added_token** tok) const;

  std::vector<added_token> tokens_;
  std::unordered_map<std::string, size_t> by_content_;
  std::unordered_map<uint32_t, size_t> by_id_;
  bool first_byte_[256] = {}; // a quick filter before the lookups
  uint32_t max_id_ = 0;
  std::vector<size_t> lengths_; // distinct content lengths, longest first
};

} // namespace outrider::text
