#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/security/credentials.h>

#include "actors/router/brain/kv_router.hpp"
#include "runtime/actor_slot.hpp"

namespace outrider::router {

/// Asks every worker's relay for its engine's load (OpenEngine
/// `GetLoad`, per rank) once a second and tells the router actor what the
/// engines report of their KV cache (`engine_load_atom`): what the
/// decode-busy guard of conditional disaggregation and the status page use
/// instead of the router's own books, while it is fresh. Engines that
/// report nothing (vLLM) are simply not told. One thread; the calls are on
/// gRPC's callback API with a deadline, so a silent worker holds up nobody.
class load_poller {
 public:
  load_poller(runtime::slot_ptr<kv_router_actor> router,
              std::shared_ptr<grpc::ChannelCredentials> creds,
              std::string tls_server_name,
              std::chrono::milliseconds every = std::chrono::seconds{1});
  ~load_poller();

  load_poller(const load_poller&) = delete;
  load_poller& operator=(const load_poller&) = delete;

  /// The workers to ask: worker id -> relay endpoint.
  void set_workers(std::map<std::string, std::string> relays);

 private:
  struct target;
  void run();
  void poll(const std::string& id, const std::string& endpoint);

  runtime::slot_ptr<kv_router_actor> router_;
  std::shared_ptr<grpc::ChannelCredentials> creds_;
  std::string server_name_;
  std::chrono::milliseconds every_;
  std::mutex mtx_;
  std::condition_variable wake_;
  bool stopping_ = false;                                  // mtx_
  std::map<std::string, std::string> relays_;              // mtx_
  std::map<std::string, std::shared_ptr<target>> targets_; // the thread's
  std::shared_ptr<std::atomic<int>> in_flight_ =
    std::make_shared<std::atomic<int>>(0);
  std::thread thread_;
};

} // namespace outrider::router
