#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace outrider::router {

/// One request the router carried to its end.
struct finished_request {
  std::string worker_id;
  double ttft_s = 0;
  double itl_s = 0; // mean gap between its tokens (0 with one token)
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;
  uint64_t output_tokens = 0;
};

/// The requests finished over the last minute, for the status page: per
/// worker and over all, requests, hit rate, TTFT and ITL p50/p99.
/// Thread-safe (the dispatcher's callbacks record from gRPC's threads);
/// bounded to `cap` requests.
class recent_window {
 public:
  using clock = std::chrono::steady_clock;
  explicit recent_window(std::chrono::seconds span = std::chrono::seconds{60},
                         size_t cap = 50000);

  void record(finished_request r, clock::time_point at = clock::now());
  /// {"span_s", "all": {...}, "workers": {id: {...}}}, each with requests,
  /// hit_rate, ttft_p50_ms, ttft_p99_ms, itl_p50_ms, itl_p99_ms, output
  /// tokens per second.
  nlohmann::json summary(clock::time_point now = clock::now()) const;

 private:
  struct item {
    clock::time_point at;
    finished_request r;
  };
  void trim(clock::time_point now) const;

  std::chrono::seconds span_;
  size_t cap_;
  mutable std::mutex mtx_;
  mutable std::deque<item> items_;
};

} // namespace outrider::router
