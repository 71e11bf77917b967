#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace outrider::sidecar {

/// The gauges planners and autoscalers read, under outrider's names and
/// the same for every engine that reports its load (OpenEngine's
/// `Control.GetLoad`, per rank): asked every `interval` from a thread of
/// its own with a deadline of one interval (at most 2 s), never on a
/// request's path.
///
///   outrider_engine_requests{state="running"|"queued",dp_rank}
///   outrider_engine_kv_blocks{state="used"|"total",dp_rank}
///   outrider_engine_tokens{state="running"|"waiting"}
///   outrider_engine_load_age_seconds    (since the last answer; -1: none)
///   outrider_engine_load_reports_total{outcome="ok"|"failed"|"unimplemented"}
///
/// An engine without the service (vLLM's and SGLang's own gRPC) answers
/// UNIMPLEMENTED: asked again only once a minute, the gauges stay absent
/// (their own names come through `--engine-metrics-url`). At most 64 ranks
/// get series (more are summed into the engine's totals only).
class engine_load_gauges {
 public:
  engine_load_gauges(std::string engine_endpoint,
                     std::chrono::milliseconds interval);
  ~engine_load_gauges(); // stops the thread
  engine_load_gauges(const engine_load_gauges&) = delete;
  engine_load_gauges& operator=(const engine_load_gauges&) = delete;

  void stop();

 private:
  struct impl;
  void run();
  std::unique_ptr<impl> impl_;
  std::mutex mtx_;
  std::condition_variable wake_;
  bool stopping_ = false; // guarded by mtx_
  std::thread thread_;
};

} // namespace outrider::sidecar
