#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "actors/indexer/kv_batch.hpp"

namespace outrider::sidecar {

using batch_ptr = std::shared_ptr<const indexer::kv_batch>;

/// One subscriber's bounded queue of batches. Thread-safe.
class kv_subscription {
 public:
  kv_subscription(std::set<int> ranks, size_t capacity)
    : ranks_(std::move(ranks)), capacity_(capacity) {}
  /// What arrived so far, without waiting.
  std::vector<batch_ptr> take();
  /// Arms `f` to run once, on the pushing thread, when something arrives
  /// or the subscription overflows: how an asynchronous writer waits
  /// without a thread. False (and `f` dropped) when that already happened:
  /// take() again.
  bool notify_once(std::function<void()> f);
  void push(batch_ptr b);
  /// True once the subscriber fell `capacity` batches behind: it is dropped.
  bool overflowed() const;
  bool wants(int rank) const { return ranks_.empty() || ranks_.count(rank); }

 private:
  std::set<int> ranks_;
  size_t capacity_;
  mutable std::mutex mtx_;
  std::vector<batch_ptr> pending_; // guarded by mtx_
  bool overflowed_ = false;        // guarded by mtx_
  std::function<void()> notify_;   // guarded by mtx_
};

/// The sidecar's event plane to routers: receives every batch the indexer
/// applied (on the indexer's thread), numbers them (`position`: 1, 2, ...
/// over all ranks, within this hub's random `epoch`), keeps the last
/// `history` batches per rank for resuming subscribers, and fans out to
/// subscriptions. A subscriber that sees positions skip has lost batches.
class event_hub final : public indexer::kv_listener {
 public:
  explicit event_hub(size_t history = 10000);

  void on_batch(const indexer::kv_batch& b) override;

  /// Registers `s`; when `start` is given, first hands it the kept batches
  /// from that sequence on. False (nothing registered) when the history no
  /// longer reaches back to `start` for some wanted rank.
  bool subscribe(const std::shared_ptr<kv_subscription>& s,
                 std::optional<uint64_t> start);

  uint64_t epoch() const { return epoch_; }
  /// The position of the last batch handed out (0: none yet). Read on the
  /// indexer's thread, it is exactly what the index holds.
  uint64_t position() const;

 private:
  size_t history_;
  uint64_t epoch_;
  uint64_t position_ = 0; // guarded by mtx_
  mutable std::mutex mtx_;
  std::map<int, std::deque<batch_ptr>> kept_;        // guarded by mtx_
  std::vector<std::weak_ptr<kv_subscription>> subs_; // guarded by mtx_
};

} // namespace outrider::sidecar
