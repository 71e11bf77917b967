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

/// One round of load polls over `n` workers: it lasts `every`, or longer
/// where that would ask more than `max_per_second` workers a second, and
/// its calls are spread evenly over it (the i-th is due `due(i)` after the
/// round began), not sent in one burst. A report is believed for three
/// rounds (`fresh_for`), so a slower round at fleet size does not leave
/// the engines' loads stale.
struct poll_round {
  std::chrono::milliseconds period{0};
  size_t n = 0;

  static poll_round of(size_t n, std::chrono::milliseconds every,
                       size_t max_per_second);
  std::chrono::milliseconds due(size_t i) const;
  std::chrono::milliseconds fresh_for() const { return 3 * period; }
};

/// Asks every worker's relay for its engine's load (OpenEngine
/// `GetLoad`, per rank) once a second, at most `max_per_second` workers a
/// second (10,000 workers: each every 10 s), and tells the router actor
/// what the engines report of their KV cache (`engine_load_atom`): what
/// the decode-busy guard of conditional disaggregation and the status page
/// use instead of the router's own books, while it is fresh. Engines that
/// report nothing (vLLM) are simply not told. One thread; the calls are on
/// gRPC's callback API with a deadline, so a silent worker holds up nobody.
class load_poller {
 public:
  /// A fleet of 10,000 asked at once each second was 10,000 calls in a
  /// burst, their deadlines expiring together on gRPC's timer threads
  /// (the router grew to 60 threads and its KV streams stalled behind
  /// them: docs/benchmarks.md, 2026-12-06).
  static constexpr size_t default_max_per_second = 1000;

  load_poller(runtime::slot_ptr<kv_router_actor> router,
              std::shared_ptr<grpc::ChannelCredentials> creds,
              std::string tls_server_name,
              std::chrono::milliseconds every = std::chrono::seconds{1},
              size_t max_per_second = default_max_per_second);
  ~load_poller();

  load_poller(const load_poller&) = delete;
  load_poller& operator=(const load_poller&) = delete;

  /// The workers to ask: worker id -> relay endpoint.
  void set_workers(std::map<std::string, std::string> relays);

 private:
  struct target;
  void run();
  void poll(const std::string& id, const std::string& endpoint,
            std::chrono::milliseconds fresh_for);

  runtime::slot_ptr<kv_router_actor> router_;
  std::shared_ptr<grpc::ChannelCredentials> creds_;
  std::string server_name_;
  std::chrono::milliseconds every_;
  size_t max_per_second_;
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
