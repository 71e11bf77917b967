#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <future>
#include <new>
#include <sys/mman.h>
#include <system_error>
#include <type_traits>
#include <utility>

namespace outrider::indexer {

/// The helper threads that fault in growing tables' next arrays, counted
/// process-wide: at most `max` at once, so that many tables growing
/// together (a fleet's ranks filling in step) cannot start a thread each;
/// a table that finds none free grows as a small one does.
struct prefault_helpers {
  static constexpr int max = 2;
  static bool enter() {
    int n = running().load();
    do {
      if (n >= max)
        return false;
    } while (!running().compare_exchange_weak(n, n + 1));
    int p = peak().load();
    while (n + 1 > p && !peak().compare_exchange_weak(p, n + 1)) {
    }
    return true;
  }
  static void leave() { running().fetch_sub(1); }
  /// The most ever at work at once (tests).
  static int most() { return peak().load(); }

 private:
  static std::atomic<int>& running() {
    static std::atomic<int> n{0};
    return n;
  }
  static std::atomic<int>& peak() {
    static std::atomic<int> n{0};
    return n;
  }
};

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
/// arrays are taken from the allocator unwritten (calloc'd state: the
/// kernel's zero pages, touched as they fill) and the old one's entries
/// move over a few per insert or erase, looked up in both meanwhile. The
/// old table keeps its probe runs whole by marking what left it (`gone`)
/// instead of shifting, so that its lookups stay right while it drains.
/// (Hand-written: Abseil's and the standard tables rehash all at once.)
///
/// A table of fleet size also pays the kernel for the new arrays' pages on
/// first touch (zeroing each, 25,000 pages for a table of 4 M slots: the
/// router's actor stopped for over half a second at each doubling of its
/// index at 10,000 workers, docs/benchmarks.md). So from `prefault_from`
/// slots up, the next size's arrays are allocated and written on a helper
/// thread (one per growth, gone when it is done) while the table fills
/// its last eighth before growing, and the growth takes them ready.
template <class Value, unsigned MaxLoad = 70>
class flat_table {
  static_assert(MaxLoad >= 10 && MaxLoad <= 90);
  static_assert(alignof(Value) <= alignof(std::max_align_t));

