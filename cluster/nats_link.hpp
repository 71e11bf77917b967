#pragma once

// One NATS connection with outrider's settings: the servers of --nats-url,
// one kind of credentials, reconnects for ever with back-off and jitter,
// and a start that does not wait for a server (the first connect is
// retried in the background like a reconnect). Used by NATS discovery and
// by the NATS event plane.

#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <string>
#include <vector>

#include "runtime/errors.hpp"

struct __natsConnection;
struct __natsOptions;
struct __natsMsg;
struct __natsSubscription;

namespace outrider::cluster {

struct nats_config {
  std::vector<std::string> urls{"nats://127.0.0.1:4222"};
  std::string bucket = "outrider-workers";
  std::chrono::milliseconds ttl{10000};
  /// The event plane's subject prefix: a worker's batches go to
  /// `<prefix>.<worker id>`.
  std::string kv_subject = "outrider.kv";
  /// Where routers share their bookings.
  std::string booking_subject = "outrider.bookings";
  // Credentials (at most one kind is used: creds file, token, user).
  std::string creds_file;
  std::string token;
  std::string user, password;
  /// Told when the connection goes down (false) or comes back (true); on
  /// NATS's own threads.
  std::function<void(bool)> on_connection;
};

/// The servers of a `--nats-url` value: comma-separated, empty entries
/// skipped.
std::vector<std::string> nats_urls(const std::string& comma_separated);

class nats_link {
 public:
  nats_link() = default;
  ~nats_link(); // closes the connection
  nats_link(const nats_link&) = delete;
  nats_link& operator=(const nats_link&) = delete;

  /// Connects; `on_connection(false)` when the connection drops, `(true)`
  /// when it is (re)established. An error: unusable URLs or credentials.
  caf::error connect(const nats_config& cfg,
                     std::function<void(bool)> on_connection);
  __natsConnection* get() const { return nc_; }
  /// Delivers every message on `subject` (wildcards allowed) to `on_msg`,
  /// on NATS's delivery thread, and destroys it after; at most
  /// `pending_messages` wait before NATS drops (0: NATS's default). Flushes
  /// so that the server has the subscription when this returns connected.
  /// Unsubscribed when the link goes.
  caf::error subscribe(const std::string& subject,
                       std::function<void(__natsMsg*)> on_msg,
                       int pending_messages = 0);
  bool connected() const { return connected_.load(); }

 private:
  static void on_down(__natsConnection*, void* self);
  static void on_up(__natsConnection*, void* self);

  __natsOptions* opts_ = nullptr;
  __natsConnection* nc_ = nullptr;
  std::atomic<bool> connected_{false};
  std::function<void(bool)> on_connection_;
  struct subscription {
    __natsSubscription* sub = nullptr;
    std::function<void(__natsMsg*)> on_msg;
  };
  std::list<subscription> subs_; // stable addresses: NATS holds them
};

/// `errc::io_error` with NATS's text for `status`.
caf::error nats_error(const std::string& what, int status);

} // namespace outrider::cluster
