#pragma once

#include <memory>
#include <mutex>

namespace outrider::runtime {

/// A value that a reload may replace while other threads read it: a
/// reader takes the current version whole (a shared pointer it keeps as
/// long as it needs), a writer swaps in a new one. Never blocks a reader
/// for longer than a pointer copy.
template <class T>
class live_value {
 public:
  explicit live_value(T v) : cur_(std::make_shared<const T>(std::move(v))) {}
  live_value(const live_value&) = delete;
  live_value& operator=(const live_value&) = delete;

  std::shared_ptr<const T> get() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return cur_;
  }
  void set(T v) {
    auto next = std::make_shared<const T>(std::move(v));
    std::lock_guard<std::mutex> guard{mtx_};
    cur_.swap(next); // the old version goes when its last reader lets go
  }

 private:
  mutable std::mutex mtx_;
  std::shared_ptr<const T> cur_;
};

template <class T>
using live_ptr = std::shared_ptr<live_value<T>>;

} // namespace outrider::runtime
