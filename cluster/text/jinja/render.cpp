#include "cluster/text/jinja/render.hpp"

#include <algorithm>

#include "cluster/text/jinja/builtins.hpp"
#include "cluster/text/jinja/ops.hpp"

namespace outrider::text::jinja {

namespace {

[[noreturn]] void fail(int line, const std::string& what) {
  throw template_error{"line " + std::to_string(line) + ": " + what};
}

class renderer {
 public:
  renderer(const dict& vars, const render_limits& lim) : lim_(lim) {
    scopes_.emplace_back(globals());
    scopes_.emplace_back(vars);
  }

  std::string run(const body& b) {
    exec(b);
    return std::move(out_);
  }

 private:
  enum class flow { normal, brk, cont };

  value lookup(const std::string& name) const {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s)
      for (const auto& [k, v] : *s)
        if (k == name)
          return v;
    return value::undefined(name);
  }
  void assign(const std::string& name, value v) {
    auto& top = scopes_.back();
    for (auto& [k, x] : top)
      if (k == name) {
        x = std::move(v);
        return;
      }
    top.emplace_back(name, std::move(v));
  }

  void emit(const std::string& s, int line) {
    if (out_.size() + s.size() > lim_.max_output)
      fail(line, "the rendered text passes " + std::to_string(lim_.max_output) +
                   " bytes");
    out_ += s;
  }

  flow exec(const body& b) {
    for (const auto& s : b) {
      auto f = exec(*s);
      if (f != flow::normal)
        return f;
    }
    return flow::normal;
  }

  flow exec(const stmt& s) {
    switch (s.t) {
    case stmt::type::text:
      emit(s.text, s.line);
      return flow::normal;
    case stmt::type::output:
      emit(eval(*s.e).str(), s.line);
      return flow::normal;
    case stmt::type::if_:
      for (const auto& [cond, b] : s.branches)
        if (eval(*cond).truthy())
          return exec(b);
      return exec(s.else_body);
    case stmt::type::for_:
      return loop(s);
    case stmt::type::set:
      set(s, eval(*s.e));
      return flow::normal;
    case stmt::type::set_block: {
      std::string saved = std::move(out_);
      out_.clear();
      exec(s.inner);
      std::string captured = std::move(out_);
      out_ = std::move(saved);
      set(s, value::string(std::move(captured)));
      return flow::normal;
    }
    case stmt::type::brk:
      return flow::brk;
    case stmt::type::cont:
      return flow::cont;
    }
    return flow::normal;
  }

  void set(const stmt& s, value v) {
    if (s.attr.empty())
      return assign(s.targets[0], std::move(v));
    auto ns = lookup(s.targets[0]);
    if (ns.k != value::kind::dict || !ns.is_namespace)
      fail(s.line, "'" + s.targets[0] + "' is not a namespace");
    for (auto& [k, x] : *ns.m)
      if (k == s.attr) {
        x = std::move(v);
        return;
      }
    ns.m->emplace_back(s.attr, std::move(v));
  }

  dict loop_info(size_t i, size_t n, const list& items) {
    auto I = [](size_t x) { return value::integer(static_cast<int64_t>(x)); };
    return {
      {"index", I(i + 1)},
      {"index0", I(i)},
      {"revindex", I(n - i)},
      {"revindex0", I(n - i - 1)},
      {"first", value::boolean(i == 0)},
      {"last", value::boolean(i + 1 == n)},
      {"length", I(n)},
      {"previtem", i > 0 ? items[i - 1] : value::undefined("previtem")},
      {"nextitem", i + 1 < n ? items[i + 1] : value::undefined("nextitem")}};
  }

