#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cluster/engine/engine_info.hpp"
#include "cluster/worker_record.hpp"
#include "runtime/errors.hpp"

namespace outrider::cluster {

/// Where workers find each other. Implementations are thread-safe.
class discovery {
 public:
  virtual ~discovery() = default;
  /// Prepares the backend before first use; an error means it must not be
  /// used (see file_discovery::open).
  virtual caf::error open() { return {}; }
  /// Publishes (or replaces) a record. Errors: `invalid_argument` (a bad
  /// worker id), `io_error`.
  virtual caf::error put(const worker_record& r) = 0;
  /// Refreshes a record's lease (`io_error`).
  virtual caf::error keep_alive(const std::string& worker_id) = 0;
  /// Withdraws a record; removing a missing record is not an error.
  virtual caf::error remove(const std::string& worker_id) = 0;
  /// Every live record; malformed ones are skipped and counted in `invalid`.
  virtual std::vector<worker_record> list(size_t* invalid = nullptr) = 0;
  /// Blocks until the records may have changed since the last `list()`,
  /// `timeout` passes or `wake()` is called: watchers list again when it
  /// returns.
  virtual void wait_for_change(std::chrono::milliseconds timeout) = 0;
  /// Ends the current (or the next) `wait_for_change` now, from any thread:
  /// the watcher has something else to look at (a restarted router actor,
  /// its own shutdown).
  virtual void wake() = 0;
};

/// The embedded default: one JSON file per worker in a directory, written by
/// atomic rename; the file's mtime is the lease, refreshed by keep_alive;
/// records older than the TTL are stale and removed by whoever lists them.
class file_discovery final : public discovery {
 public:
  file_discovery(std::string dir, std::chrono::milliseconds ttl);
  ~file_discovery() override;
  file_discovery(const file_discovery&) = delete;
  file_discovery& operator=(const file_discovery&) = delete;
  /// Creates the directory (mode 0700) when missing; refuses one that
  /// another user owns or that anyone may write (`permission_denied`): its
  /// records decide where the routers send prompts.
  caf::error open() override;
  /// Written to a temporary file created exclusively (never through a
  /// link), fsync'd, then renamed into place.
  caf::error put(const worker_record& r) override;
  caf::error keep_alive(const std::string& worker_id) override;
  caf::error remove(const std::string& worker_id) override;
  std::vector<worker_record> list(size_t* invalid = nullptr) override;
  /// Blocks until the directory changes (inotify) or `timeout` passes.
  void wait_for_change(std::chrono::milliseconds timeout) override;
  void wake() override;
  const std::string& dir() const { return dir_; }

 private:
  std::string path_of(const std::string& worker_id) const;

  std::string dir_;
  std::chrono::milliseconds ttl_;
  int inotify_fd_ = -1;
  int wake_fd_ = -1; // an eventfd that `wake` writes
  // Each record file as last parsed, by name (the worker id), with what
  // identifies its contents: a record is rewritten by rename (a new inode)
  // and a lease is a touch (a new ctime, the same bytes), so a file whose
  // inode, size and ctime are the same is not read again, and one whose
  // bytes are is not parsed again. A fleet of 10,000 workers is 10,000
  // files listed on every change; reading and parsing each every time made
  // the router's join of N workers O(N^2). A listing that fails to read
  // (no descriptor left, the directory unreadable) is not an empty
  // directory: what the last good listing had stands, for at most a lease,
  // instead of every worker being dropped.
  struct parsed_file {
    uint64_t inode = 0;
    int64_t size = 0;
    int64_t ctime_ns = 0;
    uint64_t listing = 0; // the last listing that saw it
    std::string text;
    worker_record record;
  };
  std::mutex last_mtx_;
  std::map<std::string, parsed_file> parsed_;       // guarded by last_mtx_
  uint64_t listing_ = 0;                            // guarded by last_mtx_
  std::chrono::steady_clock::time_point last_ok_{}; // guarded by last_mtx_
};

/// In-process discovery (role `all`, tests).
class memory_discovery final : public discovery {
 public:
  caf::error put(const worker_record& r) override;
  caf::error keep_alive(const std::string& worker_id) override;
  caf::error remove(const std::string& worker_id) override;
  std::vector<worker_record> list(size_t* invalid = nullptr) override;
  void wait_for_change(std::chrono::milliseconds timeout) override;
  void wake() override;

 private:
  std::mutex mtx_;
  std::condition_variable changed_;
  std::vector<worker_record> records_; // guarded by mtx_
  uint64_t version_ = 0, listed_ = 0;  // guarded by mtx_
  bool woken_ = false;                 // guarded by mtx_
};

} // namespace outrider::cluster
