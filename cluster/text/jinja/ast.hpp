#pragma once

// The parsed form of a chat template: statements and expressions.

#include <memory>
#include <string>
#include <vector>

#include "cluster/text/jinja/value.hpp"

namespace outrider::text::jinja {

/// Why a template cannot be parsed or rendered: the message names the
/// line of the template.
struct template_error {
  std::string message;
};

struct expr;
using expr_ptr = std::unique_ptr<expr>;

struct expr {
  enum class type {
    literal,  // lit
    name,     // name
    attr,     // kids[0].name
    item,     // kids[0][kids[1]]
    slice,    // kids[0][kids[1]:kids[2]:kids[3]] (null kids: absent)
    call,     // kids[0](kids[1..], kw)
    filter,   // kids[0] | name(kids[1..], kw)
    test,     // kids[0] is [not] name(kids[1..])
    unary,    // op kids[0]: "not", "-", "+"
    binary,   // kids[0] op kids[1]
    cond,     // kids[0] if kids[1] else kids[2] (kids[2] may be null)
    list_lit, // [kids...]
    dict_lit, // {kids[0]: kids[1], ...}
  };
  type t = type::literal;
  value lit;
  std::string name;     // a name, an attribute, a filter or test, an operator
  bool negated = false; // `is not`
  std::vector<expr_ptr> kids;
  std::vector<std::pair<std::string, expr_ptr>> kw;
  int line = 1;
};

struct stmt;
using stmt_ptr = std::unique_ptr<stmt>;
using body = std::vector<stmt_ptr>;

struct stmt {
  enum class type { text, output, if_, for_, set, set_block, brk, cont };
  type t = type::text;
  std::string text; // text
  expr_ptr e;       // output, set value, for iterable
  std::vector<std::pair<expr_ptr, body>> branches; // if / elif
  body else_body;                                  // if, for
  std::vector<std::string> targets; // for (one or more), set (one)
  std::string attr;                 // set ns.attr
  expr_ptr loop_filter;             // for ... if cond
  body inner;                       // for, set_block
  int line = 1;
};

/// Parses a template as Hugging Face renders chat templates: Jinja with
/// trim_blocks and lstrip_blocks, and the loop controls (break, continue).
body parse_template(const std::string& source);

} // namespace outrider::text::jinja
