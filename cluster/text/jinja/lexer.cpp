#include "cluster/text/jinja/lexer.hpp"

#include <cctype>
#include <charconv>

#include "cluster/text/jinja/ast.hpp"
#include "cluster/text/utf8.hpp"

namespace outrider::text::jinja {

namespace {

[[noreturn]] void fail(int line, const std::string& what) {
  throw template_error{"line " + std::to_string(line) + ": " + what};
}

bool space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

// A string literal's body from `at` (after the quote); returns the index
// after the closing quote.
size_t read_string(const std::string& s, size_t at, char q, int line,
                   std::string& out) {
  while (at < s.size() && s[at] != q) {
    char c = s[at++];
    if (c != '\\' || at >= s.size()) {
      out += c;
      continue;
    }
    char e = s[at++];
    switch (e) {
    case 'n':
      out += '\n';
      break;
    case 't':
      out += '\t';
      break;
    case 'r':
      out += '\r';
      break;
    case '0':
      out += '\0';
      break;
    case 'b':
      out += '\b';
      break;
    case 'f':
      out += '\f';
      break;
    case 'u':
    case 'x': {
      size_t n = e == 'u' ? 4 : 2;
      uint32_t cp = 0;
      auto [stop, ec] =
        at + n <= s.size()
          ? std::from_chars(s.data() + at, s.data() + at + n, cp, 16)
          : std::from_chars_result{nullptr, std::errc::invalid_argument};
      if (ec != std::errc{} || stop != s.data() + at + n ||
          (cp >= 0xD800 && cp < 0xE000))
        fail(line, std::string("a bad \\") + e + " escape");
      append_utf8(out, static_cast<char32_t>(cp));
      at += n;
      break;
    }
    case '\n':
      break; // a continued line
    default:
      if (e != '\\' && e != '\'' && e != '"')
        out += '\\'; // Python keeps unknown escapes as written
      out += e;
    }
  }
  if (at >= s.size())
    fail(line, "a string is not closed");
  return at + 1;
}

const char* const ops[] = {"**", "//", "==", "!=", "<=", ">=", "(", ")", "[",
                           "]",  "{",  "}",  ",",  ".",  ":",  "|", "~", "+",
                           "-",  "*",  "/",  "%",  "<",  ">",  "="};

// Tokens of one tag from `at` to its end marker (`}}` or `%}`, with an
// optional `-`); returns where the text after the tag starts, and whether
// the tag asked to strip the whitespace after it.
size_t lex_tag(const std::string& s, size_t at, const std::string& close,
               int& line, std::vector<token>& out, bool& strip_after) {
  while (true) {
    while (at < s.size() && space(s[at]))
      line += s[at++] == '\n';
    if (at >= s.size())
      fail(line, "a tag is not closed (" + close + ")");
    if (s.compare(at, 1, "-") == 0 && s.compare(at + 1, 2, close) == 0) {
      strip_after = true;
      out.push_back({token::kind::end, "", 0, 0, line});
      return at + 3;
    }
    if (s.compare(at, 2, close) == 0) {
      out.push_back({token::kind::end, "", 0, 0, line});
      return at + 2;
    }
    char c = s[at];
    token t;
    t.line = line;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = at;
      while (at < s.size() &&
             (std::isalnum(static_cast<unsigned char>(s[at])) || s[at] == '_'))
        ++at;
      t.k = token::kind::name;
      t.text = s.substr(b, at - b);
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t b = at;
      while (at < s.size() && std::isdigit(static_cast<unsigned char>(s[at])))
        ++at;
      bool real = at + 1 < s.size() && s[at] == '.' &&
                  std::isdigit(static_cast<unsigned char>(s[at + 1]));
      if (real) {
        ++at;
        while (at < s.size() && std::isdigit(static_cast<unsigned char>(s[at])))
          ++at;
        t.k = token::kind::real;
        auto r = std::from_chars(s.data() + b, s.data() + at, t.d);
        if (r.ec != std::errc{})
          fail(line, "the number " + s.substr(b, at - b) + " is out of range");
      } else {
        t.k = token::kind::integer;
        auto r = std::from_chars(s.data() + b, s.data() + at, t.i);
        if (r.ec != std::errc{})
          fail(line, "the number " + s.substr(b, at - b) + " is out of range");
      }
    } else if (c == '\'' || c == '"') {
      t.k = token::kind::string;
      at = read_string(s, at + 1, c, line, t.text);
    } else {
      bool found = false;
      for (const char* op : ops)
        if (s.compare(at, std::char_traits<char>::length(op), op) == 0) {
          t.k = token::kind::op;
          t.text = op;
          at += t.text.size();
          found = true;
          break;
        }
      if (!found)
        fail(line, std::string("unexpected character '") + c + "'");
    }
    out.push_back(std::move(t));
  }
}

void rstrip_all(std::string& t) {
  while (!t.empty() && space(t.back()))
    t.pop_back();
}

// lstrip_blocks: spaces and tabs between a line's start and a block tag
// go. `line_start`: the text itself begins a line.
void lstrip_line(std::string& t, bool line_start) {
  size_t n = t.size();
  while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t'))
    --n;
  if (n == 0 ? line_start : t[n - 1] == '\n')
    t.resize(n);
}

} // namespace

