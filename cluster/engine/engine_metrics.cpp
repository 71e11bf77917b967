// An engine's Prometheus exposition, checked line by line and re-labelled
// (the text format: prometheus/docs "Exposition formats", text 0.0.4).
#include "cluster/engine/engine_metrics.hpp"

#include <charconv>
#include <map>
#include <optional>
#include <set>

namespace outrider::engine {

namespace {

bool name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         c == ':';
}
bool name_char(char c) {
  return name_start(c) || (c >= '0' && c <= '9');
}

bool metric_name(std::string_view s) {
  if (s.empty() || !name_start(s[0]))
    return false;
  for (char c : s)
    if (!name_char(c))
      return false;
  return true;
}

bool label_name(std::string_view s) {
  return metric_name(s) && s.find(':') == std::string_view::npos &&
         s.rfind("__", 0) != 0;
}

// A sample value: a float, or NaN / +Inf / -Inf as the format spells them.
bool sample_value(std::string_view v) {
  if (v == "NaN" || v == "+Inf" || v == "-Inf" || v == "Inf")
    return true;
  double d = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
  return ec == std::errc{} && end == v.data() + v.size();
}

std::string escaped(std::string_view v, size_t cap) {
  std::string out;
  for (char c : v.substr(0, cap)) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

// A HELP text as it came (already escaped by the format's rules), cut to
// 1 KiB, without control bytes and without a trailing lone backslash.
std::string help_text(std::string_view v) {
  std::string out;
  for (char c : v.substr(0, 1024))
    if (static_cast<unsigned char>(c) >= 0x20)
      out += c;
  size_t slashes = 0;
  for (auto i = out.rbegin(); i != out.rend() && *i == '\\'; ++i)
    ++slashes;
  if (slashes % 2 == 1)
    out.pop_back();
  return out;
}

struct sample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels; // unescaped
  std::string value;
};

// `name{a="x",b="y"} value [timestamp]`; nullopt when it is not that.
std::optional<sample> parse_sample(std::string_view line, size_t max_labels) {
  sample s;
  size_t i = 0;
  while (i < line.size() && name_char(line[i]))
    ++i;
  s.name = std::string(line.substr(0, i));
  if (!metric_name(s.name))
    return std::nullopt;
  if (i < line.size() && line[i] == '{') {
    ++i;
    for (;;) {
      while (i < line.size() && line[i] == ' ')
        ++i;
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      size_t start = i;
      while (i < line.size() && name_char(line[i]))
        ++i;
      auto key = line.substr(start, i - start);
      if (!label_name(key) || i + 1 >= line.size() || line[i] != '=' ||
          line[i + 1] != '"')
        return std::nullopt;
      i += 2;
      std::string val;
      bool closed = false;
      while (i < line.size()) {
        char c = line[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\') {
          if (i >= line.size())
            return std::nullopt;
          char e = line[i++];
          val += e == 'n' ? '\n' : e;
        } else {
          val += c;
        }
      }
      if (!closed || s.labels.size() >= max_labels)
        return std::nullopt;
      s.labels.emplace_back(std::string(key), std::move(val));
      while (i < line.size() && line[i] == ' ')
        ++i;
      if (i < line.size() && line[i] == ',')
        ++i;
      else if (i < line.size() && line[i] != '}')
        return std::nullopt;
    }
  }
  if (i >= line.size() || line[i] != ' ')
    return std::nullopt;
  while (i < line.size() && line[i] == ' ')
    ++i;
  auto rest = line.substr(i);
  auto sp = rest.find(' ');
  s.value = std::string(rest.substr(0, sp));
  if (!sample_value(s.value))
    return std::nullopt;
  if (sp != std::string_view::npos) { // a timestamp: an integer, dropped
    auto ts = rest.substr(sp + 1);
    int64_t t = 0;
    auto [end, ec] = std::from_chars(ts.data(), ts.data() + ts.size(), t);
    if (ec != std::errc{} || end != ts.data() + ts.size())
      return std::nullopt;
  }
  return s;
}

// The family a sample belongs to: its name less `_bucket`, `_sum` or
// `_count` when what is left was typed a histogram or summary.
std::string family_of(const std::string& name,
                      const std::map<std::string, std::string>& types) {
  for (const char* suf : {"_bucket", "_sum", "_count"}) {
    std::string_view n = name, sv = suf;
    if (n.size() <= sv.size() || n.substr(n.size() - sv.size()) != sv)
      continue;
    auto t = types.find(std::string(n.substr(0, n.size() - sv.size())));
    if (t != types.end() &&
        (t->second == "histogram" || t->second == "summary"))
      return t->first;
  }
  return name;
}

} // namespace

