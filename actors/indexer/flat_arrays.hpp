#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

#include "actors/indexer/table_memory.hpp"

namespace outrider::indexer {

/// Asks the CPU to bring the cache line at `p` in. Not a bare
/// `__builtin_prefetch`: GCC models that builtin as free of side effects,
/// so its pure-const analysis finds a function made only of prefetches
/// "const" and deletes every call to it as dead code (GCC 12 at -O1 and
/// up: none of the walks' prefetches survived to the binary;
/// tests/prefetch_emitted_test.sh checks). The empty volatile asm, which
/// takes the address, gives the call an effect it must keep; it is not a
/// memory barrier.
inline void prefetch_line(const void* p) {
  __builtin_prefetch(p);
  asm volatile("" : : "r"(p));
}

/// One open-addressing array of a `flat_table` (linear probing): each slot
/// a key and its value side by side, so that a lookup's comparison and the
/// value it returns share a cache line, and nothing else is read (a state
/// byte per slot in an array of its own, and keys apart from values, made
/// a lookup in a table of fleet size two or three cache misses where one
/// will do: docs/benchmarks.md). The slot's state is its key: `empty_key`
/// (0: the memory comes zeroed) or `gone_key` (1: left a draining table);
/// the table keeps the two real keys of those values apart. A value is
/// constructed in full slots only. Not thread-safe.
template <class Value>
struct flat_arrays {
  static constexpr uint64_t empty_key = 0;
  static constexpr uint64_t gone_key = 1;
  static constexpr size_t npos = ~size_t{0};
  static bool full(uint64_t key) { return key > gone_key; }

  struct slot {
    uint64_t key;
    alignas(Value) unsigned char raw[sizeof(Value)];
  };

  slot* slots = nullptr;
  size_t cap = 0, size = 0;
  size_t bytes = 0; // taken from table_memory (cap's slots, or more)

  // The slot after i, wrapping (a capacity need not be a power of two).
  size_t next(size_t i) const { return i + 1 == cap ? 0 : i + 1; }

  uint64_t& key_at(size_t i) { return slots[i].key; }
  uint64_t key_at(size_t i) const { return slots[i].key; }
  Value& val_at(size_t i) {
    return *std::launder(reinterpret_cast<Value*>(slots[i].raw));
  }
  const Value& val_at(size_t i) const {
    return *std::launder(reinterpret_cast<const Value*>(slots[i].raw));
  }

  // At least `capacity` slots: as many as the memory taken holds (huge
  // arrays come in whole 2 MiB pages).
  void allocate(size_t capacity) {
    size_t want = table_memory::usable(capacity * sizeof(slot));
    slots = static_cast<slot*>(table_memory::take(want));
    if (!slots)
      throw std::bad_alloc{};
    bytes = want;
    cap = want / sizeof(slot);
    size = 0;
  }

  // Writes every page of the array (each slot stays empty), so that the
  // kernel's first-touch faults are taken by the thread calling this.
  void prefault() { table_memory::touch(slots, bytes); }

  void release() {
    if (!cap)
      return;
    if constexpr (!std::is_trivially_destructible_v<Value>)
      for (size_t i = 0; i < cap; ++i)
        if (full(key_at(i)))
          val_at(i).~Value();
    table_memory::give(slots, bytes);
    *this = flat_arrays{};
  }

  // The slot of `key` (a full key), probing from its home `i`.
  size_t find(uint64_t key, size_t i) const {
    if (!cap)
      return npos;
    for (;; i = next(i)) {
      auto k = key_at(i);
      if (k == key)
        return i;
      if (k == empty_key)
        return npos;
    }
  }

  // Puts a key known to be absent at the first free slot of its run.
  size_t place(uint64_t key, size_t i, Value&& v) {
    for (; full(key_at(i)); i = next(i)) {
    }
    key_at(i) = key;
    new (slots[i].raw) Value(std::move(v));
    ++size;
    return i;
  }

  // Marks slot i as left (a draining table only).
  void leave(size_t i) {
    val_at(i).~Value();
    key_at(i) = gone_key;
    --size;
  }

  // Removes `key` by backward shift: the entries after it in its probe
  // run move up, so that no tombstone is left (a table with no `gone`
  // slots only).
  template <class Home>
  bool erase(uint64_t key, Home home) {
    size_t i = find(key, home(key));
    if (i == npos)
      return false;
    --size;
    for (size_t j = next(i);; j = next(j)) {
      if (key_at(j) == empty_key)
        break;
      // Entry j may fill hole i unless its home lies cyclically in (i, j].
      size_t h = home(key_at(j));
      bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (stays)
        continue;
      key_at(i) = key_at(j);
      val_at(i) = std::move(val_at(j));
      i = j;
    }
    key_at(i) = empty_key;
    val_at(i).~Value(); // what it held goes now
    return true;
  }

  void prefetch(size_t i) const {
    if (!cap)
      return;
    auto first = reinterpret_cast<uintptr_t>(&slots[i]);
    auto last = first + sizeof(slot) - 1;
    prefetch_line(&slots[i]);
    // A slot that straddles two lines: its second one too.
    if ((first ^ last) >> 6)
      prefetch_line(reinterpret_cast<const void*>(last));
  }

  template <class F>
  void each(F& f) const {
    for (size_t i = 0; i < cap; ++i)
      if (full(key_at(i)))
        f(key_at(i), val_at(i));
  }
};

} // namespace outrider::indexer
