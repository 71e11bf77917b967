#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

namespace outrider::sim {

struct publisher_config {
  std::string endpoint = "tcp://*:5557"; // PUB, already per rank
  std::string replay_endpoint;           // ROUTER; empty: no replay
  std::string topic;                     // first frame of each message
  size_t buffer_steps = 10000;           // batches kept for replay
  int hwm = 100000;
  bool replay_topic_frame = true; // false: older vLLM / SGLang framing
};

/// `tcp://host:port` with the port moved by `rank`; `inproc://x` becomes
/// `inproc://x_dp{rank}` (docs/wire.md, "KV events: transport").
std::string rank_endpoint(const std::string& base, int rank);

/// One rank's KV event publisher: a PUB socket sending `[topic, seq, payload]`
/// and a ROUTER socket answering replay requests from its buffer of recent
/// batches. Sockets live on the publisher's own thread; `publish` may be
/// called from any thread.
class kv_publisher {
 public:
  kv_publisher(zmq::context_t& ctx, publisher_config cfg);
  ~kv_publisher();

  kv_publisher(const kv_publisher&) = delete;
  kv_publisher& operator=(const kv_publisher&) = delete;

  /// Error text when binding failed, else empty.
  const std::string& error() const { return error_; }

  /// Assigns the next sequence number to `payload` and sends it.
  void publish(std::string payload);

  /// Sends raw frames as one message, outside the sequence (tests of
  /// consumers' handling of broken input).
  void publish_frames(std::vector<std::string> frames);

  /// The next sequenced message is lost on the wire (kept for replay, not
  /// sent live), as a slow subscriber past ZeroMQ's high-water mark sees.
  void lose_next() { lose_next_ = true; }

  /// Numbers from 0 again, with an empty replay buffer, as a publisher
  /// restarted under the same instance does (fault tests).
  void renumber();

  /// From now on replay requests are answered as a hostile peer would: a
  /// malformed frame every 20 ms, for a minute, and never an end (fault
  /// tests of consumers' replay deadlines).
  void drip_malformed_replies() { drip_ = true; }

  uint64_t malformed_replay_requests() const { return bad_requests_.load(); }

 private:
  void run();
  void serve_replay(zmq::socket_t& router);

  publisher_config cfg_;
  zmq::socket_t pub_;
  zmq::socket_t router_;
  int wake_fd_ = -1;
  std::string error_;
  std::mutex mtx_;
  std::deque<std::pair<uint64_t, std::string>> queue_;  // guarded by mtx_
  std::deque<std::vector<std::string>> raw_;            // guarded by mtx_
  std::deque<std::pair<uint64_t, std::string>> buffer_; // publisher thread
  std::atomic<uint64_t> next_seq_{0};
  std::atomic<uint64_t> bad_requests_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> lose_next_{false};
  std::atomic<bool> renumbered_{false};
  std::atomic<bool> drip_{false};
  // Peers being dripped at, until when; publisher thread only.
  std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>>
    drips_;
  std::thread thread_;
};

} // namespace outrider::sim
