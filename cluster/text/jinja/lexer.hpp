#pragma once

// Splits a template into text and tags (with Jinja's whitespace control:
// `-` on a tag, trim_blocks and lstrip_blocks), and a tag's inside into
// tokens.

#include <cstdint>
#include <string>
#include <vector>

namespace outrider::text::jinja {

struct token {
  enum class kind { name, integer, real, string, op, end };
  kind k = kind::end;
  std::string text; // a name, an operator, a string's value
  int64_t i = 0;
  double d = 0;
  int line = 1;
};

struct piece {
  enum class kind { text, output, statement };
  kind k = kind::text;
  std::string text;          // text
  std::vector<token> tokens; // output, statement (ending in kind::end)
  int line = 1;
};

/// Throws template_error on an unclosed tag or string.
std::vector<piece> lex_template(const std::string& src);

} // namespace outrider::text::jinja
