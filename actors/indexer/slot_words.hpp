#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace outrider::indexer {

/// A set of slots as 64-slot bitmask words, kept sparse: the non-zero words
/// only, sorted by word index. One word lives inline (no allocation), more
/// on the heap. 32 bytes: a block only slot 9,999 holds costs no more than
/// one slot 70 holds, where a dense mask would cost 157 words (1.2 KB),
/// which at 10,000 workers was most of the router's memory.
///
/// A fingerprint of the set (the XOR of a fixed 64-bit mix of each member)
/// is kept as members come and go, so that two sets compare in O(1)
/// (`same`): matching a prompt skips a block whose holders are its
/// parent's without reading their words. Two different sets share a
/// fingerprint with probability 2^-64 (a block then matched one block too
/// far on some slot: a placement misjudged, nothing worse). Not
/// thread-safe.
class slot_words {
 public:
  /// (word index, bits), packed: 12 bytes, not 16 (at 10,000 slots a
  /// block held across the fleet carries about a hundred of them).
#pragma pack(push, 4)
  struct word {
    uint32_t first = 0;  // word index
    uint64_t second = 0; // its bits
    bool operator==(const word&) const = default;
  };
#pragma pack(pop)
  static_assert(sizeof(word) == 12);

  slot_words() = default;
  slot_words(const slot_words& o)
    : bits_(o.bits_), fp_(o.fp_), w_(o.w_), n_(o.n_),
      many_(o.many_ ? std::make_unique<std::vector<word>>(*o.many_) : nullptr) {
  }
  slot_words& operator=(const slot_words& o) {
    if (this != &o)
      *this = slot_words(o);
    return *this;
  }
  slot_words(slot_words&&) noexcept = default;
  slot_words& operator=(slot_words&&) noexcept = default;

  bool empty() const {
    return n_ == 0;
  }
  /// Non-zero words.
  size_t size() const {
    return n_;
  }
  /// The i-th non-zero word, by word index.
  word operator[](size_t i) const {
    return n_ == 1 ? word{w_, bits_} : (*many_)[i];
  }

  /// Whether both hold the same slots (by fingerprint; see above).
  bool same(const slot_words& o) const {
    return fp_ == o.fp_ && n_ == o.n_;
  }

  /// The fixed mix a member adds to the fingerprint (splitmix64's).
  static uint64_t mix(uint32_t slot) {
    uint64_t z = slot + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  /// Adds `slot`; false when it was in the set already.
  bool set(uint32_t slot) {
    word w{slot / 64, uint64_t{1} << (slot % 64)};
    if (n_ == 0) {
      w_ = w.first;
      bits_ = w.second;
      n_ = 1;
    } else if (n_ == 1 && w_ == w.first) {
      if (bits_ & w.second)
        return false;
      bits_ |= w.second;
    } else {
      if (n_ == 1)
        many_ = std::make_unique<std::vector<word>>(1, word{w_, bits_});
      auto i = at(*many_, w.first);
      if (i != many_->end() && i->first == w.first) {
        if (i->second & w.second)
          return false;
        i->second |= w.second;
      } else {
        many_->insert(i, w);
      }
      n_ = static_cast<uint32_t>(many_->size());
    }
    fp_ ^= mix(slot);
    return true;
  }

  /// Removes `slot`; false when it was not in the set.
  bool clear(uint32_t slot) {
    auto w = slot / 64;
    auto bit = uint64_t{1} << (slot % 64);
    if (n_ == 0)
      return false;
    if (n_ == 1) {
      if (w_ != w || !(bits_ & bit))
        return false;
      if ((bits_ &= ~bit) == 0)
        n_ = 0;
      fp_ ^= mix(slot);
      return true;
    }
    auto i = at(*many_, w);
    if (i == many_->end() || i->first != w || !(i->second & bit))
      return false;
    fp_ ^= mix(slot);
    if ((i->second &= ~bit) != 0)
      return true;
    many_->erase(i);
    if (many_->size() == 1) {
      w_ = (*many_)[0].first;
      bits_ = (*many_)[0].second;
      many_.reset();
      n_ = 1;
      return true;
    }
    n_ = static_cast<uint32_t>(many_->size());
    return true;
  }

  /// The bits of word `w` (0 when none of its slots is in the set).
  uint64_t bits(uint32_t w) const {
    if (n_ <= 1)
      return n_ == 1 && w_ == w ? bits_ : 0;
    auto i =
      std::lower_bound(many_->begin(), many_->end(), w,
                       [](const word& p, uint32_t v) { return p.first < v; });
    return i != many_->end() && i->first == w ? i->second : 0;
  }

  bool test(uint32_t slot) const {
    return (bits(slot / 64) >> (slot % 64) & 1) != 0;
  }

 private:
  static std::vector<word>::iterator at(std::vector<word>& ws, uint32_t w) {
    return std::lower_bound(
      ws.begin(), ws.end(), w,
      [](const word& p, uint32_t v) { return p.first < v; });
  }

  uint64_t bits_ = 0; // the only word's bits, when n_ == 1
  uint64_t fp_ = 0;   // the fingerprint of the set
  uint32_t w_ = 0;    // its index
  uint32_t n_ = 0;
  std::unique_ptr<std::vector<word>> many_; // all words, when n_ > 1
};

} // namespace outrider::indexer
