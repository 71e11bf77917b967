#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>

#include "runtime/supervisor.hpp"

namespace outrider::runtime {

/// The current incarnation of a supervised actor, as the supervisor
/// provides it: the child's start function fills the slot each time the
/// supervisor (re)starts it, so whoever holds the slot always reaches the
/// live actor (no global registry). Thread-safe: foreign threads (gRPC,
/// ZeroMQ, HTTP) may read it.
template <class Handle>
class actor_slot {
 public:
  /// The current handle (null before the first start).
  Handle get() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return handle_;
  }

  /// How many times the actor was started: a change means a new
  /// incarnation with fresh state.
  uint64_t generation() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return generation_;
  }

  void set(Handle h) {
    std::map<uint64_t, std::function<void()>> tell;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      handle_ = std::move(h);
      ++generation_;
      tell = listeners_;
    }
    for (auto& [id, f] : tell)
      f(); // outside the lock: a listener may read the slot
  }

  /// Calls `f` after every (re)start, on the supervisor's thread: it must
  /// not block (wake someone up). Returns a key for `forget`.
  uint64_t on_set(std::function<void()> f) {
    std::lock_guard<std::mutex> guard{mtx_};
    listeners_.emplace(++next_listener_, std::move(f));
    return next_listener_;
  }
  void forget(uint64_t key) {
    std::lock_guard<std::mutex> guard{mtx_};
    listeners_.erase(key);
  }

 private:
  mutable std::mutex mtx_;
  Handle handle_;                                       // guarded by mtx_
  uint64_t generation_ = 0;                             // guarded by mtx_
  std::map<uint64_t, std::function<void()>> listeners_; // guarded by mtx_
  uint64_t next_listener_ = 0;                          // guarded by mtx_
};

template <class Handle>
using slot_ptr = std::shared_ptr<actor_slot<Handle>>;

/// A child spec whose every incarnation is published in `slot`.
template <class Handle, class Spawn>
child_spec supervised(std::string name, slot_ptr<Handle> slot, Spawn spawn) {
  return {std::move(name),
          [slot, spawn = std::move(spawn)](caf::actor_system& sys) {
            Handle h = spawn(sys);
            slot->set(h);
            return caf::actor_cast<caf::actor>(h);
          }};
}

} // namespace outrider::runtime
