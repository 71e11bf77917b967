#pragma once

// Generated token ids to text as they come: a chunk never splits a UTF-8
// character (bytes of an unfinished one are held until it completes),
// special tokens are left out unless asked for, and stop strings are found
// across chunk boundaries: text that could begin a stop string is held
// until it cannot, and the text ends just before the first stop string.
// The tokenizer's end-of-sequence token (eos_token) stops it too.

#include <memory>
#include <string>
#include <vector>

#include "cluster/text/tokenizer.hpp"

namespace outrider::text {

class text_stream {
 public:
  text_stream(std::shared_ptr<const tokenizer> t,
              std::vector<std::string> stops = {}, bool skip_special = true,
              bool stop_at_eos = true);

  /// The text that `id` makes ready (often empty while bytes are held).
  std::string push(uint32_t id);
  /// The end of the stream: whatever is held, ill-formed bytes as U+FFFD.
  std::string finish();
  /// A stop string was reached: nothing more comes out.
  bool stopped() const { return stopped_; }
  /// Tokens pushed until the stop (all of them when none was reached).
  size_t tokens_used() const { return used_; }

 private:
  std::string release(std::string chunk, bool last);

  std::shared_ptr<const tokenizer> tok_;
  std::vector<std::string> stops_;
  bool skip_special_;
  bool stop_at_eos_;
  bool first_ = true; // before the first bytes (a leading space to drop)
  std::string bytes_; // an unfinished UTF-8 character
  std::string held_;  // text that may begin a stop string
  bool stopped_ = false;
  size_t used_ = 0;
};

} // namespace outrider::text
