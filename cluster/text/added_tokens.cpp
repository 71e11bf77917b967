#include "cluster/text/added_tokens.hpp"

#include <algorithm>
#include <cctype>

namespace outrider::text {

namespace {

bool space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}
bool word_char(char c) {
  auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || std::isalnum(u) || c == '_';
}

} // namespace

void added_token_matcher::add(added_token t) {
  if (t.content.empty())
    return;
  first_byte_[static_cast<unsigned char>(t.content[0])] = true;
  if (std::find(lengths_.begin(), lengths_.end(), t.content.size()) ==
      lengths_.end()) {
    lengths_.push_back(t.content.size());
    std::sort(lengths_.rbegin(), lengths_.rend());
  }
  by_content_[t.content] = tokens_.size();
  by_id_[t.id] = tokens_.size();
  max_id_ = std::max(max_id_, t.id);
  tokens_.push_back(std::move(t));
}

const added_token* added_token_matcher::by_id(uint32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const added_token* added_token_matcher::by_content(std::string_view c) const {
  auto it = by_content_.find(std::string(c));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

bool added_token_matcher::match_at(std::string_view text, size_t at,
                                   size_t* len, const added_token** tok) const {
  if (!first_byte_[static_cast<unsigned char>(text[at])])
    return false;
  for (size_t l : lengths_) { // the longest first
    if (at + l > text.size())
      continue;
    auto* t = by_content(text.substr(at, l));
    if (!t)
      continue;
    if (t->single_word && ((at > 0 && word_char(text[at - 1])) ||
                           (at + l < text.size() && word_char(text[at + l]))))
      continue;
    *len = l;
    *tok = t;
    return true;
  }
  return false;
}

std::vector<added_token_matcher::segment>
added_token_matcher::split(std::string_view text) const {
  std::vector<segment> out;
  size_t plain = 0; // where the current plain segment began
  for (size_t i = 0; i < text.size(); ++i) {
    size_t len = 0;
    const added_token* t = nullptr;
    if (!match_at(text, i, &len, &t))
      continue;
    size_t b = i, e = i + len;
    if (t->lstrip)
      while (b > plain && space(text[b - 1]))
        --b;
    if (t->rstrip)
      while (e < text.size() && space(text[e]))
        ++e;
    if (b > plain)
      out.push_back({text.substr(plain, b - plain), -1});
    out.push_back({text.substr(b, e - b), t->id});
    plain = e;
    i = e - 1;
  }
  if (plain < text.size())
    out.push_back({text.substr(plain), -1});
  return out;
}

} // namespace outrider::text
