#include "runtime/text_checks.hpp"

#include <utf8proc.h>
#include <vector>

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

bool json_object_members_within(std::string_view s, size_t max_members) {
  // Per open bracket: an object's members so far (arrays: -1, not counted).
  std::vector<long> open;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{') {
      open.push_back(1);
    } else if (c == '[') {
      open.push_back(-1);
    } else if ((c == '}' || c == ']') && !open.empty()) {
      open.pop_back();
    } else if (c == ',' && !open.empty() && open.back() >= 0) {
      if (static_cast<size_t>(++open.back()) > max_members)
        return false;
    }
  }
  return true;
}

} // namespace outrider::runtime