std::vector<piece> lex_template(const std::string& s) {
  std::vector<piece> out;
  size_t at = 0;
  int line = 1;
  bool strip_next = false, trim_newline = false;
  while (at <= s.size()) {
    size_t open = s.find('{', at);
    while (open != std::string::npos && open + 1 < s.size() &&
           s[open + 1] != '{' && s[open + 1] != '%' && s[open + 1] != '#')
      open = s.find('{', open + 1);
    if (open + 1 >= s.size())
      open = std::string::npos;
    std::string text =
      s.substr(at, open == std::string::npos ? std::string::npos : open - at);
    size_t dropped = 0; // leading characters the last tag took
    if (strip_next) {
      while (dropped < text.size() && space(text[dropped]))
        ++dropped;
    } else if (trim_newline) {
      if (text.compare(0, 1, "\n") == 0)
        dropped = 1;
      else if (text.compare(0, 2, "\r\n") == 0)
        dropped = 2;
    }
    text.erase(0, dropped);
    bool line_start = at + dropped == 0 || s[at + dropped - 1] == '\n';
    strip_next = trim_newline = false;
    if (open == std::string::npos) {
      if (!text.empty())
        out.push_back({piece::kind::text, text, {}, line});
      break;
    }
    char kind = s[open + 1];
    bool minus = s.compare(open + 2, 1, "-") == 0;
    bool plus = s.compare(open + 2, 1, "+") == 0;
    if (minus)
      rstrip_all(text);
    else if (kind != '{' && !plus)
      lstrip_line(text, line_start);
    int text_line = line;
    for (char c : s.substr(at, open - at))
      line += c == '\n';
    if (!text.empty())
      out.push_back({piece::kind::text, text, {}, text_line});
    size_t inside = open + 2 + (minus || plus ? 1 : 0);
    if (kind == '#') {
      size_t close = s.find("#}", inside);
      if (close == std::string::npos)
        fail(line, "a comment is not closed");
      for (size_t k = inside; k < close; ++k)
        line += s[k] == '\n';
      strip_next = close > 0 && s[close - 1] == '-';
      trim_newline = !strip_next;
      at = close + 2;
      continue;
    }
    piece p;
    p.k = kind == '{' ? piece::kind::output : piece::kind::statement;
    p.line = line;
    bool strip_after = false;
    at = lex_tag(s, inside, kind == '{' ? "}}" : "%}", line, p.tokens,
                 strip_after);
    strip_next = strip_after;
    trim_newline = !strip_after && kind == '%';
    out.push_back(std::move(p));
  }
  return out;
}

} // namespace outrider::text::jinja
