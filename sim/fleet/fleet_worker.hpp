#pragma once

// One worker of a simulated fleet: its GPU cache and the KV batches it
// publishes to whoever subscribed.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "openengine.pb.h"
#include "sim/block_manager.hpp"

namespace outrider::sim {

using kv_response = openengine::v1::SubscribeKvEventsResponse;
using kv_response_ptr = std::shared_ptr<const kv_response>;

/// Where a worker's batches go: one SubscribeKvEvents stream. Called under
/// the worker's lock: must not block.
class fleet_sink {
 public:
  virtual ~fleet_sink() = default;
  /// False once the stream is over (the worker forgets it).
  virtual bool push(kv_response_ptr batch) = 0;
};

/// A worker's cache: a block_manager whose blocks are all idle once their
/// request ran (the fleet's engine core models time, not memory), so a
/// prompt's blocks stay cached until evicted, least recently used first
/// (a prompt's tail before its head, as vLLM frees them). Thread-safe.
class fleet_worker {
 public:
  fleet_worker(size_t index, std::string id, uint32_t blocks,
               uint32_t block_size);

  /// Its place in the fleet (fleet_state's arrays).
  size_t index() const { return index_; }
  const std::string& id() const { return id_; }

  /// Caches `tokens`' full blocks; their stores and the evictions they
  /// cause go to every subscriber as one batch. Returns how many leading
  /// blocks were cached before.
  size_t run(const std::vector<uint32_t>& tokens);

  /// A new subscriber: its first batch is the snapshot (every cached block,
  /// parents first), then every batch from now on, in order.
  void subscribe(const std::shared_ptr<fleet_sink>& sink);

  /// A subscriber that takes every batch from now on and no snapshot (the
  /// NATS event plane: routers take their snapshots from the relay). Held
  /// weakly, as every subscriber: the caller keeps it.
  void follow(const std::shared_ptr<fleet_sink>& sink);

  /// Batches published so far.
  uint64_t batches() const;

  /// Calls `fn` with the position of the last batch, under the worker's
  /// lock: no batch is published meanwhile (a heartbeat never claims a
  /// batch that is not out yet). `fn` must not block.
  template <class Fn>
  void at_position(Fn&& fn) const {
    std::lock_guard<std::mutex> guard{mtx_};
    fn(seq_);
  }

 private:
  // Under mtx_: one batch of `events` to every live subscriber.
  void publish(std::vector<kv::kv_event> events);

  const size_t index_;
  const std::string id_;
  mutable std::mutex mtx_;
  block_manager cache_;                          // guarded by mtx_
  uint64_t seq_ = 0;                             // guarded by mtx_
  std::vector<std::weak_ptr<fleet_sink>> sinks_; // guarded by mtx_
};

/// The fleet's block hash: the parent's hash and the block's tokens.
uint64_t fleet_block_hash(std::optional<uint64_t> parent,
                          const uint32_t* tokens, uint32_t block_size);

} // namespace outrider::sim
