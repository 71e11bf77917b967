#include "cluster/text/jinja/builtins.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "cluster/text/jinja/ast.hpp"
#include "cluster/text/jinja/ops.hpp"
#include "cluster/text/utf8.hpp"

namespace outrider::text::jinja {

using namespace ops;

list iterate(const value& v) {
  switch (v.k) {
  case value::kind::list:
    return *v.l;
  case value::kind::dict: {
    list keys;
    for (const auto& kv : *v.m)
      keys.push_back(value::string(kv.first));
    return keys;
  }
  case value::kind::string: {
    list chars;
    for (size_t i = 0; i < v.s.size();) {
      size_t n =
        std::max<size_t>(1, char_length(std::string_view(v.s).substr(i)));
      chars.push_back(value::string(v.s.substr(i, n)));
      i += n;
    }
    return chars;
  }
  case value::kind::undefined:
  case value::kind::none:
    return {};
  default:
    fail(std::string("'") + type_name(v) + "' object is not iterable");
  }
}

bool contains(const value& c, const value& x) {
  switch (c.k) {
  case value::kind::string:
    return x.is_string() && c.s.find(x.s) != std::string::npos;
  case value::kind::list:
    return std::any_of(c.l->begin(), c.l->end(),
                       [&](const value& e) { return equal(e, x); });
  case value::kind::dict:
    return x.is_string() && c.get(x.s).defined();
  default:
    fail(std::string("argument of type '") + type_name(c) +
         "' is not iterable");
  }
}

value arithmetic(const std::string& op, const value& a, const value& b) {
  using k = value::kind;
  if (op == "+") {
    if (a.is_string() && b.is_string())
      return value::string(a.s + b.s);
    if (a.k == k::list && b.k == k::list) {
      auto l = *a.l;
      l.insert(l.end(), b.l->begin(), b.l->end());
      return value::make_list(std::move(l));
    }
  }
  if (op == "*" && a.is_string() && b.k == k::integer) {
    std::string s;
    for (int64_t n = 0; n < b.i && s.size() < (1u << 24); ++n)
      s += a.s;
    return value::string(std::move(s));
  }
  if (!a.is_number() || !b.is_number())
    fail(std::string("unsupported operand types for ") + op + ": '" +
         type_name(a) + "' and '" + type_name(b) + "'");
  bool ints = a.k == k::integer && b.k == k::integer;
  double x = a.as_double(), y = b.as_double();
  if ((op == "/" || op == "//" || op == "%") && y == 0)
    fail("division by zero");
  if (op == "+")
    return ints ? value::integer(a.i + b.i) : value::real(x + y);
  if (op == "-")
    return ints ? value::integer(a.i - b.i) : value::real(x - y);
  if (op == "*")
    return ints ? value::integer(a.i * b.i) : value::real(x * y);
  if (op == "/")
    return value::real(x / y);
  if (op == "//")
    return ints ? value::integer(static_cast<int64_t>(std::floor(x / y)))
                : value::real(std::floor(x / y));
  if (op == "%") {
    if (ints) {
      int64_t r = a.i % b.i;
      return value::integer(r != 0 && ((r < 0) != (b.i < 0)) ? r + b.i : r);
    }
    double r = std::fmod(x, y);
    return value::real(r != 0 && ((r < 0) != (y < 0)) ? r + y : r);
  }
  if (op == "**")
    return ints && b.i >= 0
             ? value::integer(static_cast<int64_t>(std::pow(x, y)))
             : value::real(std::pow(x, y));
  fail("unknown operator " + op);
}

bool apply_test(const std::string& name, const value& v,
                const std::vector<value>& args) {
  using k = value::kind;
  auto a0 = args.empty() ? value{} : args[0];
  if (name == "defined")
    return v.defined();
  if (name == "undefined")
    return !v.defined();
  if (name == "none")
    return v.k == k::none;
  if (name == "boolean")
    return v.k == k::boolean;
  if (name == "true")
    return v.k == k::boolean && v.b;
  if (name == "false")
    return v.k == k::boolean && !v.b;
  if (name == "string")
    return v.is_string();
  if (name == "number")
    return v.is_number();
  if (name == "integer")
    return v.k == k::integer;
  if (name == "float")
    return v.k == k::real;
  if (name == "mapping")
    return v.k == k::dict;
  if (name == "iterable" || name == "sequence")
    return v.k == k::list || v.k == k::string || v.k == k::dict;
  if (name == "callable")
    return v.k == k::function;
  if (name == "even" || name == "odd")
    return v.k == k::integer && (v.i % 2 == 0) == (name == "even");
  if (name == "divisibleby")
    return v.k == k::integer && a0.k == k::integer && a0.i != 0 &&
           v.i % a0.i == 0;
  if (name == "eq" || name == "equalto" || name == "sameas" || name == "==")
    return equal(v, a0);
  if (name == "ne" || name == "!=")
    return !equal(v, a0);
  if (name == "lt" || name == "<")
    return less(v, a0);
  if (name == "gt" || name == ">")
    return less(a0, v);
  if (name == "le" || name == "<=")
    return !less(a0, v);
  if (name == "ge" || name == ">=")
    return !less(v, a0);
  if (name == "in")
    return contains(a0, v);
  if (name == "lower" || name == "upper")
    return v.is_string() && v.s == case_of(v.s, name == "lower" ? 0 : 1);
  fail("no test named '" + name + "'");
}

namespace {

using args = const std::vector<value>&;

// A function bound to `obj`.
template <class Fn>
value bind(const value& obj, Fn fn) {
  return value::make_function(
    [obj, fn](const std::vector<value>& a, const kwargs& kw) {
      return fn(obj, a, kw);
    });
}

value starts_or_ends(const value& o, args a, bool starts) {
  list options = a.empty()                     ? list{}
                 : a[0].k == value::kind::list ? *a[0].l
                                               : list{a[0]};
  for (const auto& p : options) {
    auto s = need_string(p, starts ? "startswith" : "endswith");
    bool hit = starts ? o.s.compare(0, s.size(), s) == 0
                      : o.s.size() >= s.size() &&
                          o.s.compare(o.s.size() - s.size(), s.size(), s) == 0;
    if (hit)
      return value::boolean(true);
  }
  return value::boolean(false);
}

value find_or_count(const value& o, args a, bool find) {
  auto s = a.empty() ? std::string{} : a[0].str();
  if (find) {
    auto at = o.s.find(s);
    return value::integer(at == std::string::npos ? -1 : int64_t(at));
  }
  int64_t n = 0;
  for (size_t at = o.s.find(s); !s.empty() && at != std::string::npos;
       at = o.s.find(s, at + s.size()))
    ++n;
  return value::integer(n);
}

value string_method(const value& obj, const std::string& name) {
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return bind(obj, [name](const value& o, args a, const kwargs& kw) {
      return value::string(
        strip(o.s, arg(a, 0, kw, "chars"), name != "rstrip", name != "lstrip"));
    });
  if (name == "split")
    return bind(obj, [](const value& o, args a, const kwargs& kw) {
      return split(o.s, arg(a, 0, kw, "sep"), arg(a, 1, kw, "maxsplit"));
    });
  if (name == "startswith" || name == "endswith")
    return bind(obj, [name](const value& o, args a, const kwargs&) {
      return starts_or_ends(o, a, name == "startswith");
    });
  if (name == "upper" || name == "lower" || name == "title" ||
      name == "capitalize")
    return bind(obj, [name](const value& o, args, const kwargs&) {
      return apply_filter(name, o, {}, {});
    });
  if (name == "replace")
    return bind(obj, [](const value& o, args a, const kwargs&) {
      return value::string(replace_all(
        o.s, a.size() > 0 ? a[0].str() : "", a.size() > 1 ? a[1].str() : "",
        a.size() > 2 && a[2].k == value::kind::integer ? a[2].i : -1));
    });
  if (name == "find" || name == "count")
    return bind(obj, [name](const value& o, args a, const kwargs&) {
      return find_or_count(o, a, name == "find");
    });
  if (name == "join")
    return bind(obj, [](const value& o, args a, const kwargs&) {
      return apply_filter("join", a.empty() ? value::make_list() : a[0], {o},
                          {});
    });
  return value::undefined(name);
}

value dict_method(const value& obj, const std::string& name) {
  if (name == "items")
    return bind(
      obj, [](const value& o, args, const kwargs&) { return items_of(o); });
  if (name == "keys" || name == "values")
    return bind(obj, [name](const value& o, args, const kwargs&) {
      list out;
      for (const auto& [key, x] : *o.m)
        out.push_back(name == "keys" ? value::string(key) : x);
      return value::make_list(std::move(out));
    });
  if (name == "get")
    return bind(obj, [](const value& o, args a, const kwargs&) {
      auto x = a.empty() ? value{} : o.get(a[0].str());
      return x.defined() ? x : (a.size() > 1 ? a[1] : value::none());
    });
  return value::undefined(name);
}

} // namespace

value method_of(const value& obj, const std::string& name) {
  if (obj.k == value::kind::string)
    return string_method(obj, name);
  if (obj.k == value::kind::dict && !obj.is_namespace)
    return dict_method(obj, name);
  return value::undefined(name);
}

dict globals() {
  dict g;
  g.emplace_back(
    "range",
    value::make_function([](const std::vector<value>& a, const kwargs&) {
      int64_t b = 0, e = 0, step = 1;
      if (a.size() == 1)
        e = a[0].i;
      if (a.size() >= 2)
        b = a[0].i, e = a[1].i;
      if (a.size() >= 3)
        step = a[2].i;
      if (step == 0)
        fail("range() step must not be zero");
      list out;
      for (int64_t i = b; (step > 0 ? i < e : i > e) && out.size() < 1'000'000;
           i += step)
        out.push_back(value::integer(i));
      return value::make_list(std::move(out));
    }));
  auto make_dict = [](bool ns) {
    return value::make_function(
      [ns](const std::vector<value>& a, const kwargs& kw) {
        dict d;
        if (!a.empty() && a[0].k == value::kind::dict)
          d = *a[0].m;
        for (const auto& [key, x] : kw)
          d.emplace_back(key, x);
        auto v = value::make_dict(std::move(d));
        v.is_namespace = ns;
        return v;
      });
  };
  g.emplace_back("namespace", make_dict(true));
  g.emplace_back("dict", make_dict(false));
  g.emplace_back(
    "raise_exception", value::make_function([](const std::vector<value>& a,
                                               const kwargs&) -> value {
      throw template_error{"the template refused the messages: " +
                           (a.empty() ? std::string{} : a[0].str())};
    }));
  g.emplace_back(
    "strftime_now",
    value::make_function([](const std::vector<value>& a, const kwargs&) {
      std::time_t now = std::time(nullptr);
      std::tm tm{};
      ::localtime_r(&now, &tm);
      char buf[256];
      auto fmt = a.empty() ? std::string("%Y-%m-%d") : a[0].str();
      size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
      return value::string(std::string(buf, n));
    }));
  return g;
}

} // namespace outrider::text::jinja
