// The filters (`x | name(args)`), one table entry each.

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_map>

#include "cluster/text/jinja/ast.hpp"
#include "cluster/text/jinja/builtins.hpp"
#include "cluster/text/jinja/ops.hpp"

namespace outrider::text::jinja {

using namespace ops;

namespace {

using args = const std::vector<value>&;
using filter_fn = std::function<value(const value&, args, const kwargs&)>;

value default_of(const value& v, args a, const kwargs& kw) {
  bool boolean = arg(a, 1, kw, "boolean").truthy();
  bool use = boolean ? !v.truthy() : !v.defined();
  return use ? (a.empty() ? value::string("") : a[0]) : v;
}

value escape(const value& v, args, const kwargs&) {
  std::string s = v.str();
  for (auto [from, to] : {std::pair{"&", "&amp;"},
                          {"<", "&lt;"},
                          {">", "&gt;"},
                          {"\"", "&#34;"},
                          {"'", "&#39;"}})
    s = replace_all(s, from, to);
  return value::string(s);
}

value first_last(const value& v, bool first) {
  auto items = iterate(v);
  if (items.empty())
    return value::undefined(first ? "first" : "last");
  return first ? items.front() : items.back();
}

value reverse(const value& v, args, const kwargs&) {
  auto items = iterate(v);
  std::reverse(items.begin(), items.end());
  if (!v.is_string())
    return value::make_list(std::move(items));
  std::string s;
  for (const auto& c : items)
    s += c.s;
  return value::string(s);
}

value join(const value& v, args a, const kwargs& kw) {
  std::string sep = a.empty() ? "" : a[0].str(), out;
  auto attr = arg(a, 1, kw, "attribute");
  bool first = true;
  for (const auto& x : iterate(v)) {
    out +=
      (first ? "" : sep) + (attr.is_string() ? x.get(attr.s).str() : x.str());
    first = false;
  }
  return value::string(out);
}

value to_int(const value& v, args a, const kwargs&) {
  if (v.is_number())
    return value::integer(static_cast<int64_t>(v.as_double()));
  try {
    return value::integer(std::stoll(v.str()));
  } catch (...) {
    return a.empty() ? value::integer(0) : a[0];
  }
}

value to_float(const value& v, args, const kwargs&) {
  if (v.is_number())
    return value::real(v.as_double());
  try {
    return value::real(std::stod(v.str()));
  } catch (...) {
    return value::real(0);
  }
}

value map(const value& v, args a, const kwargs& kw) {
  list out;
  auto attr = arg(a, 0, kw, "attribute");
  for (const auto& x : iterate(v))
    out.push_back(attr.is_string() ? x.get(attr.s)
                  : a.empty()      ? x
                                   : apply_filter(a[0].str(), x, {}, {}));
  return value::make_list(std::move(out));
}

value unique(const value& v, args, const kwargs&) {
  auto out = value::make_list();
  for (const auto& x : iterate(v))
    if (!contains(out, x))
      out.l->push_back(x);
  return out;
}

value sum(const value& v, args, const kwargs&) {
  value total = value::integer(0);
  for (const auto& x : iterate(v))
    total = arithmetic("+", total, x);
  return total;
}

value extreme(const value& v, bool smallest) {
  auto items = iterate(v);
  if (items.empty())
    return value::undefined(smallest ? "min" : "max");
  auto best = items[0];
  for (const auto& x : items)
    if (smallest ? less(x, best) : less(best, x))
      best = x;
  return best;
}

value sort(const value& v, args a, const kwargs& kw) {
  auto items = iterate(v);
  auto attr = arg(a, 2, kw, "attribute");
  bool rev = arg(a, 0, kw, "reverse").truthy();
  std::stable_sort(items.begin(), items.end(),
                   [&](const value& x, const value& y) {
                     const auto& l = attr.is_string() ? x.get(attr.s) : x;
                     const auto& r = attr.is_string() ? y.get(attr.s) : y;
                     return rev ? less(r, l) : less(l, r);
                   });
  return value::make_list(std::move(items));
}

value dictsort(const value& v, args, const kwargs&) {
  auto items = items_of(v);
  std::stable_sort(
    items.l->begin(), items.l->end(),
    [](const value& x, const value& y) { return less((*x.l)[0], (*y.l)[0]); });
  return items;
}

value casing(const value& v, int how) {
  return value::string(case_of(v.str(), how));
}

const std::unordered_map<std::string, filter_fn>& table() {
  static const std::unordered_map<std::string, filter_fn> t = {
    {"length", [](auto& v, args, auto&) { return value::integer(length(v)); }},
    {"count", [](auto& v, args, auto&) { return value::integer(length(v)); }},
    {"default", default_of},
    {"d", default_of},
    {"trim",
     [](auto& v, args a, auto& kw) {
       return value::string(
         strip(need_string(v, "trim"), arg(a, 0, kw, "chars"), true, true));
     }},
    {"lower", [](auto& v, args, auto&) { return casing(v, 0); }},
    {"upper", [](auto& v, args, auto&) { return casing(v, 1); }},
    {"title", [](auto& v, args, auto&) { return casing(v, 2); }},
    {"capitalize",
     [](auto& v, args, auto&) {
       auto s = case_of(v.str(), 0);
       if (!s.empty())
         s[0] =
           static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
       return value::string(s);
     }},
    {"replace",
     [](auto& v, args a, auto& kw) {
       auto n = arg(a, 2, kw, "count");
       return value::string(replace_all(
         v.str(), arg(a, 0, kw, "old").str(), arg(a, 1, kw, "new").str(),
         n.k == value::kind::integer ? n.i : -1));
     }},
    {"tojson",
     [](auto& v, args a, auto& kw) {
       auto ind = arg(a, 0, kw, "indent");
       return value::string(
         v.to_json(ind.k == value::kind::integer ? int(ind.i) : -1,
                   arg(a, 1, kw, "sort_keys").truthy()));
     }},
    {"string", [](auto& v, args, auto&) { return value::string(v.str()); }},
    {"safe", [](auto& v, args, auto&) { return v; }},
    {"e", escape},
    {"escape", escape},
    {"items", [](auto& v, args, auto&) { return items_of(v); }},
    {"list", [](auto& v, args, auto&) { return value::make_list(iterate(v)); }},
    {"first", [](auto& v, args, auto&) { return first_last(v, true); }},
    {"last", [](auto& v, args, auto&) { return first_last(v, false); }},
    {"reverse", reverse},
    {"join", join},
    {"int", to_int},
    {"float", to_float},
    {"abs",
     [](auto& v, args, auto&) {
       return v.k == value::kind::integer
                ? value::integer(v.i < 0 ? -v.i : v.i)
                : value::real(std::fabs(v.as_double()));
     }},
    {"round",
     [](auto& v, args a, auto&) {
       double p = std::pow(10.0, a.empty() ? 0 : a[0].as_double());
       return value::real(std::round(v.as_double() * p) / p);
     }},
    {"select",
     [](auto& v, args a, auto&) { return select(v, a, false, true); }},
    {"reject",
     [](auto& v, args a, auto&) { return select(v, a, false, false); }},
    {"selectattr",
     [](auto& v, args a, auto&) { return select(v, a, true, true); }},
    {"rejectattr",
     [](auto& v, args a, auto&) { return select(v, a, true, false); }},
    {"map", map},
    {"unique", unique},
    {"sum", sum},
    {"min", [](auto& v, args, auto&) { return extreme(v, true); }},
    {"max", [](auto& v, args, auto&) { return extreme(v, false); }},
    {"sort", sort},
    {"dictsort", dictsort},
    {"indent",
     [](auto& v, args a, auto& kw) {
       return value::string(indent(
         v.str(), a.empty() ? 4 : static_cast<int64_t>(a[0].as_double()),
         arg(a, 1, kw, "first").truthy(), arg(a, 2, kw, "blank").truthy()));
     }},
  };
  return t;
}

} // namespace

value apply_filter(const std::string& name, const value& v,
                   const std::vector<value>& a, const kwargs& kw) {
  auto it = table().find(name);
  if (it == table().end())
    fail("no filter named '" + name + "'");
  return it->second(v, a, kw);
}

} // namespace outrider::text::jinja
