#pragma once

// The filters, tests, methods and globals templates may use, with
// Python's and Jinja's semantics (transformers' tojson: json.dumps with
// ensure_ascii=False).

#include <string>
#include <vector>

#include "cluster/text/jinja/value.hpp"

namespace outrider::text::jinja {

/// `name` applied to `v`; throws template_error when unknown or misused.
value apply_filter(const std::string& name, const value& v,
                   const std::vector<value>& args, const kwargs& kw);
bool apply_test(const std::string& name, const value& v,
                const std::vector<value>& args);
/// `obj.name` when it is a method of a string, dict or list (a function
/// bound to `obj`), else undefined.
value method_of(const value& obj, const std::string& name);
/// range, namespace, dict, raise_exception, strftime_now.
dict globals();

/// The items a for loop sees: a list's, a dict's keys, a string's
/// characters; nothing for undefined or none.
list iterate(const value& v);
/// Python's a op b for + - * / // % ** (throws on unsupported types).
value arithmetic(const std::string& op, const value& a, const value& b);
bool contains(const value& container, const value& item);

} // namespace outrider::text::jinja
