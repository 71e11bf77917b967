#include "cluster/text/bpe_model.hpp"

#include <cstdio>
#include <limits>
#include <queue>

#include "cluster/text/utf8.hpp"

namespace outrider::text {

namespace {

constexpr size_t cache_limit = 65536;
constexpr size_t cache_piece_max = 256; // longer pieces are not kept

struct byte_table {
  char32_t to_char[256];
  int to_byte[512]; // every character of the alphabet is below U+0200
  byte_table() {
    for (auto& b : to_byte)
      b = -1;
    // Printable bytes keep their code point; the others move to U+0100+.
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                       (b >= 0xAE && b <= 0xFF);
      to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_char[b]] = b;
    }
  }
};

const byte_table& table() {
  static const byte_table t;
  return t;
}

// Decodes one UTF-8 character at s[i] (the input is well-formed).
char32_t next_char(std::string_view s, size_t& i) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  char32_t cp = len == 1   ? c
                : len == 2 ? (c & 0x1F)
                : len == 3 ? (c & 0x0F)
                           : (c & 0x07);
  for (size_t k = 1; k < len && i + k < s.size(); ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += len;
  return cp;
}

} // namespace

char32_t byte_to_char(unsigned char b) {
  return table().to_char[b];
}

int char_to_byte(char32_t c) {
  return c < 512 ? table().to_byte[c] : -1;
}

std::optional<std::string> from_byte_level(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    int b = char_to_byte(next_char(s, i));
    if (b < 0)
      return std::nullopt;
    out += static_cast<char>(b);
  }
  return out;
}

bpe_model::bpe_model(
  const std::vector<std::pair<std::string, uint32_t>>& vocab,
  const std::vector<std::pair<std::string, std::string>>& merges,
  bool byte_level, bool byte_fallback, bool ignore_merges,
  std::optional<uint32_t> unk)
  : byte_level_(byte_level), byte_fallback_(byte_fallback),
    ignore_merges_(ignore_merges), unk_(unk) {
  uint32_t max_id = 0;
  for (const auto& [sym, id] : vocab)
    max_id = std::max(max_id, id);
  symbols_.resize(vocab.empty() ? 0 : max_id + 1);
  for (const auto& [sym, id] : vocab) {
    std::string raw = sym;
    if (byte_level) // a symbol outside the alphabet stays as written
      if (auto b = from_byte_level(sym))
        raw = std::move(*b);
    vocab_[raw] = id;
    symbols_[id] = std::move(raw);
  }
  uint32_t rank = 0;
  for (const auto& [l, r] : merges) {
    auto a = id_of(byte_level ? from_byte_level(l).value_or(l) : l);
    auto b = id_of(byte_level ? from_byte_level(r).value_or(r) : r);
    auto joined = id_of(symbols_[a.value_or(0)] + symbols_[b.value_or(0)]);
    if (a && b && joined)
      merges_.emplace((uint64_t{*a} << 32) | *b, merge{rank, *joined});
    ++rank;
  }
  have_byte_ids_ = true;
  for (int b = 0; b < 256 && have_byte_ids_; ++b) {
    std::optional<uint32_t> id;
    if (byte_level) {
      id = id_of(std::string(1, static_cast<char>(b)));
    } else {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      id = id_of(name);
    }
    have_byte_ids_ = id.has_value();
    byte_ids_[b] = id.value_or(0);
  }
}

std::optional<uint32_t> bpe_model::id_of(std::string_view symbol) const {
  auto it = vocab_.find(std::string(symbol));
  if (it == vocab_.end())
    return std::nullopt;
  return it->second;
}

void bpe_model::initial_symbols(std::string_view piece,
                                std::vector<uint32_t>& ids) const {
  if (byte_level_) {
    for (unsigned char b : piece)
      ids.push_back(have_byte_ids_ ? byte_ids_[b] : unk_.value_or(0));
    return;
  }
  for (size_t i = 0; i < piece.size();) {
    size_t len = std::max<size_t>(1, char_length(piece.substr(i)));
    auto ch = piece.substr(i, len);
    if (auto id = id_of(ch)) {
      ids.push_back(*id);
    } else if (byte_fallback_ && have_byte_ids_) {
      for (unsigned char b : ch)
        ids.push_back(byte_ids_[b]);
    } else if (unk_) {
      ids.push_back(*unk_); // (consecutive unknowns are not fused)
    }
    i += len;
  }
}

// Merges the lowest-ranked adjacent pair until none is left: a heap of
// candidate pairs over a linked list of symbols, O(n log n).
void bpe_model::merge_all(std::vector<uint32_t>& ids) const {
  size_t n = ids.size();
  if (n < 2)
    return;
  constexpr size_t none = std::numeric_limits<size_t>::max();
  std::vector<size_t> next(n), prev(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : none;
    prev[i] = i == 0 ? none : i - 1;
  }
  struct cand {
    uint32_t rank;
    size_t left;
    uint32_t l, r; // the ids when queued: stale if they changed
    bool operator>(const cand& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<cand, std::vector<cand>, std::greater<>> heap;
  auto push = [&](size_t i) {
    if (i == none || next[i] == none)
      return;
    auto m = merges_.find((uint64_t{ids[i]} << 32) | ids[next[i]]);
    if (m != merges_.end())
      heap.push({m->second.rank, i, ids[i], ids[next[i]]});
  };
  for (size_t i = 0; i + 1 < n; ++i)
    push(i);
  while (!heap.empty()) {
    auto c = heap.top();
    heap.pop();
    size_t i = c.left;
    if (!alive[i] || next[i] == none || ids[i] != c.l || ids[next[i]] != c.r)
      continue;
    size_t j = next[i];
    ids[i] = merges_.at((uint64_t{c.l} << 32) | c.r).result;
    alive[j] = false;
    next[i] = next[j];
    if (next[j] != none)
      prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  size_t w = 0;
  for (size_t i = 0; i < n; ++i)
    if (alive[i])
      ids[w++] = ids[i];
  ids.resize(w);
}

void bpe_model::encode(std::string_view piece,
                       std::vector<uint32_t>& out) const {
  if (piece.empty())
    return;
  if (ignore_merges_) {
    if (auto whole = vocab_.find(std::string(piece)); whole != vocab_.end()) {
      out.push_back(whole->second);
      return;
    }
  }
  bool cacheable = piece.size() <= cache_piece_max;
  if (cacheable) {
    std::lock_guard<std::mutex> guard{cache_mtx_};
    if (auto c = cache_.find(std::string(piece)); c != cache_.end()) {
      out.insert(out.end(), c->second.begin(), c->second.end());
      return;
    }
  }
  std::vector<uint32_t> ids;
  ids.reserve(piece.size());
  initial_symbols(piece, ids);
  merge_all(ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> guard{cache_mtx_};
    if (cache_.size() >= cache_limit)
      cache_.clear();
    cache_.emplace(std::string(piece), std::move(ids));
  }
}

} // namespace outrider::text
