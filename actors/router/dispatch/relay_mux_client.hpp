#pragma once

// The router's end of `RelayMux.Relay` (proto/relay_mux.proto,
// `--dispatch mux`): one bidirectional stream to one sidecar relay carries
// every request this router relays through it, each told to an
// `engine::generate_sink` exactly as `engine::start_generate` tells it (on
// gRPC's callback threads, one call at a time and in order, `on_done` last).
// The relay gathers the tokens of many requests into one message, so the
// router reads one message per engine step, not one per request and token.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <grpcpp/grpcpp.h>

#include "cluster/engine/engine_call.hpp"
#include "relay_mux.grpc.pb.h"

namespace outrider::router {

class mux_client final
  : public grpc::ClientBidiReactor<outrider::relaymux::v1::MuxRequest,
                                   outrider::relaymux::v1::MuxResponse> {
 public:
  /// Opens the stream to the relay behind `ch`, naming `worker` (the
  /// relay refuses the stream if it serves another).
  static std::shared_ptr<mux_client>
  open(const std::shared_ptr<grpc::Channel>& ch, const std::string& worker);

  /// Starts one request, its id written to `id` before anything can reach
  /// `sink` (which may hear of it before this returns, on another thread:
  /// touch nothing of the caller's after a true). `sink` must live until
  /// its `on_done`. False: the stream had ended or drains; `sink` hears
  /// nothing.
  bool start(const openengine::v1::GenerateRequest& req,
             const engine::call_target& target,
             std::chrono::system_clock::time_point deadline,
             engine::generate_sink& sink, uint64_t& id);
  /// Asks the relay to cancel a request; it still ends by its `on_done`
  /// (CANCELLED, or however it ended first).
  void cancel(uint64_t id);
  /// Ends the whole stream: every open request ends CANCELLED.
  void cancel_all() {
    cancelled_ = true;
    ctx_.TryCancel();
  }
  /// The stream ended: `start` refuses requests.
  bool ended() const { return ended_.load(); }
  /// The relay said it shuts down (`MuxResponse.draining`): `start`
  /// refuses requests; those open run on there.
  bool draining() const { return draining_.load(); }
  /// How it ended (once `ended`): UNIMPLEMENTED from a relay without the mux.
  grpc::StatusCode end_code() const { return end_code_.load(); }
  /// Ends the requests whose deadline passed by `now` (DEADLINE_EXCEEDED)
  /// and asks the relay to cancel them: a relay that stops answering
  /// without breaking its connection holds no request past its deadline.
  void expire(std::chrono::system_clock::time_point now);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& st) override;

 private:
  mux_client() = default;
  // Both leave `guard` unlocked.
  void write_next(std::unique_lock<std::mutex>& guard);
  void release_if_closed(std::unique_lock<std::mutex>& guard);

  grpc::ClientContext ctx_;
  std::unique_ptr<outrider::relaymux::v1::RelayMux::Stub> stub_;
  outrider::relaymux::v1::MuxResponse in_; // the read in flight
  outrider::relaymux::v1::MuxRequest out_; // the write in flight
  struct open_request {
    engine::generate_sink* sink;
    std::chrono::system_clock::time_point deadline;
  };
  // Held while sinks are told anything (reads, expiry, the end), so each
  // sink hears one call at a time; taken before mtx_, never inside it.
  std::mutex deliver_mtx_;
  std::mutex mtx_;
  outrider::relaymux::v1::MuxRequest pending_;       // mtx_
  std::unordered_map<uint64_t, open_request> sinks_; // mtx_
  uint64_t next_id_ = 1;                             // mtx_
  bool writing_ = false;
  bool closing_ = false;  // mtx_: the read side ended; no write starts
  int issuing_ = 0;       // mtx_: writes being started outside the lock
  bool released_ = false; // mtx_: the hold is gone // mtx_
  std::atomic<grpc::StatusCode> end_code_{grpc::StatusCode::OK};
  std::atomic<bool> ended_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> cancelled_{false}; // by cancel_all
  std::shared_ptr<mux_client> self_;   // until OnDone
};

} // namespace outrider::router
