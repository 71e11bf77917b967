// Statements of a template: text, output, if/elif/else, for (with a
// filter and else), set (also of a namespace's attribute, and as a block),
// break, continue; expressions are expr_parser's.

#include "cluster/text/jinja/expr_parser.hpp"

namespace outrider::text::jinja {

namespace {

[[noreturn]] void fail(int line, const std::string& what) {
  throw template_error{"line " + std::to_string(line) + ": " + what};
}

class stmt_parser {
 public:
  explicit stmt_parser(std::vector<piece> pieces)
    : pieces_(std::move(pieces)) {}

  body parse_all() {
    body b;
    auto end = parse_body(b, {});
    if (!end.empty())
      fail(line_, "'" + end + "' without its opening tag");
    return b;
  }

 private:
  // Statements until one of `ends` (returned; "" at the template's end).
  std::string parse_body(body& out, const std::vector<std::string>& ends) {
    while (at_ < pieces_.size()) {
      auto& pc = pieces_[at_++];
      line_ = pc.line;
      if (pc.k == piece::kind::text) {
        auto s = std::make_unique<stmt>();
        s->text = std::move(pc.text);
        out.push_back(std::move(s));
        continue;
      }
      expr_parser ep{pc.tokens};
      if (pc.k == piece::kind::output) {
        auto s = std::make_unique<stmt>();
        s->t = stmt::type::output;
        s->line = pc.line;
        s->e = ep.expression();
        ep.expect_end();
        out.push_back(std::move(s));
        continue;
      }
      auto word = ep.expect_name();
      for (const auto& e : ends)
        if (word == e) {
          cur_ = std::make_unique<expr_parser>(pc.tokens);
          cur_->next();
          return word;
        }
      out.push_back(statement(word, ep, pc.line));
    }
    if (!ends.empty())
      fail(line_,
           "the template ends inside a block (" + ends.back() + " is missing)");
    return {};
  }

  stmt_ptr statement(const std::string& word, expr_parser& ep, int line) {
    struct nested { // blocks nest at most 100 deep
      explicit nested(int& d, int line) : d_(d) {
        if (++d_ > 100)
          fail(line, "blocks nest deeper than 100 levels");
      }
      ~nested() { --d_; }
      int& d_;
    } guard{depth_, line};
    auto s = std::make_unique<stmt>();
    s->line = line;
    if (word == "if") {
      s->t = stmt::type::if_;
      auto cond = ep.expression();
      ep.expect_end();
      while (true) {
        body b;
        auto end = parse_body(b, {"elif", "else", "endif"});
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (end == "elif") {
          cond = cur_->expression();
          cur_->expect_end();
          continue;
        }
        if (end == "else") {
          cur_->expect_end();
          parse_body(s->else_body, {"endif"});
        }
        return s;
      }
    }
    if (word == "for") {
      s->t = stmt::type::for_;
      s->targets.push_back(ep.expect_name());
      while (ep.is_op(",")) {
        ep.next();
        s->targets.push_back(ep.expect_name());
      }
      if (!ep.is_name("in"))
        fail(line, "expected 'in'");
      ep.next();
      s->e = ep.expression(false);
      if (ep.is_name("if")) {
        ep.next();
        s->loop_filter = ep.expression(false);
      }
      ep.expect_end();
      auto end = parse_body(s->inner, {"else", "endfor"});
      if (end == "else")
        parse_body(s->else_body, {"endfor"});
      return s;
    }
    if (word == "set") {
      s->targets.push_back(ep.expect_name());
      if (ep.is_op(".")) {
        ep.next();
        s->attr = ep.expect_name();
      }
      if (ep.at_end()) {
        s->t = stmt::type::set_block;
        parse_body(s->inner, {"endset"});
        return s;
      }
      s->t = stmt::type::set;
      ep.expect_op("=");
      s->e = ep.expression();
      ep.expect_end();
      return s;
    }
    if (word == "generation") { // an assistant-mask marker: renders as is
      s->t = stmt::type::if_;
      auto yes = std::make_unique<expr>();
      yes->lit = value::boolean(true);
      body b;
      parse_body(b, {"endgeneration"});
      s->branches.emplace_back(std::move(yes), std::move(b));
      return s;
    }
    if (word == "break" || word == "continue") {
      s->t = word == "break" ? stmt::type::brk : stmt::type::cont;
      ep.expect_end();
      return s;
    }
    fail(line, "'" + word + "' is not supported in chat templates here");
  }

  std::vector<piece> pieces_;
  size_t at_ = 0;
  int line_ = 1;
  int depth_ = 0;
  std::unique_ptr<expr_parser> cur_; // the tag that ended the last body
};

} // namespace

body parse_template(const std::string& source) {
  return stmt_parser{lex_template(source)}.parse_all();
}

} // namespace outrider::text::jinja
