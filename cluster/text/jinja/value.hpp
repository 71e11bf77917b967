#pragma once

// The values of outrider's chat-template interpreter, with Python's
// semantics where templates can see them: truthiness, equality, str()
// (True, None, 1.0, ['a']) and json.dumps (for `tojson`). Lists, dicts and
// namespaces are shared: a `set ns.x` inside a loop is seen outside it, as
// in Jinja.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace outrider::text::jinja {

struct value;
using list = std::vector<value>;
/// Insertion-ordered, as Python's dict (and the request's JSON) is.
using dict = std::vector<std::pair<std::string, value>>;
using kwargs = std::vector<std::pair<std::string, value>>;
using function =
  std::function<value(const std::vector<value>& args, const kwargs& kw)>;

struct value {
  enum class kind {
    undefined,
    none,
    boolean,
    integer,
    real,
    string,
    list,
    dict,
    function
  };
  kind k = kind::undefined;
  bool b = false;
  int64_t i = 0;
  double d = 0;
  std::string s;
  std::shared_ptr<jinja::list> l;
  std::shared_ptr<jinja::dict> m;
  bool is_namespace = false; // a dict whose attributes `set` may change
  std::shared_ptr<function> f;
  std::string undefined_name; // what was looked up, for the error

  value() = default;
  static value none();
  static value boolean(bool v);
  static value integer(int64_t v);
  static value real(double v);
  static value string(std::string v);
  static value make_list(jinja::list v = {});
  static value make_dict(jinja::dict v = {});
  static value make_function(function fn);
  static value undefined(std::string name);

  bool defined() const { return k != kind::undefined; }
  bool is_string() const { return k == kind::string; }
  bool is_number() const { return k == kind::integer || k == kind::real; }
  bool truthy() const;
  /// A dict's item (or undefined).
  value get(const std::string& key) const;
  /// Python's str(): what {{ }} prints (undefined prints nothing).
  std::string str() const;
  /// Python's repr(), for values inside lists and dicts.
  std::string repr() const;
  /// json.dumps(v, ensure_ascii=False, indent=..., separators=...,
  /// sort_keys=...).
  std::string to_json(int indent = -1, bool sort_keys = false) const;
  double as_double() const { return k == kind::real ? d : double(i); }
};

bool equal(const value& a, const value& b);
/// a < b for numbers and strings (false otherwise: the caller checks).
bool less(const value& a, const value& b);
const char* type_name(const value& v);

value from_json(const nlohmann::ordered_json& j);

} // namespace outrider::text::jinja