 public:
  // Nothing is allocated until the first insert: a table per slot of a
  // tier no engine of the fleet publishes costs its members only.
  flat_table() = default;
  ~flat_table() {
    cur_.release();
    old_.release();
    drop_spare();
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

  size_t size() const { return cur_.size + old_.size; }

  Value* find(uint64_t key) {
    if (auto i = cur_.find(key, home(key, cur_)); i != npos)
      return &cur_.vals[i];
    if (old_.cap)
      if (auto i = old_.find(key, home(key, old_)); i != npos)
        return &old_.vals[i];
    return nullptr;
  }

  const Value* find(uint64_t key) const {
    return const_cast<flat_table*>(this)->find(key);
  }

  /// Asks the CPU to bring `key`'s home slot in (its state, key and
  /// value) ahead of a find: a walk that knows its next keys overlaps
  /// their cache misses instead of taking them one after another.
  void prefetch(uint64_t key) const {
    cur_.prefetch(home(key, cur_));
    if (old_.cap)
      old_.prefetch(home(key, old_));
  }

  /// The value of `key`, default-constructed when new (`added` tells).
  Value& insert(uint64_t key, bool& added) {
    drain_some();
    if (cur_.cap >= prefault_from && spare_asked_at_ != cur_.cap &&
        (size() + 1) * 100 > cur_.cap * prefault_at)
      prepare_spare();
    if (old_.cap)
      if (auto i = old_.find(key, home(key, old_)); i != npos) {
        added = false; // still in the old table: it moves now
        auto j = cur_.place(key, home(key, cur_), std::move(old_.vals[i]));
        old_.leave(i);
        release_old_if_empty();
        return cur_.vals[j];
      }
    if (cur_.cap)
      if (auto i = cur_.find(key, home(key, cur_)); i != npos) {
        added = false;
        return cur_.vals[i];
      }
    if ((size() + 1) * 100 > cur_.cap * MaxLoad)
      grow();
    added = true;
    return cur_.vals[cur_.place(key, home(key, cur_), Value{})];
  }

  /// Calls f(key, value) for every entry, in no particular order.
  template <class F>
  void each(F&& f) const {
    cur_.each(f);
    old_.each(f);
  }

  /// Removes every entry and gives the memory back.
  void clear() {
    cur_.release();
    old_.release();
    drop_spare();
    spare_asked_at_ = 0;
    cursor_ = 0;
  }

  /// Removes `key`, if held. In the current table by backward shift: the
  /// entries after it in its probe run move up, so that no tombstone is
  /// left and the table never rehashes to clear them (a rehash on the
  /// decision path was a latency spike).
  void erase(uint64_t key) {
    drain_some();
    if (cur_.cap && cur_.erase(key, [&](uint64_t k) { return home(k, cur_); }))
      return;
    if (old_.cap)
      if (auto i = old_.find(key, home(key, old_)); i != npos) {
        old_.leave(i);
        release_old_if_empty();
      }
  }

  /// Whether an old table is still being moved from (tests).
  bool growing() const { return old_.cap != 0; }
  /// Growths that took arrays a helper had prepared (tests).
  size_t prepared_growths() const { return prepared_growths_; }

 private:
  static constexpr uint8_t empty = 0;
  static constexpr uint8_t full = 1;
  static constexpr uint8_t gone = 2; // left a draining table
  static constexpr size_t npos = ~size_t{0};
  // Below this many slots a table moves all at once (cheap).
  static constexpr size_t incremental_from = 4096;
  // Old slots looked at per insert or erase while draining: the old table
  // (C slots) is empty before the new one (2C) can reach its own limit,
  // which takes at least C * MaxLoad / 100 inserts.
  static constexpr size_t drain_per_op = 4;
  // From this many slots the next arrays are made ahead, once the load
  // passes prefault_at percent (7/8 of the way to MaxLoad).
  static constexpr size_t prefault_from = size_t{1} << 16;
  static constexpr size_t prefault_at = MaxLoad - MaxLoad / 8;
  // Arrays from this size up are taken in huge pages.
  static constexpr size_t huge_page = size_t{2} << 20;
  static constexpr size_t huge_from = size_t{4} << 20;

  // One table's arrays. Values are constructed in full slots only.
  struct arrays {
    uint8_t* state = nullptr;
    uint64_t* keys = nullptr;
    Value* vals = nullptr;
    size_t cap = 0, mask = 0, size = 0;

    void allocate(size_t capacity) {
      state = static_cast<uint8_t*>(take(capacity, true));
      keys = static_cast<uint64_t*>(take(capacity * sizeof(uint64_t), false));
      vals = static_cast<Value*>(take(capacity * sizeof(Value), false));
      if (!state || !keys || !vals) {
        std::free(state);
        std::free(keys);
        std::free(vals);
        throw std::bad_alloc{};
      }
      cap = capacity;
      mask = capacity - 1;
      size = 0;
    }

    // An array of `bytes`, zeroed if asked. From `huge_from` up, aligned
    // to and asked of the kernel in 2 MiB pages (MADV_HUGEPAGE; a no-op
    // where transparent huge pages are off): lookups at random in an
    // index of fleet size (hundreds of MB) miss the TLB on every block
    // with 4 KiB pages, and a growth's pages fault 512 at a time.
    static void* take(size_t bytes, bool zero) {
      if (bytes < huge_from)
        return zero ? std::calloc(bytes, 1) : std::malloc(bytes);
      size_t rounded = (bytes + huge_page - 1) & ~(huge_page - 1);
      void* p = std::aligned_alloc(huge_page, rounded);
      if (!p)
        return nullptr;
      ::madvise(p, rounded, MADV_HUGEPAGE);
      if (zero)
        std::memset(p, 0, bytes);
      return p;
    }

    // Writes a byte of every page of the arrays (a zero: state stays
    // empty), so that the kernel's first-touch faults are taken by the
    // thread calling this. Volatile: a compiler may drop a memset of zeros
    // after an allocation (GCC folds malloc + memset into calloc, which
    // leaves fresh pages untouched), and did.
    void prefault() {
      touch(state, cap);
      touch(keys, cap * sizeof(uint64_t));
      touch(vals, cap * sizeof(Value));
    }
    static void touch(void* p, size_t bytes) {
      auto* b = static_cast<volatile unsigned char*>(p);
      for (size_t i = 0; i < bytes; i += 4096)
        b[i] = 0;
    }

    void release() {
      if (!cap)
        return;
      if constexpr (!std::is_trivially_destructible_v<Value>)
        for (size_t i = 0; i < cap; ++i)
          if (state[i] == full)
            vals[i].~Value();
      std::free(state);
      std::free(keys);
      std::free(vals);
      *this = arrays{};
    }

    size_t find(uint64_t key, size_t i) const {
      if (!cap)
        return npos;
      for (;; i = (i + 1) & mask) {
        if (state[i] == empty)
          return npos;
        if (state[i] == full && keys[i] == key)
          return i;
      }
    }

    // Puts a key known to be absent at the first free slot of its run.
    size_t place(uint64_t key, size_t i, Value&& v) {
      for (; state[i] == full; i = (i + 1) & mask) {
      }
      state[i] = full;
      keys[i] = key;
      new (&vals[i]) Value(std::move(v));
      ++size;
      return i;
    }

    // Marks slot i as left (a draining table only).
    void leave(size_t i) {
      vals[i].~Value();
      state[i] = gone;
      --size;
    }

    template <class Home>
    bool erase(uint64_t key, Home home) {
      size_t i = find(key, home(key));
      if (i == npos)
        return false;
      --size;
      for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        if (state[j] == empty)
          break;
        // Entry j may fill hole i unless its home lies cyclically in (i, j].
        size_t h = home(keys[j]);
        bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (stays)
          continue;
        keys[i] = keys[j];
        vals[i] = std::move(vals[j]);
        i = j;
      }
      state[i] = empty;
      vals[i].~Value(); // what it held goes now
      return true;
    }

    void prefetch(size_t i) const {
      if (!cap)
        return;
      __builtin_prefetch(&state[i]);
      __builtin_prefetch(&keys[i]);
      __builtin_prefetch(&vals[i]);
    }

    template <class F>
    void each(F& f) const {
      for (size_t i = 0; i < cap; ++i)
        if (state[i] == full)
          f(keys[i], static_cast<const Value&>(vals[i]));
    }
  };

