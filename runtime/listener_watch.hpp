#pragma once

// Is a listener still accepting? gRPC 1.51's listener stops for good when
// accept() fails with anything but EAGAIN (EMFILE, say: every descriptor
// taken by idle connections): the port stays bound, the kernel keeps
// completing handshakes into the backlog, and nothing is ever accepted
// again, while every status the process reports still says serving. No
// event says so; a probe from outside the server is the only way to know.
// So each gRPC listener is probed from a fresh connection on a period,
// reported in `/ready` and metrics, and rebuilt when it stays dead.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/metrics.hpp"

namespace outrider::runtime {

/// How a probe speaks TLS: on or off, and the certificate it shows (the
/// process's own, PEM; a server that asks for client certificates logs
/// every handshake without one).
struct probe_tls {
  bool on = false;
  std::string cert, key;
};

/// Connects to `host:port` as an HTTP/2 client would (a TLS handshake
/// first when `tls.on`, the server's certificate not checked), sends the
/// HTTP/2 client preface and an empty SETTINGS frame and waits for the
/// server's first bytes, or its close: either means a process accepted
/// the connection. Empty when it did within `timeout`, else why not
/// (refused, nothing answered: accepted by the kernel, never by the
/// server). Blocks the calling thread for at most `timeout`.
std::string probe_listener(const std::string& host, uint16_t port,
                           const probe_tls& tls,
                           std::chrono::milliseconds timeout);

/// Where this process reaches its own listener bound to `listen_host`:
/// the loopback of the same family for a wildcard, else the host itself
/// (brackets removed).
std::string probe_host(const std::string& listen_host);

/// The process's open descriptors (entries of /proc/self/fd) and its soft
/// limit; -1 where they cannot be read.
struct descriptor_use {
  long open = -1;
  long limit = -1;
};
descriptor_use read_descriptor_use();

/// One thread probing every added listener each `interval`. A listener is
/// down after `failures_to_fail` failed probes in a row (its `on_change`
/// is told, `outrider_listener_accepting{listener}` goes 0) and up again
/// at the first probe answered; after `failures_to_restart` failed probes
/// in a row its `restart` is called (at most once per probe), which
/// rebuilds the server on the same port. The same thread publishes the
/// process's descriptors (`outrider_process_open_fds`,
/// `outrider_process_max_fds`). Constant in threads: one, whatever the
/// number of listeners.
class listener_watch {
 public:
  struct config {
    std::chrono::milliseconds interval{std::chrono::seconds{5}};
    std::chrono::milliseconds timeout{std::chrono::seconds{3}};
    int failures_to_fail = 2;
    int failures_to_restart = 3;
  };

  struct listener {
    std::string name; // metric label and log: "relay", "grpc", "epp"
    std::string host; // where to probe from this process: 127.0.0.1 or ::1
    std::function<uint16_t()> port; // the current port (0: not listening)
    probe_tls tls;
    /// Told on each change of verdict, from the watch's thread.
    std::function<void(bool accepting, const std::string& why)> on_change;
    /// Rebuilds the listener on the same port; false when it cannot yet
    /// (it is asked again at the next failed probe). May be empty.
    std::function<bool()> restart;
  };

  explicit listener_watch(config cfg);
  ~listener_watch();
  listener_watch(const listener_watch&) = delete;
  listener_watch& operator=(const listener_watch&) = delete;

  /// Before `start`.
  void add(listener l);
  void start();
  /// Ends the thread (waits for a probe in progress, at most `timeout`).
  void stop();

 private:
  struct state {
    listener l;
    int failures = 0;
    bool accepting = true;
    // Its series, looked up once (the registry keeps them for its life).
    gauge* accepting_gauge = nullptr;
    counter* probes = nullptr;
    counter* failed = nullptr;
    counter* restarts = nullptr;
  };
  void run();
  void probe(state& s);

  config cfg_;
  std::vector<state> listeners_;
  std::mutex mtx_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace outrider::runtime
