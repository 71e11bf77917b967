#include "actors/sidecar/event_hub.hpp"

#include <chrono>
#include <random>

namespace outrider::sidecar {

namespace {

uint64_t random_epoch() {
  std::random_device rd;
  uint64_t e = (uint64_t{rd()} << 32) ^ rd();
  return e == 0 ? 1 : e;
}

} // namespace

event_hub::event_hub(size_t history)
  : history_(history), epoch_(random_epoch()) {}

uint64_t event_hub::position() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return position_;
}

std::vector<batch_ptr> kv_subscription::take() {
  std::lock_guard<std::mutex> guard{mtx_};
  std::vector<batch_ptr> out;
  out.swap(pending_);
  return out;
}

bool kv_subscription::notify_once(std::function<void()> f) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!pending_.empty() || overflowed_)
    return false;
  notify_ = std::move(f);
  return true;
}

void kv_subscription::push(batch_ptr b) {
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (overflowed_)
      return;
    if (pending_.size() >= capacity_) {
      overflowed_ = true;
      pending_.clear();
    } else {
      pending_.push_back(std::move(b));
    }
    notify.swap(notify_);
  }
  if (notify)
    notify();
}

bool kv_subscription::overflowed() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return overflowed_;
}

void event_hub::on_batch(const indexer::kv_batch& b) {
  auto copy = std::make_shared<indexer::kv_batch>(b);
  std::lock_guard<std::mutex> guard{mtx_};
  copy->position = ++position_;
  copy->unix_nanos =
    static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
  batch_ptr ptr = std::move(copy);
  auto& kept = kept_[b.rank];
  // A reset (all cleared) makes older history useless for resuming.
  kept.push_back(ptr);
  while (kept.size() > history_)
    kept.pop_front();
  std::erase_if(subs_, [&](auto& weak) {
    auto s = weak.lock();
    if (!s || s->overflowed())
      return true;
    if (s->wants(b.rank))
      s->push(ptr);
    return false;
  });
}

bool event_hub::subscribe(const std::shared_ptr<kv_subscription>& s,
                          std::optional<uint64_t> start) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (start) {
    std::vector<batch_ptr> backlog;
    for (const auto& [rank, kept] : kept_) {
      if (!s->wants(rank) || kept.empty() || kept.back()->seq < *start)
        continue;
      if (kept.front()->seq > *start)
        return false; // history does not reach back that far
      for (const auto& b : kept)
        if (b->seq >= *start)
          backlog.push_back(b);
    }
    for (auto& b : backlog)
      s->push(std::move(b));
  }
  subs_.push_back(s);
  return true;
}

} // namespace outrider::sidecar