  static size_t home(uint64_t key, const arrays& a) {
    // Keys are hashes already; fold the high bits in anyway.
    return static_cast<size_t>((key ^ (key >> 29)) * 0x9e3779b97f4a7c15ULL >>
                               20) &
           a.mask;
  }

  void swap(flat_table& o) noexcept {
    std::swap(cur_, o.cur_);
    std::swap(old_, o.old_);
    std::swap(cursor_, o.cursor_);
    std::swap(spare_, o.spare_);
    std::swap(spare_asked_at_, o.spare_asked_at_);
    std::swap(prepared_growths_, o.prepared_growths_);
  }

  void prepare_spare() {
    spare_asked_at_ = cur_.cap; // once per size, whatever comes of it
    if (!prefault_helpers::enter())
      return; // enough at work already: this growth faults for itself
    size_t capacity = cur_.cap * 2;
    try {
      spare_ = std::async(std::launch::async, [capacity] {
        struct leave_at_end {
          ~leave_at_end() { prefault_helpers::leave(); }
        } at_end;
        arrays a;
        a.allocate(capacity);
        a.prefault();
        return a;
      });
    } catch (const std::system_error&) {
      // No thread to be had (the process at its limit): the growth
      // allocates for itself, as below prefault_from.
      prefault_helpers::leave();
    }
  }

  // The prepared arrays if they are of `capacity` slots (waiting for the
  // helper if it is not done), else none; an allocation that failed there
  // is tried again by the caller.
  arrays take_spare(size_t capacity) {
    arrays a;
    if (!spare_.valid())
      return a;
    try {
      a = spare_.get();
    } catch (const std::bad_alloc&) {
      return arrays{};
    }
    if (a.cap != capacity) {
      a.release();
      return arrays{};
    }
    ++prepared_growths_;
    return a;
  }

  void drop_spare() {
    if (!spare_.valid())
      return;
    try {
      spare_.get().release();
    } catch (const std::bad_alloc&) {
    }
  }

  void grow() {
    drain(old_.cap); // the last growth's move is done first (rare)
    old_ = cur_;
    cur_ = take_spare(old_.cap * 2);
    if (!cur_.cap)
      cur_.allocate(old_.cap ? old_.cap * 2 : 16);
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
      if (old_.state[cursor_] == full) {
        cur_.place(old_.keys[cursor_], home(old_.keys[cursor_], cur_),
                   std::move(old_.vals[cursor_]));
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
  arrays old_;                // draining into cur_ while cap != 0
  size_t cursor_ = 0;         // old_'s slots below it have been moved
  std::future<arrays> spare_; // the next size's, made by a helper
  size_t spare_asked_at_ = 0; // the size whose successor was asked for
  size_t prepared_growths_ = 0;
};

} // namespace outrider::indexer
