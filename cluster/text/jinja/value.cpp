#include "cluster/text/jinja/value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace outrider::text::jinja {

value value::none() {
  value v;
  v.k = kind::none;
  return v;
}
value value::boolean(bool x) {
  value v;
  v.k = kind::boolean;
  v.b = x;
  return v;
}
value value::integer(int64_t x) {
  value v;
  v.k = kind::integer;
  v.i = x;
  return v;
}
value value::real(double x) {
  value v;
  v.k = kind::real;
  v.d = x;
  return v;
}
value value::string(std::string x) {
  value v;
  v.k = kind::string;
  v.s = std::move(x);
  return v;
}
value value::make_list(jinja::list x) {
  value v;
  v.k = kind::list;
  v.l = std::make_shared<jinja::list>(std::move(x));
  return v;
}
value value::make_dict(jinja::dict x) {
  value v;
  v.k = kind::dict;
  v.m = std::make_shared<jinja::dict>(std::move(x));
  return v;
}
value value::make_function(function fn) {
  value v;
  v.k = kind::function;
  v.f = std::make_shared<function>(std::move(fn));
  return v;
}
value value::undefined(std::string name) {
  value v;
  v.undefined_name = std::move(name);
  return v;
}

bool value::truthy() const {
  switch (k) {
  case kind::undefined:
  case kind::none:
    return false;
  case kind::boolean:
    return b;
  case kind::integer:
    return i != 0;
  case kind::real:
    return d != 0;
  case kind::string:
    return !s.empty();
  case kind::list:
    return !l->empty();
  case kind::dict:
    return !m->empty();
  case kind::function:
    return true;
  }
  return false;
}

value value::get(const std::string& key) const {
  if (k == kind::dict)
    for (const auto& [name, v] : *m)
      if (name == key)
        return v;
  return undefined(key);
}

namespace {

// Python's float repr: the shortest digits that round-trip, with ".0" on
// whole numbers and an exponent outside 1e-4 .. 1e16.
std::string float_repr(double d) {
  if (std::isnan(d))
    return "nan";
  if (std::isinf(d))
    return d > 0 ? "inf" : "-inf";
  char buf[64];
  double mag = std::fabs(d);
  auto fmt = (mag != 0 && (mag < 1e-4 || mag >= 1e16))
               ? std::chars_format::scientific
               : std::chars_format::fixed;
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d, fmt);
  std::string s(buf, end);
  if (fmt == std::chars_format::scientific) {
    // to_chars writes 1e+16 / 1e-05; Python writes 1e+16 / 1e-05 too.
    return s;
  }
  if (s.find('.') == std::string::npos)
    s += ".0";
  return s;
}

std::string quote_repr(const std::string& s) {
  // Python picks single quotes unless the text has one and no double.
  char q =
    (s.find('\'') != std::string::npos && s.find('"') == std::string::npos)
      ? '"'
      : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\')
      out += '\\';
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else
      out += c;
  }
  out += q;
  return out;
}

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  out += '"';
}

void json_of(std::string& out, const value& v, int indent, bool sort,
             int depth);

void json_newline(std::string& out, int indent, int depth) {
  if (indent < 0)
    return;
  out += '\n';
  out.append(static_cast<size_t>(indent * depth), ' ');
}

void json_list(std::string& out, const value& v, int indent, bool sort,
               int depth) {
  if (v.l->empty()) {
    out += "[]";
    return;
  }
  out += '[';
  for (size_t i = 0; i < v.l->size(); ++i) {
    if (i)
      out += indent < 0 ? ", " : ",";
    json_newline(out, indent, depth + 1);
    json_of(out, (*v.l)[i], indent, sort, depth + 1);
  }
  json_newline(out, indent, depth);
  out += ']';
}

void json_dict(std::string& out, const value& v, int indent, bool sort,
               int depth) {
  if (v.m->empty()) {
    out += "{}";
    return;
  }
  std::vector<const std::pair<std::string, value>*> items;
  for (const auto& kv : *v.m)
    items.push_back(&kv);
  if (sort)
    std::stable_sort(items.begin(), items.end(),
                     [](auto* a, auto* b) { return a->first < b->first; });
  out += '{';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i)
      out += indent < 0 ? ", " : ",";
    json_newline(out, indent, depth + 1);
    json_string(out, items[i]->first);
    out += ": ";
    json_of(out, items[i]->second, indent, sort, depth + 1);
  }
  json_newline(out, indent, depth);
  out += '}';
}

