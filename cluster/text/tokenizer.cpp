#include "cluster/text/tokenizer.hpp"

#include "cluster/text/utf8.hpp"

namespace outrider::text {

namespace {

const std::string metaspace_char = "\xE2\x96\x81"; // U+2581

// A byte-fallback token's byte: "<0xAB>" -> 0xAB.
std::optional<char> fallback_byte(const std::string& s) {
  if (s.size() != 6 || s.compare(0, 3, "<0x") != 0 || s[5] != '>')
    return std::nullopt;
  auto hex = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
  };
  int hi = hex(s[3]), lo = hex(s[4]);
  if (hi < 0 || lo < 0)
    return std::nullopt;
  return static_cast<char>(hi * 16 + lo);
}

// transformers' clean_up_tokenization, in its order.
void clean_up_spaces(std::string& s) {
  static const std::pair<const char*, const char*> rules[] = {
    {" .", "."},     {" ?", "?"},     {" !", "!"},   {" ,", ","},
    {" ' ", "'"},    {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"},
    {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : rules) {
    std::string_view f{from}, t{to};
    std::string out;
    size_t last = 0;
    for (size_t at = s.find(f); at != std::string::npos; at = s.find(f, last)) {
      out.append(s, last, at - last);
      out += t;
      last = at + f.size();
    }
    if (last == 0)
      continue;
    out.append(s, last);
    s = std::move(out);
  }
}

} // namespace

void tokenizer::finish_tables(bool metaspace_decoder) {
  const auto& syms = model_->symbols();
  size_t n =
    std::max<size_t>(syms.size(), added_.empty() ? 0 : added_.max_id() + 1);
  bytes_.assign(n, {});
  special_.assign(n, false);
  for (size_t id = 0; id < syms.size(); ++id) {
    std::string b = syms[id];
    if (metaspace_decoder) {
      if (auto fb = fallback_byte(b)) {
        b = std::string(1, *fb);
      } else {
        for (size_t at = b.find(metaspace_char); at != std::string::npos;
             at = b.find(metaspace_char, at + 1))
          b.replace(at, metaspace_char.size(), " ");
      }
    }
    bytes_[id] = std::move(b);
  }
  for (size_t id = 0; id < n; ++id)
    if (auto* a = added_.by_id(static_cast<uint32_t>(id))) {
      bytes_[id] = a->content; // added tokens are written as they are
      special_[id] = a->special;
    }
  if (!eos_.empty())
    if (auto id = token_id(eos_))
      eos_ids_.push_back(*id);
}

std::vector<uint32_t> tokenizer::encode(std::string_view text,
                                        bool add_special) const {
  std::string checked;
  if (!well_formed(text)) {
    checked = lossy_utf8(text); // ill-formed input: U+FFFD, as HF would
    text = checked;
  }
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special)
    ids.insert(ids.end(), prefix_ids_.begin(), prefix_ids_.end());
  auto segments = added_.split(text);
  std::vector<std::string> pieces;
  for (size_t k = 0; k < segments.size(); ++k) {
    const auto& seg = segments[k];
    if (seg.id >= 0) {
      ids.push_back(static_cast<uint32_t>(seg.id));
      continue;
    }
    bool cache = segment_cache_ && seg.text.size() >= segment_cache_min;
    if (cache && cached_segment(seg.text, k == 0, ids))
      continue;
    size_t from = ids.size();
    std::string s{seg.text};
    if (normalizer_)
      s = normalizer_->apply(std::move(s));
    pieces.clear();
    pieces.push_back(std::move(s));
    if (pre_)
      pre_->split(pieces, k == 0);
    for (const auto& p : pieces)
      model_->encode(p, ids);
    if (cache)
      keep_segment(seg.text, k == 0, ids, from);
  }
  if (add_special)
    ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

// Long plain segments recur (a shared system prompt between a chat
// template's special tokens): their ids are kept, keyed by the text and
// whether it begins the input. Bounded by the bytes of text kept; emptied
// when full.
bool tokenizer::cached_segment(std::string_view text, bool first,
                               std::vector<uint32_t>& ids) const {
  std::string key = (first ? "1" : "0") + std::string(text);
  std::lock_guard<std::mutex> guard{segments_mtx_};
  auto it = segments_.find(key);
  if (it == segments_.end())
    return false;
  ids.insert(ids.end(), it->second.begin(), it->second.end());
  return true;
}

void tokenizer::keep_segment(std::string_view text, bool first,
                             const std::vector<uint32_t>& ids,
                             size_t from) const {
  std::string key = (first ? "1" : "0") + std::string(text);
  std::lock_guard<std::mutex> guard{segments_mtx_};
  if (segment_bytes_ + key.size() > segment_cache_bytes) {
    segments_.clear();
    segment_bytes_ = 0;
  }
  segment_bytes_ += key.size();
  segments_.emplace(
    std::move(key),
    std::vector<uint32_t>(ids.begin() + static_cast<long>(from), ids.end()));
}

const std::string& tokenizer::token_bytes(uint32_t id) const {
  static const std::string none;
  return id < bytes_.size() ? bytes_[id] : none;
}

bool tokenizer::is_special(uint32_t id) const {
  return id < special_.size() && special_[id];
}

std::string tokenizer::decode(const std::vector<uint32_t>& ids,
                              bool skip_special) const {
  std::string raw;
  for (uint32_t id : ids) {
    if (skip_special && is_special(id))
      continue;
    raw += token_bytes(id);
  }
  if (strip_first_space_ && !raw.empty() && raw[0] == ' ')
    raw.erase(0, 1);
  auto text = lossy_utf8(raw);
  if (clean_up_spaces_)
    clean_up_spaces(text);
  return text;
}

std::optional<uint32_t> tokenizer::token_id(std::string_view token) const {
  if (auto* a = added_.by_content(token))
    return a->id;
  return model_->id_of(model_->byte_level()
                         ? from_byte_level(token).value_or(std::string(token))
                         : std::string(token));
}

} // namespace outrider::text
