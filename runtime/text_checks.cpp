#include "runtime/text_checks.hpp"

#include <utf8proc.h>

namespace outrider::runtime {

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  auto left = static_cast<utf8proc_ssize_t>(s.size());
  while (left > 0) {
    // ASCII needs no decoding (the common case for JSON and headers).
    if (*p < 0x80) {
      ++p;
      --left;
      continue;
    }
    utf8proc_int32_t cp = 0;
    auto n = utf8proc_iterate(p, left, &cp);
    if (n <= 0 || cp < 0)
      return false;
    p += n;
    left -= n;
  }
  return true;
}

bool json_depth_within(std::string_view s, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i; // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        return false;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}

} // namespace outrider::runtime
