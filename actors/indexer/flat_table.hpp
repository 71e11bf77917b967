#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include "actors/indexer/flat_arrays.hpp"

namespace outrider::indexer {

/// An open-addressing hash table (linear probing, backward-shift deletion)
/// from a 64-bit key to a small value, kept in flat arrays so that a lookup
/// touches one or two cache lines. Keys are random-looking hashes; they are
/// used as they are. `MaxLoad` (percent) trades memory for probe length:
/// 70 where lookups are on the decision path, more where memory counts
/// more than a miss's probe. Not thread-safe; any insert or erase may move
/// entries (a pointer from `find` lasts until the next one).
///
/// Growing is incremental. A table of fleet size (millions of blocks) that
/// doubled at once stopped its owner for a third of a second (the router's
/// index: every decision behind it waited, docs/benchmarks.md): the new
/// arrays are taken from the allocator unwritten (zeroed by calloc or the
/// kernel's zero pages, touched as they fill) and the old one's entries
/// move over a few per insert or erase, looked up in both meanwhile. The
/// old table keeps its probe runs whole by marking what left it (`gone`)
/// instead of shifting, so that its lookups stay right while it drains.
/// (Hand-written: Abseil's and the standard tables rehash all at once.)
/// A slot is its key and value together (`flat_arrays`), its state told
/// by two key values (0 empty, 1 gone); the real keys 0 and 1 are held
/// apart (`aside_`).
///
/// A table of fleet size also pays the kernel for the new arrays' pages on
/// first touch (zeroing each, 25,000 pages for a table of 4 M slots: the
/// router's actor stopped for over half a second at each doubling of its
/// index at 10,000 workers, docs/benchmarks.md). So from `prefault_from`
/// slots up, the next size's arrays are allocated and written on a helper
/// thread (one per growth, gone when it is done) once the table reaches
/// its load limit; it fills on past the limit (up to half its remaining
/// room) while the helper works, and grows as soon as they are ready.
/// Asked for any earlier (they were, from 7/8 of the limit), they were
/// held beside a table that stopped filling short of its limit, as a
/// fleet's index does once its caches are full: three times the table's
/// own arrays (docs/benchmarks.md).
template <class Value, unsigned MaxLoad = 70>
class flat_table {
  static_assert(MaxLoad >= 40 && MaxLoad <= 90);
  static_assert(alignof(Value) <= alignof(std::max_align_t));
  using arrays = flat_arrays<Value>;

 public:
  // Nothing is allocated until the first insert: a table per slot of a
  // tier no engine of the fleet publishes costs its members only.
  flat_table() = default;
  ~flat_table() {
    cur_.release();
    old_.release();
  }
  flat_table(const flat_table& o) {
    o.each([&](uint64_t k, const Value& v) {
      bool added = false;
      insert(k, added) = v;
    });
  }
  flat_table& operator=(const flat_table& o) {
    if (this != &o) {
      flat_table copy{o};
      swap(copy);
    }
    return *this;
  }
  flat_table(flat_table&& o) noexcept { swap(o); }
  flat_table& operator=(flat_table&& o) noexcept {
    if (this != &o) {
      flat_table gone;
      swap(o);
      gone.swap(o); // what this held is released with `gone`
    }
    return *this;
  }

  size_t size() const {
    return cur_.size + old_.size + aside_[0].has_value() +
           aside_[1].has_value();
  }

  Value* find(uint64_t key) {
    if (!arrays::full(key))
      return aside_[key] ? &*aside_[key] : nullptr;
    if (auto i = cur_.find(key, home(key, cur_)); i != npos)
      return &cur_.val_at(i);
    if (old_.cap)
      if (auto i = old_.find(key, home(key, old_)); i != npos)
        return &old_.val_at(i);
    return nullptr;
  }

  const Value* find(uint64_t key) const {
    return const_cast<flat_table*>(this)->find(key);
  }

  /// Asks the CPU to bring `key`'s home slot in (its key and value)
  /// ahead of a find: a walk that knows its next keys overlaps
  /// their cache misses instead of taking them one after another.
  void prefetch(uint64_t key) const {
    cur_.prefetch(home(key, cur_));
    if (old_.cap)
      old_.prefetch(home(key, old_));
  }

