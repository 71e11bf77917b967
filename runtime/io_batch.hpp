#pragma once

// Work handed from one thread to I/O threads, gathered while a scope runs.

#include <boost/asio/any_io_executor.hpp>
#include <memory>
#include <string>

namespace outrider::runtime {

/// While one lives on a thread, the streamed writes that thread hands to
/// I/O threads (the HTTP sessions' `post_data`) gather per I/O thread and
/// go as one post each when the outermost scope ends, instead of one post
/// each (a handler made and freed, the scheduler's lock, perhaps a wake).
/// For a reader that hands many streams their tokens at once: the relay
/// mux's reader, an engine step's tokens for every request in one message.
/// Scopes nest; only the outermost posts.
class io_batch {
 public:
  io_batch();
  ~io_batch();
  io_batch(const io_batch&) = delete;
  io_batch& operator=(const io_batch&) = delete;

  using apply_fn = void (*)(const std::shared_ptr<void>& target,
                            std::string& data);
  /// Gathers `fn(target, data)` to run on `ex`, in order with what else
  /// was gathered for it, and takes `data`; false (leaving `data` as it
  /// was) when no batch is open on this thread: post it yourself.
  static bool add(const boost::asio::any_io_executor& ex, apply_fn fn,
                  std::shared_ptr<void> target, std::string&& data);
  /// Posts what was gathered for `ex` now, if anything: for work posted
  /// apart that must come after it (a stream's end after its last data).
  static void flush(const boost::asio::any_io_executor& ex);
  /// Open batches on this thread (for tests).
  static int depth();
};

} // namespace outrider::runtime
