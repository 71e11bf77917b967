#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cluster/discovery.hpp"

namespace outrider::router {

/// The models the frontends list and accept: the configured one (else the
/// workers'), and the LoRA adapters those workers serve, read from
/// discovery at most once a second. Thread-safe.
class model_catalog {
 public:
  model_catalog(std::shared_ptr<cluster::discovery> disc, std::string served)
    : disc_(std::move(disc)), served_(std::move(served)) {}

  /// Base models first (a request without `model` gets the first), then
  /// adapters.
  std::vector<std::string> models();
  /// Whether `name` is an adapter some worker serves.
  bool is_adapter(const std::string& name);

 private:
  void refresh(); // with mtx_ held

  std::shared_ptr<cluster::discovery> disc_;
  std::string served_;
  std::mutex mtx_;
  std::vector<std::string> models_;
  std::set<std::string> adapters_;
  std::chrono::steady_clock::time_point at_{};
};

} // namespace outrider::router