  /// The value of `key`, default-constructed when new (`added` tells).
  Value& insert(uint64_t key, bool& added) {
    if (!arrays::full(key)) {
      added = !aside_[key];
      if (added)
        aside_[key].emplace(Value{});
      return *aside_[key];
    }
    drain_some();
    if (old_.cap)
      if (auto i = old_.find(key, home(key, old_)); i != npos) {
        added = false; // still in the old table: it moves now
        auto j = cur_.place(key, home(key, cur_), std::move(old_.val_at(i)));
        old_.leave(i);
        release_old_if_empty();
        return cur_.val_at(j);
      }
    if (cur_.cap)
      if (auto i = cur_.find(key, home(key, cur_)); i != npos) {
        added = false;
        return cur_.val_at(i);
      }
    if ((size() + 1) * 100 > cur_.cap * MaxLoad && !stretch())
      grow();
    added = true;
    return cur_.val_at(cur_.place(key, home(key, cur_), Value{}));
  }

  /// Makes room for `n` entries in a table that has nothing allocated yet
  /// (else nothing happens): arrays of that size from the start, instead
  /// of growing up to it from 16 slots as it fills.
  void reserve(size_t n) {
    if (cur_.cap || old_.cap || n == 0)
      return;
    cur_.allocate(std::max<size_t>(16, n * 100 / MaxLoad + 1));
  }
  /// Slots allocated (tests).
  size_t capacity() const { return cur_.cap; }

  /// Calls f(key, value) for every entry, in no particular order.
  template <class F>
  void each(F&& f) const {
    for (uint64_t k : {arrays::empty_key, arrays::gone_key})
      if (aside_[k])
        f(k, static_cast<const Value&>(*aside_[k]));
    cur_.each(f);
    old_.each(f);
  }

  /// Removes every entry and gives the memory back.
  void clear() {
    aside_[0].reset();
    aside_[1].reset();
    cur_.release();
    old_.release();
    spare_.drop();
    cursor_ = 0;
  }

  /// Removes `key`, if held. In the current table by backward shift: the
  /// entries after it in its probe run move up, so that no tombstone is
  /// left and the table never rehashes to clear them (a rehash on the
  /// decision path was a latency spike).
  void erase(uint64_t key) {
    if (!arrays::full(key)) {
      aside_[key].reset();
      return;
    }
    drain_some();
    if (cur_.cap && cur_.erase(key, [&](uint64_t k) { return home(k, cur_); }))
      return;
    if (old_.cap)
      if (auto i = old_.find(key, home(key, old_)); i != npos) {
        old_.leave(i);
        release_old_if_empty();
      }
  }

  /// Finishes what inserts and erases leave pending in a table that gets
  /// none for a while (an idle fleet's index): a growth whose prepared
  /// arrays are ready is made, next arrays the table no longer needs (it
  /// fell back under its limit) go, and up to `budget` old slots are
  /// moved. Cheap when there is nothing to do; its owner calls it now and
  /// then (the router: once a second). Returns whether work is left.
  bool tidy(size_t budget) {
    if (!spare_.working() && spare_.asked_at(cur_.cap) && !old_.cap) {
      if (size() * 100 > cur_.cap * MaxLoad)
        grow();
      else if (spare_.holding())
        spare_.drop();
    }
    if (old_.cap)
      drain(budget);
    // Arrays still held (the helper at work, or done since the check
    // above) are work left for a later call.
    return old_.cap != 0 || spare_.holding();
  }

  /// Whether an old table is still being moved from (tests).
  bool growing() const { return old_.cap != 0; }
  /// Growths that took arrays a helper had prepared (tests).
  size_t prepared_growths() const { return spare_.prepared(); }