void json_of(std::string& out, const value& v, int indent, bool sort,
             int depth) {
  using k = value::kind;
  switch (v.k) {
  case k::undefined:
  case k::none:
    out += "null";
    return;
  case k::boolean:
    out += v.b ? "true" : "false";
    return;
  case k::integer:
    out += std::to_string(v.i);
    return;
  case k::real:
    out += std::isfinite(v.d) ? float_repr(v.d)
                              : (std::isnan(v.d) ? "NaN"
                                 : v.d > 0       ? "Infinity"
                                                 : "-Infinity");
    return;
  case k::string:
    json_string(out, v.s);
    return;
  case k::function:
    out += "null";
    return;
  case k::list:
    return json_list(out, v, indent, sort, depth);
  case k::dict:
    return json_dict(out, v, indent, sort, depth);
  }
}

} // namespace

std::string value::str() const {
  switch (k) {
  case kind::undefined:
    return "";
  case kind::none:
    return "None";
  case kind::boolean:
    return b ? "True" : "False";
  case kind::integer:
    return std::to_string(i);
  case kind::real:
    return float_repr(d);
  case kind::string:
    return s;
  default:
    return repr();
  }
}

std::string value::repr() const {
  switch (k) {
  case kind::string:
    return quote_repr(s);
  case kind::list: {
    std::string out = "[";
    for (size_t n = 0; n < l->size(); ++n)
      out += (n ? ", " : "") + (*l)[n].repr();
    return out + "]";
  }
  case kind::dict: {
    std::string out = "{";
    for (size_t n = 0; n < m->size(); ++n)
      out += (n ? ", " : "") + quote_repr((*m)[n].first) + ": " +
             (*m)[n].second.repr();
    return out + "}";
  }
  case kind::function:
    return "<function>";
  default:
    return str();
  }
}

std::string value::to_json(int indent, bool sort_keys) const {
  std::string out;
  json_of(out, *this, indent, sort_keys, 0);
  return out;
}

bool equal(const value& a, const value& b) {
  using k = value::kind;
  if (a.is_number() && b.is_number())
    return a.as_double() == b.as_double();
  if (a.k == k::boolean && b.is_number())
    return double(a.b) == b.as_double();
  if (b.k == k::boolean && a.is_number())
    return double(b.b) == a.as_double();
  if (a.k != b.k)
    return false;
  switch (a.k) {
  case k::undefined:
  case k::none:
    return true;
  case k::boolean:
    return a.b == b.b;
  case k::string:
    return a.s == b.s;
  case k::list:
    if (a.l->size() != b.l->size())
      return false;
    for (size_t n = 0; n < a.l->size(); ++n)
      if (!equal((*a.l)[n], (*b.l)[n]))
        return false;
    return true;
  case k::dict:
    if (a.m->size() != b.m->size())
      return false;
    for (const auto& [key, v] : *a.m)
      if (!equal(v, b.get(key)))
        return false;
    return true;
  default:
    return a.f == b.f;
  }
}

bool less(const value& a, const value& b) {
  if (a.is_number() && b.is_number())
    return a.as_double() < b.as_double();
  if (a.is_string() && b.is_string())
    return a.s < b.s;
  return false;
}

const char* type_name(const value& v) {
  static const char* names[] = {"undefined", "NoneType", "bool",
                                "int",       "float",    "str",
                                "list",      "dict",     "function"};
  return names[static_cast<int>(v.k)];
}

value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
  case nlohmann::ordered_json::value_t::null:
    return value::none();
  case nlohmann::ordered_json::value_t::boolean:
    return value::boolean(j.get<bool>());
  case nlohmann::ordered_json::value_t::number_integer:
    return value::integer(j.get<int64_t>());
  case nlohmann::ordered_json::value_t::number_unsigned:
    return value::integer(static_cast<int64_t>(j.get<uint64_t>()));
  case nlohmann::ordered_json::value_t::number_float:
    return value::real(j.get<double>());
  case nlohmann::ordered_json::value_t::string:
    return value::string(j.get<std::string>());
  case nlohmann::ordered_json::value_t::array: {
    list l;
    for (const auto& e : j)
      l.push_back(from_json(e));
    return value::make_list(std::move(l));
  }
  case nlohmann::ordered_json::value_t::object: {
    dict m;
    for (const auto& [key, e] : j.items())
      m.emplace_back(key, from_json(e));
    return value::make_dict(std::move(m));
  }
  default:
    return value::none();
  }
}

} // namespace outrider::text::jinja