  flow loop(const stmt& s) {
    auto all = iterate(eval(*s.e));
    list items;
    for (const auto& x : all) {
      if (s.loop_filter) {
        scopes_.emplace_back();
        bind_targets(s, x);
        bool keep = eval(*s.loop_filter).truthy();
        scopes_.pop_back();
        if (!keep)
          continue;
      }
      items.push_back(x);
    }
    if (items.empty())
      return exec(s.else_body);
    for (size_t i = 0; i < items.size(); ++i) {
      if (++iterations_ > lim_.max_iterations)
        fail(s.line, "more than " + std::to_string(lim_.max_iterations) +
                       " loop iterations");
      scopes_.emplace_back(); // each turn starts from the enclosing scope
      scopes_.back().emplace_back(
        "loop", value::make_dict(loop_info(i, items.size(), items)));
      bind_targets(s, items[i]);
      auto f = exec(s.inner);
      scopes_.pop_back();
      if (f == flow::brk)
        break;
    }
    return flow::normal;
  }

  void bind_targets(const stmt& s, const value& x) {
    if (s.targets.size() == 1)
      return assign(s.targets[0], x);
    if (x.k != value::kind::list || x.l->size() != s.targets.size())
      fail(s.line, "cannot unpack " + x.repr() + " into " +
                     std::to_string(s.targets.size()) + " names");
    for (size_t n = 0; n < s.targets.size(); ++n)
      assign(s.targets[n], (*x.l)[n]);
  }

  value eval(const expr& e);
  value eval_binary(const expr& e);
  value eval_filter(const expr& e);
  // A call's, filter's or test's arguments (kids[1..] and keywords).
  std::pair<std::vector<value>, kwargs> arguments(const expr& e) {
    std::pair<std::vector<value>, kwargs> out;
    for (size_t n = 1; n < e.kids.size(); ++n)
      out.first.push_back(eval(*e.kids[n]));
    for (const auto& [k, x] : e.kw)
      out.second.emplace_back(k, eval(*x));
    return out;
  }
  value eval_test(const expr& e);
  value eval_call(const expr& e);
  value subscript(const expr& e, const value& obj, const value& key);
  value slice(const expr& e, const value& obj);