reexport_result
reexport(std::string_view text,
         const std::vector<std::pair<std::string, std::string>>& labels,
         const reexport_limits& lim) {
  reexport_result out;
  text = text.substr(0, lim.max_bytes);
  std::map<std::string, std::string> help, type; // declared, by family
  std::set<std::string> closed;                  // families already left
  std::string current;                           // the family being read
  std::set<std::string> emitted_head;
  size_t families = 0;
  std::set<std::string> own;
  for (const auto& [k, v] : labels)
    own.insert(k);
  size_t pos = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    auto line = text.substr(
      pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.empty())
      continue;
    if (line[0] == '#') {
      // `# HELP name text` / `# TYPE name type`; other comments dropped.
      bool is_help = line.rfind("# HELP ", 0) == 0;
      bool is_type = line.rfind("# TYPE ", 0) == 0;
      if (!is_help && !is_type)
        continue;
      auto rest = line.substr(7);
      auto sp = rest.find(' ');
      auto name = std::string(rest.substr(0, sp));
      auto what =
        sp == std::string_view::npos ? std::string_view{} : rest.substr(sp + 1);
      if (!metric_name(name) || emitted_head.count(name) ||
          closed.count(name)) {
        ++out.malformed; // or too late: its samples are out already
        continue;
      }
      if (is_type) {
        static const std::set<std::string_view> types{
          "counter", "gauge", "histogram", "summary", "untyped"};
        if (!types.count(what) || type.count(name)) {
          ++out.malformed;
          continue;
        }
        type[name] = std::string(what);
      } else if (!help.count(name)) {
        help[name] = std::string(what);
      }
      continue;
    }
    auto s = parse_sample(line, lim.max_labels);
    if (!s) {
      ++out.malformed;
      continue;
    }
    auto fam = family_of(s->name, type);
    if (fam.rfind("outrider_", 0) == 0) {
      ++out.malformed; // never shadow outrider's own series
      continue;
    }
    if (fam != current) {
      if (closed.count(fam)) {
        ++out.malformed; // a family split in two: not the text format
        continue;
      }
      if (!current.empty())
        closed.insert(current);
      current = fam;
    }
    if (out.kept >= lim.max_series ||
        (!emitted_head.count(fam) && families >= lim.max_families)) {
      ++out.over_limit;
      continue;
    }
    if (emitted_head.insert(fam).second) {
      ++families;
      auto h = help.find(fam);
      out.text += "# HELP " + fam + " " +
                  (h != help.end() && !help_text(h->second).empty()
                     ? help_text(h->second)
                     : std::string("re-exported from the engine")) +
                  "\n";
      auto t = type.find(fam);
      out.text += "# TYPE " + fam + " " +
                  (t == type.end() ? std::string("untyped") : t->second) + "\n";
    }
    out.text += s->name + "{";
    bool first = true;
    for (const auto& [k, v] : labels) {
      out.text +=
        (first ? "" : ",") + k + "=\"" + escaped(v, lim.max_label_bytes) + "\"";
      first = false;
    }
    for (const auto& [k, v] : s->labels) {
      if (own.count(k))
        continue;
      out.text +=
        (first ? "" : ",") + k + "=\"" + escaped(v, lim.max_label_bytes) + "\"";
      first = false;
    }
    out.text += "} " + s->value + "\n";
    ++out.kept;
  }
  return out;
}

} // namespace outrider::engine
