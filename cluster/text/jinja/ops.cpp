#include "cluster/text/jinja/ops.hpp"

#include <algorithm>
#include <cctype>

#include "cluster/text/jinja/ast.hpp"
#include "cluster/text/jinja/builtins.hpp"

namespace outrider::text::jinja::ops {

[[noreturn]] void fail(const std::string& what) {
  throw template_error{what};
}

const value& arg(const std::vector<value>& a, size_t n, const kwargs& kw,
                 const char* name) {
  for (const auto& [k, v] : kw)
    if (k == name)
      return v;
  static const value absent;
  return n < a.size() ? a[n] : absent;
}

std::string need_string(const value& v, const char* what) {
  if (!v.is_string())
    fail(std::string(what) + " needs a string, not " + type_name(v));
  return v.s;
}

// Python's str.strip family: `chars` (none: whitespace) off either end.
std::string strip(const std::string& s, const value& chars, bool left,
                  bool right) {
  std::string set = chars.is_string() ? chars.s : std::string(" \t\n\r\f\v");
  size_t b = 0, e = s.size();
  while (left && b < e && set.find(s[b]) != std::string::npos)
    ++b;
  while (right && e > b && set.find(s[e - 1]) != std::string::npos)
    --e;
  return s.substr(b, e - b);
}

value split(const std::string& s, const value& sep, const value& maxsplit) {
  int64_t left = maxsplit.k == value::kind::integer ? maxsplit.i : -1;
  list out;
  if (!sep.is_string() || sep.s.empty()) { // whitespace runs
    size_t i = 0;
    while (true) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
        ++i;
      if (i >= s.size())
        break;
      if (left == 0) {
        out.push_back(value::string(strip(s.substr(i), value{}, false, true)));
        break;
      }
      size_t j = i;
      while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j])))
        ++j;
      out.push_back(value::string(s.substr(i, j - i)));
      i = j;
      --left;
    }
    return value::make_list(std::move(out));
  }
  size_t start = 0;
  for (size_t at = s.find(sep.s); at != std::string::npos && left != 0;
       at = s.find(sep.s, start), --left) {
    out.push_back(value::string(s.substr(start, at - start)));
    start = at + sep.s.size();
  }
  out.push_back(value::string(s.substr(start)));
  return value::make_list(std::move(out));
}

std::string replace_all(std::string s, const std::string& from,
                        const std::string& to, int64_t count) {
  if (from.empty())
    return s;
  std::string out;
  size_t last = 0;
  for (size_t at = s.find(from); at != std::string::npos && count != 0;
       at = s.find(from, last), --count) {
    out.append(s, last, at - last);
    out += to;
    last = at + from.size();
  }
  out.append(s, last);
  return out;
}

std::string case_of(std::string s, int how) { // 0 lower, 1 upper, 2 title
  bool word_start = true;
  for (auto& c : s) {
    auto u = static_cast<unsigned char>(c);
    if (how == 0 || (how == 2 && !word_start))
      c = static_cast<char>(std::tolower(u));
    else
      c = static_cast<char>(std::toupper(u));
    word_start = !std::isalpha(u);
  }
  return s;
}

int64_t length(const value& v) {
  switch (v.k) {
  case value::kind::string: {
    int64_t n = 0; // characters, as Python counts
    for (unsigned char c : v.s)
      n += (c & 0xC0) != 0x80;
    return n;
  }
  case value::kind::list:
    return static_cast<int64_t>(v.l->size());
  case value::kind::dict:
    return static_cast<int64_t>(v.m->size());
  case value::kind::undefined:
    return 0;
  default:
    fail(std::string("object of type '") + type_name(v) + "' has no len()");
  }
}

value items_of(const value& v) {
  list out;
  if (v.k == value::kind::dict)
    for (const auto& [k, x] : *v.m)
      out.push_back(value::make_list({value::string(k), x}));
  else if (v.defined() && v.k != value::kind::none)
    fail(std::string("items() of a ") + type_name(v));
  return value::make_list(std::move(out));
}

value select(const value& v, const std::vector<value>& args, bool attr,
             bool keep) {
  list out;
  size_t t = attr ? 1 : 0;
  std::string test = args.size() > t && args[t].is_string() ? args[t].s : "";
  std::vector<value> targs(
    args.size() > t + 1 ? args.begin() + t + 1 : args.end(), args.end());
  for (const auto& x : iterate(v)) {
    const value& subject = attr ? x.get(need_string(args[0], "selectattr")) : x;
    bool ok =
      test.empty() ? subject.truthy() : apply_test(test, subject, targs);
    if (ok == keep)
      out.push_back(x);
  }
  return value::make_list(std::move(out));
}

std::string indent(const std::string& s, int64_t width, bool first,
                   bool blank) {
  std::string pad(static_cast<size_t>(std::max<int64_t>(0, width)), ' ');
  std::string out;
  size_t start = 0;
  bool line0 = true;
  while (start <= s.size()) {
    size_t nl = s.find('\n', start);
    std::string line =
      s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    bool add = line0 ? first : (blank || !line.empty());
    out += (add ? pad : "") + line;
    if (nl == std::string::npos)
      break;
    out += '\n';
    start = nl + 1;
    line0 = false;
  }
  return out;
}

value slice(const value& obj, std::optional<int64_t> start,
            std::optional<int64_t> stop, int64_t step) {
  auto items = obj.k == value::kind::list ? *obj.l : iterate(obj);
  int64_t n = static_cast<int64_t>(items.size());
  auto clamp = [&](std::optional<int64_t> x, int64_t dflt) {
    if (!x)
      return dflt;
    int64_t v = *x < 0 ? *x + n : *x;
    return step > 0 ? std::clamp<int64_t>(v, 0, n)
                    : std::clamp<int64_t>(v, -1, n - 1);
  };
  int64_t b = clamp(start, step > 0 ? 0 : n - 1);
  int64_t end = clamp(stop, step > 0 ? n : -1);
  list out;
  for (int64_t i = b; step > 0 ? i < end : i > end; i += step)
    out.push_back(items[static_cast<size_t>(i)]);
  if (obj.k == value::kind::list)
    return value::make_list(std::move(out));
  std::string s;
  for (const auto& c : out)
    s += c.s;
  return value::string(std::move(s));
}

} // namespace outrider::text::jinja::ops