  const render_limits& lim_;
  std::vector<dict> scopes_;
  std::string out_;
  size_t iterations_ = 0;
};

[[noreturn]] void undefined_use(const expr& e, const value& v) {
  fail(e.line, "'" + (v.undefined_name.empty() ? "it" : v.undefined_name) +
                 "' is undefined");
}

value renderer::eval(const expr& e) {
  switch (e.t) {
  case expr::type::literal:
    return e.lit;
  case expr::type::name:
    return lookup(e.name);
  case expr::type::attr: {
    auto obj = eval(*e.kids[0]);
    if (!obj.defined())
      undefined_use(*e.kids[0], obj);
    auto m = method_of(obj, e.name);
    if (m.defined())
      return m;
    auto v = obj.get(e.name);
    if (!v.defined())
      v.undefined_name = e.name;
    return v;
  }
  case expr::type::item: {
    auto obj = eval(*e.kids[0]);
    return subscript(e, obj, eval(*e.kids[1]));
  }
  case expr::type::slice:
    return slice(e, eval(*e.kids[0]));
  case expr::type::call:
    return eval_call(e);
  case expr::type::filter:
    return eval_filter(e);
  case expr::type::test:
    return eval_test(e);
  case expr::type::unary: {
    auto v = eval(*e.kids[0]);
    if (e.name == "not")
      return value::boolean(!v.truthy());
    if (!v.is_number())
      fail(e.line,
           "bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
    if (e.name == "+")
      return v;
    return v.k == value::kind::integer ? value::integer(-v.i)
                                       : value::real(-v.d);
  }
  case expr::type::binary:
    return eval_binary(e);
  case expr::type::cond:
    if (eval(*e.kids[1]).truthy())
      return eval(*e.kids[0]);
    return e.kids[2] ? eval(*e.kids[2]) : value::undefined("else");
  case expr::type::list_lit: {
    list l;
    for (const auto& k : e.kids)
      l.push_back(eval(*k));
    return value::make_list(std::move(l));
  }
  case expr::type::dict_lit: {
    dict d;
    for (size_t n = 0; n + 1 < e.kids.size(); n += 2)
      d.emplace_back(eval(*e.kids[n]).str(), eval(*e.kids[n + 1]));
    return value::make_dict(std::move(d));
  }
  }
  fail(e.line, "unknown expression");
}

value renderer::eval_filter(const expr& e) {
  auto v = eval(*e.kids[0]);
  auto [args, kw] = arguments(e);
  try {
    return apply_filter(e.name, v, args, kw);
  } catch (const template_error& err) {
    fail(e.line, err.message);
  }
}

value renderer::eval_test(const expr& e) {
  auto v = eval(*e.kids[0]);
  auto args = arguments(e).first;
  try {
    return value::boolean(apply_test(e.name, v, args) != e.negated);
  } catch (const template_error& err) {
    fail(e.line, err.message);
  }
}

value renderer::eval_binary(const expr& e) {
  const auto& op = e.name;
  auto a = eval(*e.kids[0]);
  if (op == "and")
    return a.truthy() ? eval(*e.kids[1]) : a;
  if (op == "or")
    return a.truthy() ? a : eval(*e.kids[1]);
  auto b = eval(*e.kids[1]);
  if (op == "==")
    return value::boolean(equal(a, b));
  if (op == "!=")
    return value::boolean(!equal(a, b));
  if (op == "~")
    return value::string(a.str() + b.str());
  try {
    if (op == "in" || op == "notin")
      return value::boolean(contains(b, a) == (op == "in"));
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      bool comparable =
        (a.is_number() && b.is_number()) || (a.is_string() && b.is_string());
      if (!comparable)
        fail(e.line, "'" + op + "' not supported between '" + type_name(a) +
                       "' and '" + type_name(b) + "'");
      bool r = op == "<"    ? less(a, b)
               : op == ">"  ? less(b, a)
               : op == "<=" ? !less(b, a)
                            : !less(a, b);
      return value::boolean(r);
    }
    return arithmetic(op, a, b);
  } catch (const template_error& err) {
    if (err.message.rfind("line ", 0) == 0)
      throw;
    fail(e.line, err.message);
  }
}

value renderer::eval_call(const expr& e) {
  auto f = eval(*e.kids[0]);
  if (f.k != value::kind::function)
    fail(e.line, std::string("'") + type_name(f) + "' is not callable" +
                   (f.undefined_name.empty()
                      ? std::string{}
                      : " ('" + f.undefined_name + "' is undefined)"));
  auto [args, kw] = arguments(e);
  try {
    return (*f.f)(args, kw);
  } catch (const template_error& err) {
    if (err.message.rfind("the template refused", 0) == 0)
      throw;
    fail(e.line, err.message);
  }
}

value renderer::subscript(const expr& e, const value& obj, const value& key) {
  switch (obj.k) {
  case value::kind::undefined:
    undefined_use(*e.kids[0], obj);
  case value::kind::dict:
    return obj.get(key.str());
  case value::kind::list:
  case value::kind::string: {
    if (key.k != value::kind::integer)
      fail(e.line, "indices must be integers");
    auto items = obj.k == value::kind::list ? *obj.l : iterate(obj);
    int64_t n = static_cast<int64_t>(items.size());
    int64_t i = key.i < 0 ? key.i + n : key.i;
    if (i < 0 || i >= n)
      return value::undefined("[" + std::to_string(key.i) + "]");
    return items[static_cast<size_t>(i)];
  }
  default:
    fail(e.line,
         std::string("'") + type_name(obj) + "' object is not subscriptable");
  }
}

value renderer::slice(const expr& e, const value& obj) {
  if (obj.k != value::kind::list && obj.k != value::kind::string)
    fail(e.line, std::string("cannot slice a ") + type_name(obj));
  auto part = [&](size_t k) -> std::optional<int64_t> {
    if (!e.kids[k])
      return std::nullopt;
    auto v = eval(*e.kids[k]);
    if (v.k == value::kind::none)
      return std::nullopt;
    if (v.k != value::kind::integer)
      fail(e.line, "slice indices must be integers");
    return v.i;
  };
  auto start = part(1), stop = part(2), step_v = part(3);
  if (step_v.value_or(1) == 0)
    fail(e.line, "slice step cannot be zero");
  return ops::slice(obj, start, stop, step_v.value_or(1));
}

} // namespace

std::string render(const body& b, const dict& vars, const render_limits& lim) {
  return renderer{vars, lim}.run(b);
}

} // namespace outrider::text::jinja
