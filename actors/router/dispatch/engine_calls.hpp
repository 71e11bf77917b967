#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "actors/router/dispatch/dispatch_config.hpp"
#include "runtime/worker_pool.hpp"

namespace grpc {
class Channel;
class ClientContext;
} // namespace grpc

namespace outrider::router {

class mux_client;

/// The dispatcher's engine calls: one channel per endpoint, the calls in
/// flight (so that a shutdown reaches every one), and the blocking chores
/// around them (aborts on engines), run off gRPC's threads.
class engine_calls {
 public:
  explicit engine_calls(const dispatch_config& cfg);
  ~engine_calls(); // waits for the chores
  engine_calls(const engine_calls&) = delete;
  engine_calls& operator=(const engine_calls&) = delete;

  /// `relay`: a sidecar's relay (with the relay credentials), else an
  /// engine (plaintext).
  std::shared_ptr<grpc::Channel> channel_for(const std::string& endpoint,
                                             bool relay);
  /// The multiplexed stream to the relay at `endpoint` serving `worker`
  /// (`--dispatch mux`): the open one, or a new one once it ended or its
  /// relay said it drains; null once everything was cancelled.
  std::shared_ptr<mux_client> mux_for(const std::string& endpoint,
                                      const std::string& worker);
  /// A relay that answered the mux stream UNIMPLEMENTED (a sidecar of an
  /// older outrider, or another OpenEngine server): its requests go as
  /// `Generate` streams for a minute, then the mux is tried again.
  void mux_unsupported(const std::string& endpoint);
  bool mux_refused(const std::string& endpoint);
  /// Registers a call about to start; false (nothing registered) once
  /// everything was cancelled.
  bool track(grpc::ClientContext* ctx);
  void untrack(grpc::ClientContext* ctx);
  /// Runs a blocking chore off gRPC's threads (bounded; dropped and logged
  /// beyond).
  void chore(std::function<void()> fn);
  /// Cancels every call in flight; later ones are refused by `track`.
  void cancel_all();
  /// True once `cancel_all` ran.
  bool cut() const { return cut_.load(); }

 private:
  // Once a second while multiplexed streams exist: their requests past
  // their deadline end (mux_client::expire). One thread for the router,
  // started with the first stream.
  void sweep();

  std::shared_ptr<grpc::ChannelCredentials> relay_creds_;
  std::string relay_server_name_;
  std::atomic<bool> cut_{false};
  std::mutex mtx_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_; // mtx_
  std::set<grpc::ClientContext*> calls_;                           // mtx_
  std::map<std::string, std::shared_ptr<mux_client>> muxes_;       // mtx_
  // Replaced in `muxes_` as their relay drains, until they end: expiry
  // and `cancel_all` still reach their requests.
  std::vector<std::shared_ptr<mux_client>> draining_muxes_;             // mtx_
  std::map<std::string, std::chrono::steady_clock::time_point> no_mux_; // mtx_
  runtime::worker_pool chores_{2, 4096};
  std::condition_variable sweep_cv_; // mtx_
  bool stopping_ = false;            // mtx_
  std::thread sweeper_;              // started under mtx_
};

} // namespace outrider::router
