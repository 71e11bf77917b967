#pragma once

// Expressions of a tag, by recursive descent with Jinja's precedence: a if
// b else c; or; and; not; comparisons and `in`; + -; ~; * / // %; **;
// unary - +; then primaries with attributes, subscripts, slices and
// calls, then filters (|) and tests (is).

#include <string>
#include <vector>

#include "cluster/text/jinja/ast.hpp"
#include "cluster/text/jinja/lexer.hpp"

namespace outrider::text::jinja {

[[noreturn]] inline void parse_fail(int line, const std::string& what) {
  throw template_error{"line " + std::to_string(line) + ": " + what};
}

class expr_parser {
 public:
  explicit expr_parser(const std::vector<token>& t) : t_(t) {}

  const token& peek(size_t ahead = 0) const {
    return t_[std::min(p_ + ahead, t_.size() - 1)];
  }
  bool at_end() const { return peek().k == token::kind::end; }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).k == token::kind::op && peek(ahead).text == op;
  }
  bool is_name(const char* n, size_t ahead = 0) const {
    return peek(ahead).k == token::kind::name && peek(ahead).text == n;
  }
  const token& next() { return t_[std::min(p_++, t_.size() - 1)]; }
  void expect_op(const char* op) {
    if (!is_op(op))
      parse_fail(peek().line, std::string("expected '") + op + "'");
    ++p_;
  }
  std::string expect_name() {
    if (peek().k != token::kind::name)
      parse_fail(peek().line, "expected a name");
    return next().text;
  }
  void expect_end() {
    if (!at_end())
      parse_fail(peek().line, "unexpected '" + peek().text + "'");
  }

  expr_ptr expression(bool with_cond = true) {
    nested guard{*this};
    auto e = parse_or();
    if (!with_cond || !is_name("if"))
      return e;
    ++p_;
    auto c = node(expr::type::cond, e->line);
    auto cond = parse_or();
    expr_ptr other;
    if (is_name("else")) {
      ++p_;
      other = expression();
    }
    c->kids.push_back(std::move(e));
    c->kids.push_back(std::move(cond));
    c->kids.push_back(std::move(other));
    return c;
  }

 private:
  // Nesting is bounded: hostile templates never exhaust the stack.
  static constexpr int max_depth = 100;
  struct nested {
    explicit nested(expr_parser& p) : p_(p) {
      if (++p_.depth_ > max_depth)
        parse_fail(p_.peek().line, "expressions nest deeper than " +
                                     std::to_string(max_depth) + " levels");
    }
    ~nested() { --p_.depth_; }
    expr_parser& p_;
  };

  static expr_ptr node(expr::type t, int line) {
    auto e = std::make_unique<expr>();
    e->t = t;
    e->line = line;
    return e;
  }
  static expr_ptr binary(std::string op, expr_ptr a, expr_ptr b) {
    auto e = node(expr::type::binary, a->line);
    e->name = std::move(op);
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return e;
  }

  expr_ptr parse_or() {
    auto a = parse_and();
    while (is_name("or")) {
      ++p_;
      a = binary("or", std::move(a), parse_and());
    }
    return a;
  }
  expr_ptr parse_and() {
    auto a = parse_not();
    while (is_name("and")) {
      ++p_;
      a = binary("and", std::move(a), parse_not());
    }
    return a;
  }
  expr_ptr parse_not() {
    if (is_name("not")) {
      nested guard{*this};
      int line = next().line;
      auto e = node(expr::type::unary, line);
      e->name = "not";
      e->kids.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  expr_ptr parse_compare() {
    auto a = parse_math1();
    while (true) {
      std::string op;
      if (peek().k == token::kind::op &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
           peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        ++p_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        p_ += 2;
        op = "notin";
      } else {
        return a;
      }
      a = binary(op, std::move(a), parse_math1());
    }
  }
  expr_ptr parse_math1() {
    auto a = parse_concat();
    while (is_op("+") || is_op("-")) {
      auto op = next().text;
      a = binary(op, std::move(a), parse_concat());
    }
    return a;
  }
  expr_ptr parse_concat() {
    auto a = parse_math2();
    while (is_op("~")) {
      ++p_;
      a = binary("~", std::move(a), parse_math2());
    }
    return a;
  }
  expr_ptr parse_math2() {
    auto a = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      auto op = next().text;
      a = binary(op, std::move(a), parse_pow());
    }
    return a;
  }
  expr_ptr parse_pow() {
    auto a = parse_unary(true);
    while (is_op("**")) {
      ++p_;
      a = binary("**", std::move(a), parse_unary(true));
    }
    return a;
  }
  expr_ptr parse_unary(bool with_filter) {
    expr_ptr e;
    if (is_op("-") || is_op("+")) {
      nested guard{*this};
      auto& t = next();
      e = node(expr::type::unary, t.line);
      e->name = t.text;
      e->kids.push_back(parse_unary(false));
    } else {
      e = postfix(primary());
    }
    return with_filter ? filters(std::move(e)) : std::move(e);
  }

  expr_ptr primary() {
    const auto& t = next();
    auto lit = [&](value v) {
      auto e = node(expr::type::literal, t.line);
      e->lit = std::move(v);
      return e;
    };
    switch (t.k) {
    case token::kind::name:
      if (t.text == "true" || t.text == "True")
        return lit(value::boolean(true));
      if (t.text == "false" || t.text == "False")
        return lit(value::boolean(false));
      if (t.text == "none" || t.text == "None")
        return lit(value::none());
      {
        auto e = node(expr::type::name, t.line);
        e->name = t.text;
        return e;
      }
    case token::kind::integer:
      return lit(value::integer(t.i));
    case token::kind::real:
      return lit(value::real(t.d));
    case token::kind::string: {
      std::string s = t.text;
      while (peek().k == token::kind::string) // 'a' 'b' is 'ab'
        s += next().text;
      return lit(value::string(std::move(s)));
    }
    case token::kind::op:
      if (t.text == "(")
        return parenthesised(t.line);
      if (t.text == "[")
        return sequence(t.line, "]");
      if (t.text == "{")
        return mapping(t.line);
      [[fallthrough]];
    default:
      parse_fail(t.line, t.k == token::kind::end
                           ? "an expression ends too soon"
                           : "unexpected '" + t.text + "'");
    }
  }
  expr_ptr parenthesised(int line) {
    if (is_op(")")) {
      ++p_;
      return node(expr::type::list_lit, line); // ()
    }
    auto first = expression();
    if (is_op(")")) {
      ++p_;
      return first;
    }
    auto tuple = node(expr::type::list_lit, line); // a tuple: as a list
    tuple->kids.push_back(std::move(first));
    while (is_op(",")) {
      ++p_;
      if (is_op(")"))
        break;
      tuple->kids.push_back(expression());
    }
    expect_op(")");
    return tuple;
  }
  expr_ptr sequence(int line, const char* close) {
    auto e = node(expr::type::list_lit, line);
    while (!is_op(close)) {
      e->kids.push_back(expression());
      if (!is_op(","))
        break;
      ++p_;
    }
    expect_op(close);
    return e;
  }
  expr_ptr mapping(int line) {
    auto e = node(expr::type::dict_lit, line);
    while (!is_op("}")) {
      e->kids.push_back(expression());
      expect_op(":");
      e->kids.push_back(expression());
      if (!is_op(","))
        break;
      ++p_;
    }
    expect_op("}");
    return e;
  }
  // Arguments of a call, filter or test: positional, then name=value.
  void arguments(expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().k == token::kind::name && is_op("=", 1)) {
        auto name = next().text;
        ++p_;
        e.kw.emplace_back(name, expression());
      } else {
        e.kids.push_back(expression());
      }
      if (!is_op(","))
        break;
      ++p_;
    }
    expect_op(")");
  }
  expr_ptr postfix(expr_ptr e) {
    while (true) {
      if (is_op(".")) {
        ++p_;
        auto a = node(expr::type::attr, e->line);
        a->name = peek().k == token::kind::integer ? std::to_string(next().i)
                                                   : expect_name();
        a->kids.push_back(std::move(e));
        e = std::move(a);
      } else if (is_op("[")) {
        ++p_;
        e = subscript(std::move(e));
      } else if (is_op("(")) {
        auto c = node(expr::type::call, e->line);
        c->kids.push_back(std::move(e));
        arguments(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  expr_ptr subscript(expr_ptr obj) {
    expr_ptr parts[3];
    int n = 0;
    bool slice = false;
    while (true) {
      if (is_op(":")) {
        slice = true;
        ++p_;
        if (++n > 2)
          parse_fail(peek().line, "a slice has at most three parts");
        continue;
      }
      if (is_op("]"))
        break;
      parts[n] = expression();
    }
    expect_op("]");
    auto e = node(slice ? expr::type::slice : expr::type::item, obj->line);
    e->kids.push_back(std::move(obj));
    for (int k = 0; k < (slice ? 3 : 1); ++k)
      e->kids.push_back(std::move(parts[k]));
    return e;
  }
  expr_ptr filters(expr_ptr e) {
    while (true) {
      if (is_op("|")) {
        ++p_;
        auto f = node(expr::type::filter, e->line);
        f->name = expect_name();
        f->kids.push_back(std::move(e));
        if (is_op("("))
          arguments(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        ++p_;
        auto t = node(expr::type::test, e->line);
        if (is_name("not")) {
          ++p_;
          t->negated = true;
        }
        t->name = expect_name();
        t->kids.push_back(std::move(e));
        if (is_op("("))
          arguments(*t);
        else if (peek().k == token::kind::string ||
                 peek().k == token::kind::integer ||
                 peek().k == token::kind::real)
          t->kids.push_back(primary());
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  const std::vector<token>& t_;
  size_t p_ = 0;
  int depth_ = 0;
};

} // namespace outrider::text::jinja
