#include "cluster/text/pre_tokenizer.hpp"

#include "cluster/text/regex.hpp"

namespace outrider::text {

const char* const gpt2_pattern =
  R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

enum class behaviour {
  removed,
  isolated,
  merged_prev,
  merged_next,
  contiguous
};

// One piece split around the matches of `re` (or, inverted, the matches
// are the pieces and what lies between them the delimiters).
void split_piece(const regex& re, behaviour how, bool invert,
                 const std::string& s, std::vector<std::string>& out) {
  // (begin, end, is_delimiter) spans covering `s`.
  struct span {
    size_t b, e;
    bool delim;
  };
  std::vector<span> spans;
  size_t last = 0;
  re.for_each(s, [&](size_t b, size_t e) {
    if (b > last)
      spans.push_back({last, b, invert});
    spans.push_back({b, e, !invert});
    last = e;
  });
  if (last < s.size())
    spans.push_back({last, s.size(), invert});
  std::string pending; // MergedWithNext: delimiters waiting for a piece
  for (size_t i = 0; i < spans.size(); ++i) {
    auto [b, e, delim] = spans[i];
    std::string part = s.substr(b, e - b);
    if (!delim || how == behaviour::isolated) {
      out.push_back(pending + part);
      pending.clear();
    } else if (how == behaviour::merged_prev) {
      if (i > 0 && !out.empty() && !spans[i - 1].delim)
        out.back() += part;
      else
        out.push_back(part);
    } else if (how == behaviour::merged_next) {
      pending += part;
    } else if (how == behaviour::contiguous) {
      if (i > 0 && spans[i - 1].delim && !out.empty())
        out.back() += part;
      else
        out.push_back(part);
    } // removed: dropped
  }
  if (!pending.empty())
    out.push_back(pending);
}

class split_by final : public pre_tokenizer {
 public:
  split_by(std::unique_ptr<regex> re, behaviour how, bool invert)
    : re_(std::move(re)), how_(how), invert_(invert) {}
  void split(std::vector<std::string>& pieces, bool) const override {
    std::vector<std::string> out;
    out.reserve(pieces.size() * 4);
    for (const auto& p : pieces)
      split_piece(*re_, how_, invert_, p, out);
    pieces = std::move(out);
  }

 private:
  std::unique_ptr<regex> re_;
  behaviour how_;
  bool invert_;
};

class byte_level final : public pre_tokenizer {
 public:
  byte_level(bool prefix_space, std::unique_ptr<regex> re)
    : prefix_space_(prefix_space), re_(std::move(re)) {}
  void split(std::vector<std::string>& pieces, bool) const override {
    if (prefix_space_)
      for (auto& p : pieces)
        if (!p.empty() && p[0] != ' ')
          p.insert(p.begin(), ' ');
    if (!re_)
      return; // the byte mapping itself is the model's
    std::vector<std::string> out;
    for (const auto& p : pieces)
      split_piece(*re_, behaviour::isolated, false, p, out);
    pieces = std::move(out);
  }

 private:
  bool prefix_space_;
  std::unique_ptr<regex> re_;
};

class metaspace final : public pre_tokenizer {
 public:
  metaspace(std::string replacement, std::string scheme, bool split)
    : rep_(std::move(replacement)), scheme_(std::move(scheme)), split_(split) {}
  void split(std::vector<std::string>& pieces, bool first) const override {
    std::vector<std::string> out;
    for (size_t k = 0; k < pieces.size(); ++k) {
      std::string s;
      for (char c : pieces[k])
        s += c == ' ' ? rep_ : std::string(1, c);
      bool lead =
        scheme_ == "always" || (scheme_ == "first" && first && k == 0);
      if (lead && s.compare(0, rep_.size(), rep_) != 0)
        s = rep_ + s;
      if (!split_) {
        out.push_back(std::move(s));
        continue;
      }
      // Each piece starts at a replacement character (MergedWithNext).
      size_t start = 0;
      for (size_t at = s.find(rep_, 1); at != std::string::npos;
           at = s.find(rep_, at + rep_.size())) {
        out.push_back(s.substr(start, at - start));
        start = at;
      }
      out.push_back(s.substr(start));
    }
    pieces = std::move(out);
  }

 private:
  std::string rep_, scheme_;
  bool split_;
};

class sequence final : public pre_tokenizer {
 public:
  explicit sequence(std::vector<std::unique_ptr<pre_tokenizer>> parts)
    : parts_(std::move(parts)) {}
  void split(std::vector<std::string>& pieces, bool first) const override {
    for (const auto& p : parts_)
      p->split(pieces, first);
  }

 private:
  std::vector<std::unique_ptr<pre_tokenizer>> parts_;
};

bool behaviour_of(const std::string& name, behaviour* out) {
  static const std::pair<const char*, behaviour> names[] = {
    {"Removed", behaviour::removed},
    {"Isolated", behaviour::isolated},
    {"MergedWithPrevious", behaviour::merged_prev},
    {"MergedWithNext", behaviour::merged_next},
    {"Contiguous", behaviour::contiguous}};
  for (const auto& [n, b] : names)
    if (name == n) {
      *out = b;
      return true;
    }
  return false;
}

std::unique_ptr<pre_tokenizer> make_split(const nlohmann::json& j,
                                          std::string* why) {
  behaviour how{};
  auto name = j.value("behavior", std::string{"Isolated"});
  if (!behaviour_of(name, &how)) {
    *why = "Split behaviour '" + name + "' is not supported";
    return nullptr;
  }
  auto re = pattern_from_json(j.value("pattern", nlohmann::json{}), why);
  if (!re)
    return nullptr;
  return std::make_unique<split_by>(std::move(re), how,
                                    j.value("invert", false));
}

std::unique_ptr<pre_tokenizer> make_metaspace(const nlohmann::json& j) {
  std::string scheme = j.value("prepend_scheme", std::string{});
  if (scheme.empty()) // older files: add_prefix_space
    scheme = j.value("add_prefix_space", true) ? "always" : "never";
  return std::make_unique<metaspace>(
    j.value("replacement", std::string{"\xE2\x96\x81"}), scheme,
    j.value("split", true));
}

} // namespace

std::unique_ptr<pre_tokenizer> make_pre_tokenizer(const nlohmann::json& j,
                                                  std::string* why) {
  if (j.is_null())
    return nullptr;
  auto type = j.value("type", std::string{});
  if (type == "Split")
    return make_split(j, why);
  if (type == "ByteLevel") {
    std::unique_ptr<regex> re;
    if (j.value("use_regex", true) &&
        !(re = regex::compile(gpt2_pattern, false, why)))
      return nullptr;
    return std::make_unique<byte_level>(j.value("add_prefix_space", true),
                                        std::move(re));
  }
  if (type == "Metaspace")
    return make_metaspace(j);
  if (type == "Digits") {
    auto re = regex::compile(R"(\p{N})", false, why);
    auto how = j.value("individual_digits", false) ? behaviour::isolated
                                                   : behaviour::contiguous;
    return std::make_unique<split_by>(std::move(re), how, false);
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<pre_tokenizer>> parts;
    for (const auto& p : j.value("pretokenizers", nlohmann::json::array())) {
      auto part = make_pre_tokenizer(p, why);
      if (!part)
        return nullptr;
      parts.push_back(std::move(part));
    }
    return std::make_unique<sequence>(std::move(parts));
  }
  *why = "pre-tokenizer '" + type + "' is not supported";
  return nullptr;
}

} // namespace outrider::text
