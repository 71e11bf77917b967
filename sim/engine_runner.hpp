#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "sim/engine_core.hpp"
#include "sim/kv_encoding.hpp"
#include "sim/kv_publisher.hpp"

namespace outrider::sim {

/// The outputs of one request as they arrive; read by the RPC handler.
class request_stream {
 public:
  /// Waits up to `timeout` for outputs and returns what arrived (maybe none).
  std::vector<token_output> wait(std::chrono::milliseconds timeout);
  void push(token_output o);
  bool finished() const;

 private:
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<token_output> pending_; // guarded by mtx_
  bool finished_ = false;             // guarded by mtx_
};

/// A subscriber's queue of KV event batches (sequence number, events).
class event_subscription {
 public:
  explicit event_subscription(size_t capacity) : capacity_(capacity) {}
  /// Waits up to `timeout`; returns the batches that arrived.
  std::vector<std::pair<uint64_t, std::vector<kv_event>>>
  wait(std::chrono::milliseconds timeout);
  /// False once the subscriber fell `capacity` batches behind (dropped).
  bool push(uint64_t seq, const std::vector<kv_event>& events);
  bool overflowed() const;

 private:
  size_t capacity_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<std::pair<uint64_t, std::vector<kv_event>>> pending_;
  bool overflowed_ = false;
};

struct runner_options {
  int rank = 0;
  double speedup = 1.0;
  bool no_sleep = false; // run steps back to back (throughput tests)
  event_encoding encoding = event_encoding::map;
  hash_format hashes = hash_format::uint64;
};

/// Runs one data-parallel rank: a thread that steps the engine core, sleeps
/// for the modelled step time, hands tokens to request streams and KV events
/// to the publisher. Every method is thread-safe.
class engine_runner {
 public:
  engine_runner(engine_config cfg, runner_options opts, kv_publisher* pub);
  ~engine_runner();

  /// Queues a request; nullptr (with `why`) when it is refused.
  std::shared_ptr<request_stream> submit(engine_request req, std::string* why);
  bool abort(const std::string& id);
  /// Paused: no steps run; queued requests wait.
  void set_paused(bool paused);
  void reset_prefix_cache();
  /// Publishes `payload` as the next batch, whatever it holds (tests).
  void inject_payload(std::string payload);
  /// Publishes raw frames outside the sequence (tests).
  void inject_frames(std::vector<std::string> frames);
  /// The next KV batch is not sent live (replay still has it).
  void lose_next_kv_message();
  /// The KV publisher numbers from 0 again (see kv_publisher::renumber).
  void renumber_kv_messages();
  /// Replays are answered by a hostile drip from now on (fault tests).
  void drip_malformed_replays();
  std::vector<cached_block> cache_snapshot() const;
  engine_load load() const;
  bool idle() const;
  /// Aborts everything still queued or running.
  void abort_all();
  int rank() const { return opts_.rank; }
  /// Live batches from now on; with `snapshot`, first the cached blocks as
  /// stores (parents first) under the sequence number of the last batch.
  std::shared_ptr<event_subscription>
  subscribe(bool snapshot, std::vector<kv_event>* snapshot_events,
            uint64_t* seq);
  const engine_config& config() const { return cfg_; }

 private:
  void run();

  engine_config cfg_;
  runner_options opts_;
  kv_publisher* pub_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  engine_core core_; // mtx_
  std::unordered_map<std::string, std::shared_ptr<request_stream>> streams_;
  bool paused_ = false;   // mtx_
  bool kick_ = false;     // a step is owed (events to publish)        // mtx_
  bool stopping_ = false; // mtx_
  uint64_t next_seq_ = 0; // sequence number of the next batch       // mtx_
  std::vector<std::weak_ptr<event_subscription>> subscribers_; // mtx_
  std::thread thread_;
};

} // namespace outrider::sim
