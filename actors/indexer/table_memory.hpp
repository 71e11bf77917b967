#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <new>
#include <sys/mman.h>
#include <system_error>
#include <utility>

namespace outrider::indexer {

/// Memory for the index's tables at fleet size (flat_table's arrays):
/// where it comes from, how its pages are faulted in ahead of use, and how
/// many threads may be doing that.
namespace table_memory {

constexpr size_t huge_page = size_t{2} << 20;
// Arrays from this size up are taken in huge pages.
constexpr size_t huge_from = size_t{4} << 20;

/// Bytes mapped by `take` and not yet given back, process-wide: outside
/// malloc's own counts (mallinfo), for what measures memory.
inline std::atomic<size_t>& mapped() {
  static std::atomic<size_t> bytes{0};
  return bytes;
}

/// The bytes `take(bytes)` really provides: from `huge_from` up, whole
/// huge pages. An array may use all of it (its caller sizes itself by
/// this rather than leave up to 2 MiB unused) and give back what it used.
inline size_t usable(size_t bytes) {
  return bytes < huge_from ? bytes : (bytes + huge_page - 1) & ~(huge_page - 1);
}

/// A zeroed array of `bytes`, given back with `give` (same size). Below
/// `huge_from` from calloc. From `huge_from` up, straight from the kernel
/// (an anonymous mapping: zero pages, faulted in as they are first
/// touched, nothing written here), aligned to 2 MiB and asked of it in
/// huge pages (MADV_HUGEPAGE; a no-op where transparent huge pages are
/// off): lookups at random in an index of fleet size (hundreds of MB) miss
/// the TLB on every block with 4 KiB pages, and a growth's pages fault 512
/// at a time.
inline void* take(size_t bytes) {
  if (bytes < huge_from)
    return std::calloc(bytes, 1);
  size_t rounded = usable(bytes);
  // Asked one huge page longer, then trimmed to start on a boundary.
  size_t span = rounded + huge_page;
  void* m = ::mmap(nullptr, span, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return nullptr;
  auto base = reinterpret_cast<uintptr_t>(m);
  auto start = (base + huge_page - 1) & ~(uintptr_t{huge_page} - 1);
  if (start > base)
    ::munmap(m, start - base);
  if (auto end = start + rounded; base + span > end)
    ::munmap(reinterpret_cast<void*>(end), base + span - end);
  ::madvise(reinterpret_cast<void*>(start), rounded, MADV_HUGEPAGE);
  mapped().fetch_add(rounded, std::memory_order_relaxed);
  return reinterpret_cast<void*>(start);
}

/// Gives back an array from `take` of `bytes`.
inline void give(void* p, size_t bytes) {
  if (!p)
    return;
  if (bytes < huge_from)
    std::free(p);
  else {
    size_t rounded = usable(bytes);
    ::munmap(p, rounded);
    mapped().fetch_sub(rounded, std::memory_order_relaxed);
  }
}

/// Writes a zero byte into every page of `bytes` at `p`, so that the
/// kernel's first-touch faults are taken by the calling thread. Volatile:
/// a compiler may drop a memset of zeros after an allocation (GCC folds
/// malloc + memset into calloc, which leaves fresh pages untouched), and
/// did.
inline void touch(void* p, size_t bytes) {
  auto* b = static_cast<volatile unsigned char*>(p);
  for (size_t i = 0; i < bytes; i += 4096)
    b[i] = 0;
}

} // namespace table_memory

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

/// The next size's arrays of a growing table, made on a helper thread (one
/// of prefault_helpers; std::async, gone when done) and their pages
/// faulted in there, for the growth to take ready. `Arrays` has
/// `allocate(capacity)` (throws std::bad_alloc), `prefault()`,
/// `release()` and `cap`.
template <class Arrays>
class spare_arrays {
 public:
  spare_arrays() = default;
  spare_arrays(const spare_arrays&) = delete;
  spare_arrays& operator=(const spare_arrays&) = delete;
  ~spare_arrays() { drop(); }

  /// Whether the helper is still at work on the arrays asked for.
  bool working() const {
    return made_.valid() &&
           made_.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  }
  /// Whether made arrays are held, ready or not yet.
  bool holding() const { return made_.valid(); }
  /// Whether arrays were asked for while the table had `cap` slots.
  bool asked_at(size_t cap) const { return asked_at_ == cap; }
  /// Asks for arrays of `capacity` slots, once per `cap` whatever comes
  /// of it: with no helper free or no thread to be had, the growth
  /// allocates for itself.
  void ask(size_t cap, size_t capacity) {
    asked_at_ = cap;
    if (!prefault_helpers::enter())
      return;
    try {
      made_ = std::async(std::launch::async, [capacity] {
        struct leave_at_end {
          ~leave_at_end() { prefault_helpers::leave(); }
        } at_end;
        Arrays a;
        a.allocate(capacity);
        a.prefault();
        return a;
      });
    } catch (const std::system_error&) {
      prefault_helpers::leave();
    }
  }
  /// The arrays if they have `capacity` slots or more (waiting for the
  /// helper if it is not done), else empty ones (cap 0), as when its
  /// allocation failed.
  Arrays take(size_t capacity) {
    Arrays a;
    if (!made_.valid())
      return a;
    try {
      a = made_.get();
    } catch (const std::bad_alloc&) {
      return Arrays{};
    }
    if (a.cap < capacity) {
      a.release();
      return Arrays{};
    }
    ++prepared_;
    return a;
  }
  /// Frees what was made (waiting for the helper) and forgets the ask.
  void drop() {
    asked_at_ = 0;
    if (!made_.valid())
      return;
    try {
      made_.get().release();
    } catch (const std::bad_alloc&) {
    }
  }
  /// Growths that took arrays made here.
  size_t prepared() const { return prepared_; }
  void swap(spare_arrays& o) noexcept {
    std::swap(made_, o.made_);
    std::swap(asked_at_, o.asked_at_);
    std::swap(prepared_, o.prepared_);
  }

 private:
  std::future<Arrays> made_;
  size_t asked_at_ = 0;
  size_t prepared_ = 0;
};

} // namespace outrider::indexer
