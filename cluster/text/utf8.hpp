#pragma once

// Small UTF-8 helpers of the tokenizer: appending a code point, replacing
// ill-formed sequences the way Unicode recommends (each maximal subpart
// becomes one U+FFFD, as Rust's from_utf8_lossy and the WHATWG decoder do),
// and finding where an incomplete trailing character starts, so that a
// stream never splits one.

#include <cstddef>
#include <string>
#include <string_view>

namespace outrider::text {

void append_utf8(std::string& out, char32_t cp);

/// `bytes` with every ill-formed subsequence replaced by U+FFFD.
std::string lossy_utf8(std::string_view bytes);

/// How many leading bytes of `bytes` can be emitted now: all of them,
/// except a trailing prefix of a well-formed character that more bytes
/// could still complete.
size_t complete_prefix(std::string_view bytes);

bool well_formed(std::string_view s);

/// The length of the well-formed character at the start of `s` (1-4), or 0
/// when `s` does not start with one.
size_t char_length(std::string_view s);

} // namespace outrider::text
