#pragma once

// One thread that runs callbacks when they are due: the fleet's engine
// core paces every worker's streams with it (no thread per stream).

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace outrider::sim {

class fleet_timer {
 public:
  using clock = std::chrono::steady_clock;

  fleet_timer() : thread_([this] { run(); }) {}
  ~fleet_timer() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  fleet_timer(const fleet_timer&) = delete;
  fleet_timer& operator=(const fleet_timer&) = delete;

  /// Runs `fn` on the timer's thread at `when` (never, once stopping).
  void at(clock::time_point when, std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (stopping_)
        return;
      due_.push({when, seq_++, std::move(fn)});
    }
    wake_.notify_one();
  }

 private:
  struct entry {
    clock::time_point when;
    uint64_t seq; // same time: first in, first out
    std::function<void()> fn;
    bool operator>(const entry& o) const {
      return when != o.when ? when > o.when : seq > o.seq;
    }
  };

  void run() {
    std::unique_lock<std::mutex> lock{mtx_};
    while (!stopping_) {
      if (due_.empty()) {
        wake_.wait(lock);
        continue;
      }
      auto when = due_.top().when;
      if (clock::now() < when) {
        wake_.wait_until(lock, when);
        continue;
      }
      auto fn = std::move(const_cast<entry&>(due_.top()).fn);
      due_.pop();
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  std::mutex mtx_;
  std::condition_variable wake_;
  std::priority_queue<entry, std::vector<entry>, std::greater<>> due_;
  uint64_t seq_ = 0;
  bool stopping_ = false;
  std::thread thread_; // last: starts once the rest is built
};

} // namespace outrider::sim
