#include "runtime/worker_pool.hpp"

namespace outrider::runtime {

worker_pool::worker_pool(size_t max_threads, size_t max_queued)
  : max_threads_(max_threads == 0 ? 1 : max_threads), max_queued_(max_queued) {}

worker_pool::~worker_pool() {
  stop();
}

bool worker_pool::try_run(std::function<void()> job) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (stopping_)
    return false;
  if (idle_ > jobs_.size()) {
    jobs_.push_back(std::move(job));
    wake_.notify_one();
    return true;
  }
  if (threads_.size() < max_threads_) {
    jobs_.push_back(std::move(job));
    threads_.emplace_back([this] { work(); });
    return true;
  }
  if (jobs_.size() - idle_ < max_queued_) {
    jobs_.push_back(std::move(job));
    return true;
  }
  return false;
}

void worker_pool::work() {
  std::unique_lock<std::mutex> guard{mtx_};
  for (;;) {
    ++idle_;
    wake_.wait(guard, [this] { return stopping_ || !jobs_.empty(); });
    --idle_;
    if (jobs_.empty())
      return; // stopping, nothing left
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    ++running_;
    guard.unlock();
    try {
      job();
    } catch (...) {
      // A job's failure is its own; the pool thread lives on.
    }
    guard.lock();
    --running_;
  }
}

void worker_pool::stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
    threads.swap(threads_);
  }
  wake_.notify_all();
  for (auto& t : threads)
    t.join();
}

size_t worker_pool::threads() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return threads_.size();
}

size_t worker_pool::busy() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return running_ + jobs_.size();
}

} // namespace outrider::runtime
