#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace outrider::runtime {

/// Runs blocking jobs on at most `max_threads` threads, started as the
/// load needs them, with at most `max_queued` jobs waiting; beyond that
/// `try_run` refuses, so the caller can answer "busy" instead of piling up.
class worker_pool {
 public:
  worker_pool(size_t max_threads, size_t max_queued = 0);
  ~worker_pool();
  worker_pool(const worker_pool&) = delete;
  worker_pool& operator=(const worker_pool&) = delete;

  /// False when every thread is busy and the queue is full, or stopping.
  bool try_run(std::function<void()> job);

  /// Refuses new jobs, lets the queued and running ones finish, joins.
  void stop();

  size_t threads() const;
  /// Jobs running or queued now.
  size_t busy() const;

 private:
  void work();

  size_t max_threads_;
  size_t max_queued_;
  mutable std::mutex mtx_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_; // guarded by mtx_
  std::vector<std::thread> threads_;       // guarded by mtx_
  size_t idle_ = 0;                        // guarded by mtx_
  size_t running_ = 0;                     // guarded by mtx_
  bool stopping_ = false;                  // guarded by mtx_
};

} // namespace outrider::runtime
