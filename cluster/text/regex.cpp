#include "cluster/text/regex.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "cluster/text/utf8.hpp"

namespace outrider::text {

std::unique_ptr<regex> regex::compile(const std::string& pattern, bool literal,
                                      std::string* why) {
  int err = 0;
  PCRE2_SIZE at = 0;
  uint32_t flags = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
  auto* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                             pattern.size(), flags, &err, &at, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    if (why)
      *why = "pattern '" + pattern + "' at " + std::to_string(at) + ": " +
             reinterpret_cast<const char*>(msg);
    return nullptr;
  }
  std::unique_ptr<regex> r{new regex};
  r->code_ = code;
  r->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return r;
}

regex::~regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

void regex::for_each(
  std::string_view subject,
  const std::function<void(size_t, size_t)>& on_match) const {
  auto* code = static_cast<pcre2_code*>(code_);
  auto* md = pcre2_match_data_create_from_pattern(code, nullptr);
  auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t pos = 0;
  while (pos <= subject.size()) {
    int rc = jit_ ? pcre2_jit_match(code, s, subject.size(), pos,
                                    PCRE2_NO_UTF_CHECK, md, nullptr)
                  : pcre2_match(code, s, subject.size(), pos,
                                PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0)
      break; // no match (or a resource limit: the rest is one gap)
    auto* ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    if (e == b) { // empty: step over one character
      if (b >= subject.size())
        break;
      pos = b + std::max<size_t>(1, char_length(subject.substr(b)));
      continue;
    }
    on_match(b, e);
    pos = e;
  }
  pcre2_match_data_free(md);
}

std::unique_ptr<regex> pattern_from_json(const nlohmann::json& p,
                                         std::string* why) {
  if (p.is_object() && p.contains("String") && p["String"].is_string())
    return regex::compile(p["String"].get<std::string>(), true, why);
  if (p.is_object() && p.contains("Regex") && p["Regex"].is_string())
    return regex::compile(p["Regex"].get<std::string>(), false, why);
  *why = "a pattern is neither {\"String\": ...} nor {\"Regex\": ...}";
  return nullptr;
}

} // namespace outrider::text
