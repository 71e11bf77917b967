#include "cluster/text/utf8.hpp"

#include <utf8proc.h>

namespace outrider::text {

void append_utf8(std::string& out, char32_t cp) {
  // utf8proc encodes; a value past U+10FFFF (it writes nothing) becomes
  // U+FFFD.
  utf8proc_uint8_t buf[4];
  auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  if (n == 0)
    n = utf8proc_encode_char(0xFFFD, buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

namespace {

// How far a well-formed sequence goes from s[0] (Unicode Table 3-7): the
// number of bytes that belong to it so far, and whether it is complete.
struct prefix_scan {
  size_t length = 0; // bytes that fit the pattern (0: s[0] cannot start one)
  bool complete = false;
};

prefix_scan scan(std::string_view s) {
  auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char c = b(0);
  if (c < 0x80)
    return {1, true};
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF; // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    lo = c == 0xE0 ? 0xA0 : 0x80;
    hi = c == 0xED ? 0x9F : 0xBF;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    lo = c == 0xF0 ? 0x90 : 0x80;
    hi = c == 0xF4 ? 0x8F : 0xBF;
  } else {
    return {0, false};
  }
  size_t i = 1;
  for (; i < need && i < s.size(); ++i) {
    unsigned char x = b(i);
    bool ok = i == 1 ? (x >= lo && x <= hi) : (x >= 0x80 && x <= 0xBF);
    if (!ok)
      return {i, false};
  }
  return {i, i == need};
}

} // namespace

size_t char_length(std::string_view s) {
  if (s.empty())
    return 0;
  auto p = scan(s);
  return p.complete ? p.length : 0;
}

bool well_formed(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    auto p = scan(s.substr(i));
    if (!p.complete)
      return false;
    i += p.length;
  }
  return true;
}

std::string lossy_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    auto p = scan(bytes.substr(i));
    if (p.complete) {
      out.append(bytes.substr(i, p.length));
      i += p.length;
    } else {
      out += "\xEF\xBF\xBD"; // one U+FFFD per maximal subpart
      i += p.length == 0 ? 1 : p.length;
    }
  }
  return out;
}

size_t complete_prefix(std::string_view bytes) {
  // A character is at most 4 bytes: only the last 3 can be held back.
  size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    size_t start = n - back;
    auto p = scan(bytes.substr(start));
    if (p.length == 0)
      continue; // a continuation byte: look further back
    if (!p.complete && p.length == back)
      return start; // a well-formed beginning that more bytes may finish
    return n;
  }
  return n;
}

} // namespace outrider::text
