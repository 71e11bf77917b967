#pragma once

// Discovery for fleets: worker records in a NATS JetStream key-value bucket
// (`--discovery nats`). Keys are worker ids, values the record as JSON; a
// keep-alive puts the record again. NATS server 2.9 sends watchers nothing
// when a key expires, so leases are kept by the watchers themselves: every
// put seen refreshes the record's lease on the reader's own clock, a record
// not refreshed within the TTL is dropped from `list` and its key deleted.
// While the connection is down the last known set is kept (and leases are
// not counted); after a reconnect every record gets a fresh TTL to refresh.
// Only a reader watches: the watcher starts with the first list() or
// wait_for_change(), so a sidecar (which only writes) has none.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/discovery.hpp"
#include "cluster/nats_link.hpp"

namespace outrider::cluster {

class nats_discovery final : public discovery {
 public:
  explicit nats_discovery(nats_config cfg);
  ~nats_discovery() override;
  nats_discovery(const nats_discovery&) = delete;
  nats_discovery& operator=(const nats_discovery&) = delete;

  /// Connects (retrying in the background when no server answers yet) and
  /// creates or binds the bucket. An error: the credentials or URLs are
  /// unusable.
  caf::error open() override;
  caf::error put(const worker_record& r) override;
  caf::error keep_alive(const std::string& worker_id) override;
  caf::error remove(const std::string& worker_id) override;
  std::vector<worker_record> list(size_t* invalid = nullptr) override;

  /// Blocks until a record changed since the last list(), `timeout`
  /// passes or `wake()` is called.
  void wait_for_change(std::chrono::milliseconds timeout) override;
  void wake() override;
  bool connected() const { return connected_.load(); }

  struct impl; // NATS.c handles

 private:
  void watch();
  void start_watching();
  caf::error ensure_bucket();
  void seen(const std::string& key, const std::string* value);

  nats_config cfg_;
  std::unique_ptr<impl> impl_;
  std::atomic<bool> connected_{false};
  std::atomic<bool> stopping_{false};
  struct known_record {
    worker_record record;
    std::chrono::steady_clock::time_point lease; // last put seen
  };
  mutable std::mutex mtx_;
  std::condition_variable changed_;
  std::map<std::string, known_record> known_;
  std::map<std::string, worker_record> mine_; // what keep_alive puts again
  size_t invalid_ = 0;
  // Changes seen by the watcher, and how many the last list() had read:
  // a change between list() and wait_for_change() is not lost.
  uint64_t changes_ = 0;
  uint64_t listed_ = 0;
  bool woken_ = false; // guarded by mtx_
  std::once_flag watch_once_;
  std::thread watcher_;
};

} // namespace outrider::cluster