 private:
  static constexpr size_t npos = arrays::npos;
  // Below this many slots a table moves all at once (cheap).
  static constexpr size_t incremental_from = 4096;
  // Old slots looked at per insert or erase while draining: the old table
  // (C slots) is empty before the new one (1.5 C) can reach its own limit.
  // A growth stretched to stretch_load leaves the new table that far
  // from its limit: (MaxLoad - stretch_load / 1.5) * 1.5 C / 100 inserts,
  // 0.2 C at 70% (0.3 C at 80%): more than C / 8.
  static constexpr size_t drain_per_op = 8;
  // From this many slots the next arrays are made by a helper when the
  // load reaches MaxLoad, and the table fills on up to stretch_load
  // percent (half its remaining room, a quarter of the limit at most)
  // while the helper works.
  static constexpr size_t prefault_from = size_t{1} << 16;
  static constexpr size_t stretch_load =
    std::min<size_t>(MaxLoad + (100 - MaxLoad) / 2, MaxLoad * 5 / 4);
  static_assert(12 * MaxLoad >= 8 * stretch_load + 100,
                "a stretched growth must leave room for the drain");

  // A key's home slot: its mixed hash scaled to the capacity (the high
  // half of a 64x64-bit product, which takes any capacity, not only a
  // power of two). Keys are hashes already; the mix folds their high bits
  // in anyway.
  static size_t home(uint64_t key, const arrays& a) {
    uint64_t h = (key ^ (key >> 29)) * 0x9e3779b97f4a7c15ULL;
    return static_cast<size_t>((static_cast<unsigned __int128>(h) * a.cap) >>
                               64);
  }

  // The capacity a table of `cap` slots grows to: half as large again, not
  // double (a table is then between 47% and 70% full, not 35% and 70%).
  static size_t grown(size_t cap) { return cap < 16 ? 16 : cap + cap / 2; }

  void swap(flat_table& o) noexcept {
    std::swap(cur_, o.cur_);
    std::swap(old_, o.old_);
    std::swap(cursor_, o.cursor_);
    std::swap(aside_, o.aside_);
    spare_.swap(o.spare_);
  }

  // Whether an insert that finds the table at its load limit should wait
  // for the helper's arrays (filling on meanwhile) instead of growing now:
  // asks for them the first time, then stretches until they are ready or
  // the table reaches stretch_load (where the growth waits for them).
  bool stretch() {
    if (cur_.cap < prefault_from || old_.cap)
      return false;
    if (!spare_.asked_at(cur_.cap)) {
      // The insert that asks never grows: the next one sees whether the
      // helper is at work (a table whose inserts stop here is left
      // pending for tidy, whichever thread was faster).
      spare_.ask(cur_.cap, grown(cur_.cap));
      return true;
    }
    return spare_.working() && (size() + 1) * 100 <= cur_.cap * stretch_load;
  }

  void grow() {
    drain(old_.cap); // the last growth's move is done first (rare)
    old_ = cur_;
    cur_ = spare_.take(grown(old_.cap));
    if (!cur_.cap)
      cur_.allocate(grown(old_.cap));
    cursor_ = 0;
    if (old_.cap < incremental_from)
      drain(old_.cap);
    else
      release_old_if_empty();
  }

  void drain_some() {
    if (old_.cap)
      drain(drain_per_op);
  }

  // Moves the old table's entries in the next `n` of its slots.
  void drain(size_t n) {
    if (!old_.cap)
      return;
    for (size_t end = std::min(old_.cap, cursor_ + n); cursor_ < end; ++cursor_)
      if (arrays::full(old_.key_at(cursor_))) {
        cur_.place(old_.key_at(cursor_), home(old_.key_at(cursor_), cur_),
                   std::move(old_.val_at(cursor_)));
        old_.leave(cursor_);
      }
    if (cursor_ == old_.cap)
      old_.release();
    else
      release_old_if_empty();
  }

  void release_old_if_empty() {
    if (old_.cap && old_.size == 0) {
      old_.release();
      cursor_ = 0;
    }
  }

  arrays cur_;
  arrays old_;                    // draining into cur_ while cap != 0
  size_t cursor_ = 0;             // old_'s slots below it have been moved
  spare_arrays<arrays> spare_;    // the next size's, made by a helper
  std::optional<Value> aside_[2]; // the keys 0 and 1 (arrays' markers)
};

} // namespace outrider::indexer
