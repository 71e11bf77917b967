#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <google/protobuf/arena.h>
#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include "openengine.pb.h"

namespace outrider::router {

using kv_metadata = std::multimap<grpc::string_ref, grpc::string_ref>;

/// What one SubscribeKvEvents call tells its owner, on gRPC's callback
/// threads, one call at a time; `done` is always the last.
struct kv_stream_calls {
  /// When set, reading starts only once the sidecar's initial metadata is
  /// in (the snapshot's epoch and position); returning false cancels.
  std::function<bool(const kv_metadata&)> metadata;
  /// One message; returning false cancels the call.
  std::function<bool(openengine::v1::SubscribeKvEventsResponse&)> response;
  std::function<void(const grpc::Status&)> done;
};

/// The arena a KV batch read off an event plane is parsed into (both
/// planes; kv_stream.cpp says why): one block for a live batch.
google::protobuf::ArenaOptions kv_batch_arena_options();

/// Opens `SubscribeKvEvents(include_snapshot)` on gRPC's callback API: the
/// call holds no thread, so a router's threads do not grow with its
/// workers. Returns the call's context: `TryCancel` ends it (`done` still
/// follows). `calls.done` may run before this returns. `worker` is the
/// record's worker id, sent for the relay to check it serves that worker.
std::shared_ptr<grpc::ClientContext> open_kv_stream(
  const std::shared_ptr<grpc::Channel>& channel, const std::string& worker,
  std::chrono::system_clock::time_point deadline, kv_stream_calls calls);

/// Counts an owner's calls and timers in flight, so that it can wait, when
/// it goes, until none of them can call it any more.
class in_flight {
 public:
  void add() {
    std::lock_guard<std::mutex> guard{mtx_};
    ++count_;
  }
  /// The last thing a call or timer does with its owner.
  void release() {
    std::lock_guard<std::mutex> guard{mtx_};
    --count_;
    idle_.notify_all(); // under the lock: the owner may go once it wakes
  }
  void wait_idle() {
    std::unique_lock<std::mutex> lock{mtx_};
    idle_.wait(lock, [this] { return count_ == 0; });
  }

 private:
  std::mutex mtx_;
  std::condition_variable idle_;
  int count_ = 0;
};

/// A gRPC alarm armed again and again from its own callback's chain (the
/// callback opens a stream; the stream, failing at once, arms the next
/// pause, possibly on another thread while the callback still runs). The
/// alarm being replaced is kept one round longer instead of destroyed
/// under its running callback. Guarded by its owner's lock.
class rearmable_alarm {
 public:
  void arm(std::chrono::system_clock::time_point at,
           std::function<void(bool)> fn) {
    retired_ = std::move(current_); // fired already; may still be running
    current_ = std::make_unique<grpc::Alarm>();
    current_->Set(at, std::move(fn));
  }
  grpc::Alarm* current() const { return current_.get(); }
  /// Once nothing can run any more (its callbacks hold their owner).
  void reset() {
    current_.reset();
    retired_.reset();
  }

 private:
  std::unique_ptr<grpc::Alarm> current_, retired_;
};

/// Ends an owner's stream and its pause: marks it stopping under `mtx`
/// (after which neither `call` nor `pause` is replaced), cancels both
/// outside the lock (a cancelled alarm may run its callback right here),
/// and waits until neither can call the owner any more.
void stop_stream(std::mutex& mtx, bool& stopping,
                 const std::shared_ptr<grpc::ClientContext>& call,
                 const rearmable_alarm& pause, in_flight& pending);

} // namespace outrider::router
