#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cluster/trace/span.hpp"
#include "runtime/http/client.hpp"
#include "runtime/metrics.hpp"

namespace outrider::trace {

/// Where spans go: OTLP over HTTP, `http://host:port[/path]` (the path
/// defaults to OTLP's `/v1/traces`). TLS is not spoken: run the collector
/// (an agent) beside the process.
using otlp_endpoint = runtime::http_url;
/// Parsed, or nullopt with `*why`.
std::optional<otlp_endpoint> parse_otlp_endpoint(const std::string& url,
                                                 std::string* why);

struct tracer_settings {
  /// `--otlp-endpoint`; none: nothing is recorded, contexts still pass on.
  std::optional<otlp_endpoint> endpoint;
  /// `--trace-sample-ratio`: the share of new traces recorded (a client's
  /// sampled flag decides for its own).
  double sample_ratio = 0.0;
  /// Resource attributes: `service.name` and the rest (worker id, ...).
  std::string service_name = "outrider";
  std::vector<std::pair<std::string, std::string>> resource;
  /// Spans waiting for export at most; beyond, new ones are dropped.
  size_t queue_cap = 8192;
  /// Spans per export request at most, and how long one waits to fill.
  size_t batch = 512;
  std::chrono::milliseconds interval{1000};
  /// One export's deadline (connect to answer).
  std::chrono::milliseconds timeout{2000};
};

/// Records spans and exports them in batches from one thread of its own,
/// never on a request's thread: ending a span is a lock and a push onto a
/// bounded queue. A collector that is down or slow costs dropped spans
/// (counted in `outrider_trace_spans_dropped_total{reason}`), never memory
/// beyond the queue or a request's time.
class tracer : public std::enable_shared_from_this<tracer> {
 public:
  static std::shared_ptr<tracer>
  make(tracer_settings s,
       runtime::metrics_registry& m = runtime::global_metrics());
  ~tracer();
  tracer(const tracer&) = delete;
  tracer& operator=(const tracer&) = delete;

  bool enabled() const { return cfg_.endpoint.has_value(); }

  /// A request's first span here: under `incoming` (a caller's context)
  /// when it is valid, recorded when the caller sampled it; otherwise the
  /// root of a new trace, recorded at the sample ratio.
  span start_entry(std::string name, const std::optional<trace_context>& in,
                   span_kind kind,
                   wall_time at = std::chrono::system_clock::now());
  /// A stage under `parent` (a span's `context()`): recorded when the
  /// parent's trace is sampled.
  span start_child(std::string name, const trace_context& parent,
                   span_kind kind,
                   wall_time at = std::chrono::system_clock::now());
  /// A span of its own trace for an event outside any request (a
  /// sidecar's registration, a KV reset): recorded whenever a collector is
  /// configured (they are rare).
  span start_event(std::string name,
                   wall_time at = std::chrono::system_clock::now());

  /// Exports what is queued (one last request, within the timeout) and
  /// stops the thread. Spans ended later are dropped.
  void stop();

  /// Spans exported and dropped so far (tests, the benchmark).
  uint64_t exported() const { return exported_->value(); }

 private:
  friend class span;
  tracer(tracer_settings s, runtime::metrics_registry& m);
  span recording(std::string name, const trace_context& self,
                 const span_id& parent, span_kind kind, wall_time at);
  void finish(std::unique_ptr<span_record> rec);
  void run();
  void export_batch(std::vector<std::unique_ptr<span_record>>& batch);

  const tracer_settings cfg_;
  runtime::counter* exported_;
  runtime::counter* dropped_full_;
  runtime::counter* dropped_failed_;
  runtime::counter* dropped_shutdown_;
  runtime::counter* export_failures_;
  runtime::gauge* queued_;

  std::mutex mtx_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<span_record>> queue_; // guarded by mtx_
  bool stopping_ = false;                          // guarded by mtx_
  std::thread thread_;
  std::chrono::steady_clock::time_point last_log_{};
};

} // namespace outrider::trace
