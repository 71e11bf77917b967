#include "cluster/text/normalizer.hpp"

#include <cstdlib>
#include <utf8proc.h>
#include <vector>

#include "cluster/text/regex.hpp"
#include "cluster/text/utf8.hpp"

namespace outrider::text {

namespace {

bool ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80)
      return false;
  return true;
}

class unicode_form final : public normalizer {
 public:
  explicit unicode_form(int options) : options_(options) {}
  std::string apply(std::string s) const override {
    if (ascii(s))
      return s; // every form leaves ASCII as it is
    utf8proc_uint8_t* out = nullptr;
    auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                          static_cast<utf8proc_ssize_t>(s.size()), &out,
                          static_cast<utf8proc_option_t>(options_));
    if (n < 0)
      return s; // not reached: the input was checked
    std::string r(reinterpret_cast<char*>(out), static_cast<size_t>(n));
    std::free(out);
    return r;
  }

 private:
  int options_;
};

class lowercase final : public normalizer {
 public:
  std::string apply(std::string s) const override {
    std::string out;
    out.reserve(s.size());
    auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
    utf8proc_ssize_t i = 0, n = static_cast<utf8proc_ssize_t>(s.size());
    while (i < n) {
      utf8proc_int32_t cp = 0;
      auto len = utf8proc_iterate(p + i, n - i, &cp);
      if (len <= 0)
        break;
      append_utf8(out, static_cast<char32_t>(utf8proc_tolower(cp)));
      i += len;
    }
    return out;
  }
};

class prepend final : public normalizer {
 public:
  explicit prepend(std::string p) : p_(std::move(p)) {}
  std::string apply(std::string s) const override {
    return s.empty() ? s : p_ + s;
  }

 private:
  std::string p_;
};

class replace final : public normalizer {
 public:
  replace(std::unique_ptr<regex> re, std::string content)
    : re_(std::move(re)), content_(std::move(content)) {}
  std::string apply(std::string s) const override {
    std::string out;
    size_t last = 0;
    re_->for_each(s, [&](size_t b, size_t e) {
      out.append(s, last, b - last);
      out += content_;
      last = e;
    });
    out.append(s, last);
    return out;
  }

 private:
  std::unique_ptr<regex> re_;
  std::string content_;
};

class strip final : public normalizer {
 public:
  strip(bool left, bool right) : left_(left), right_(right) {}
  std::string apply(std::string s) const override {
    auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
    size_t b = 0, e = s.size();
    while (left_ && b < e && space(s[b]))
      ++b;
    while (right_ && e > b && space(s[e - 1]))
      --e;
    return s.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class sequence final : public normalizer {
 public:
  explicit sequence(std::vector<std::unique_ptr<normalizer>> parts)
    : parts_(std::move(parts)) {}
  std::string apply(std::string s) const override {
    for (const auto& p : parts_)
      s = p->apply(std::move(s));
    return s;
  }

 private:
  std::vector<std::unique_ptr<normalizer>> parts_;
};

} // namespace

std::unique_ptr<normalizer> make_normalizer(const nlohmann::json& j,
                                            std::string* why) {
  if (j.is_null())
    return nullptr;
  auto type = j.value("type", std::string{});
  const int stable = UTF8PROC_STABLE;
  if (type == "NFC")
    return std::make_unique<unicode_form>(stable | UTF8PROC_COMPOSE);
  if (type == "NFD")
    return std::make_unique<unicode_form>(stable | UTF8PROC_DECOMPOSE);
  if (type == "NFKC")
    return std::make_unique<unicode_form>(stable | UTF8PROC_COMPOSE |
                                          UTF8PROC_COMPAT);
  if (type == "NFKD")
    return std::make_unique<unicode_form>(stable | UTF8PROC_DECOMPOSE |
                                          UTF8PROC_COMPAT);
  if (type == "Lowercase")
    return std::make_unique<lowercase>();
  if (type == "Prepend")
    return std::make_unique<prepend>(j.value("prepend", std::string{}));
  if (type == "Strip")
    return std::make_unique<strip>(j.value("strip_left", true),
                                   j.value("strip_right", true));
  if (type == "Replace") {
    auto re =
      pattern_from_json(j.value("pattern", nlohmann::json::object()), why);
    if (!re)
      return nullptr;
    return std::make_unique<replace>(std::move(re),
                                     j.value("content", std::string{}));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<normalizer>> parts;
    for (const auto& n : j.value("normalizers", nlohmann::json::array())) {
      auto p = make_normalizer(n, why);
      if (!p && !why->empty())
        return nullptr;
      if (p)
        parts.push_back(std::move(p));
    }
    return std::make_unique<sequence>(std::move(parts));
  }
  *why = "normalizer '" + type + "' is not supported";
  return nullptr;
}

} // namespace outrider::text
