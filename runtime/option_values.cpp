// The syntax of option values, and the typed getters of parsed options.
#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "runtime/options.hpp"

namespace outrider::runtime {

std::optional<bool> parse_bool(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), ::tolower);
  if (l == "true" || l == "yes" || l == "on" || l == "1")
    return true;
  if (l == "false" || l == "no" || l == "off" || l == "0")
    return false;
  return std::nullopt;
}

std::optional<int64_t> parse_int(const std::string& s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || s.empty())
    return std::nullopt;
  return v;
}

std::optional<std::chrono::milliseconds> parse_duration(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
    ++i;
  if (i == 0 || i > 12)
    return std::nullopt;
  auto n = *parse_int(s.substr(0, i));
  auto unit = s.substr(i);
  using namespace std::chrono;
  if (unit.empty() || unit == "ms")
    return milliseconds{n};
  if (unit == "s")
    return duration_cast<milliseconds>(seconds{n});
  if (unit == "m")
    return duration_cast<milliseconds>(minutes{n});
  if (unit == "h")
    return duration_cast<milliseconds>(hours{n});
  return std::nullopt;
}

const options::value& options::at(const std::string& key) const {
  auto i = values_.find(key);
  if (i == values_.end())
    throw std::logic_error("option not declared: " + key);
  return i->second;
}

const std::string& options::get_string(const std::string& key) const {
  return at(key).text;
}

int64_t options::get_int(const std::string& key) const {
  return parse_int(at(key).text).value_or(0);
}

bool options::get_bool(const std::string& key) const {
  return parse_bool(at(key).text).value_or(false);
}

std::chrono::milliseconds options::get_duration(const std::string& key) const {
  return parse_duration(at(key).text).value_or(std::chrono::milliseconds{0});
}

double options::get_number(const std::string& key) const {
  return std::strtod(at(key).text.c_str(), nullptr);
}

option_source options::source(const std::string& key) const {
  return at(key).src;
}

void options::set(const std::string& key, std::string text, option_source src) {
  values_[key] = value{std::move(text), src};
}

} // namespace outrider::runtime
