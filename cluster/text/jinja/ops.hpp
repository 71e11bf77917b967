#pragma once

// Python's string and sequence operations shared by the filters, the
// methods and the tests.

#include <optional>
#include <string>
#include <vector>

#include "cluster/text/jinja/value.hpp"

namespace outrider::text::jinja::ops {

[[noreturn]] void fail(const std::string& what);
/// A filter's or method's argument by position or by name.
const value& arg(const std::vector<value>& a, size_t n, const kwargs& kw,
                 const char* name);
std::string need_string(const value& v, const char* what);
std::string strip(const std::string& s, const value& chars, bool left,
                  bool right);
value split(const std::string& s, const value& sep, const value& maxsplit);
std::string replace_all(std::string s, const std::string& from,
                        const std::string& to, int64_t count = -1);
/// 0 lower, 1 upper, 2 title.
std::string case_of(std::string s, int how);
int64_t length(const value& v);
value items_of(const value& v);
value select(const value& v, const std::vector<value>& args, bool attr,
             bool keep);
/// Python's obj[start:stop:step] of a list or string (step not 0).
value slice(const value& obj, std::optional<int64_t> start,
            std::optional<int64_t> stop, int64_t step);
std::string indent(const std::string& s, int64_t width, bool first, bool blank);

} // namespace outrider::text::jinja::ops
