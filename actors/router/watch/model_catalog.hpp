#pragma once

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cluster/worker_record.hpp"

namespace outrider::router {

/// The models the frontends list and accept: the configured one (else the
/// workers'), and the LoRA adapters those workers serve, as of the worker
/// watcher's last listing of discovery (`update`). Thread-safe; a read
/// takes a lock and copies, never lists discovery itself (at 10,000 worker
/// records a listing is tens of milliseconds, and it was taken once a
/// second on an HTTP thread, every request there waiting behind it:
/// docs/benchmarks.md, 2026-12-06).
class model_catalog {
 public:
  explicit model_catalog(std::string served) : served_(std::move(served)) {
    if (!served_.empty())
      models_ = {served_};
  }

  /// What discovery lists now (every record, as the watcher read them).
  void update(const std::vector<cluster::worker_record>& records);

  /// Base models first (a request without `model` gets the first), then
  /// adapters. Empty until the first `update` without a configured model.
  std::vector<std::string> models();
  /// Whether `name` is an adapter some worker serves.
  bool is_adapter(const std::string& name);

 private:
  const std::string served_;
  std::mutex mtx_;
  std::vector<std::string> models_; // mtx_
  std::set<std::string> adapters_;  // mtx_
};

} // namespace outrider::router
