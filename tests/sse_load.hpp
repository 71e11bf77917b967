#pragma once

// An asynchronous load generator for the router's HTTP/SSE frontend: many
// streamed completions on one Asio I/O thread, so the generator is never a
// thread-per-stream bottleneck of its own. Used by the e2e tests and by
// bench/router_bench.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace outrider::test {

struct sse_stream_result {
  int status = 0;                  // the HTTP status (0: no answer)
  size_t events = 0;               // `data:` events before [DONE]
  size_t tokens = 0;               // completion_tokens of the final usage
  bool done = false;               // `data: [DONE]` arrived
  bool error = false;              // an error event, or a broken connection
  double started_s = 0;            // when it was launched, since the epoch
  double ttft_s = -1;              // first event after the request was sent
  double total_s = 0;              // until the connection closed
  std::vector<double> gaps_s;      // between events (when asked for)
  std::vector<uint32_t> token_ids; // every event's, in order (when asked)
  std::string last_line;           // the last line read
  std::string error_event;         // the first error event, if any
  std::string broken;              // why the connection failed, if it did
};

struct sse_load_config {
  uint16_t port = 0;
  size_t streams = 1;
  /// Streams open at once (0: all of them).
  size_t concurrency = 0;
  /// The JSON body of stream `i` (it should ask for `"stream": true`).
  std::function<std::string(size_t)> body;
  /// Everything still open then is closed and counted as an error.
  std::chrono::milliseconds deadline = std::chrono::seconds{60};
  bool record_gaps = false;
  /// Keeps the `token_ids` of every event (a check of the token sequence).
  bool record_token_ids = false;
  /// When set and true, no more streams start; those open finish.
  const std::atomic<bool>* stop = nullptr;
  /// No stream starts after this long (0: no limit); those open finish.
  /// With `streams` as an upper bound and `concurrency` set, a steady load.
  std::chrono::milliseconds launch_for{0};
  /// What `started_s` counts from (default: when the run begins): a caller
  /// that times events of its own (faults) passes its clock's origin, so
  /// that the two agree however long the run takes to begin.
  std::optional<std::chrono::steady_clock::time_point> epoch;
};

/// Runs the streams and returns one result per stream, in order.
std::vector<sse_stream_result> run_sse_load(const sse_load_config& cfg);

/// Counts of a run: streams done without error, and events seen.
struct sse_summary {
  size_t complete = 0;
  size_t failed = 0;
  size_t events = 0;
};
sse_summary summarize(const std::vector<sse_stream_result>& results);

} // namespace outrider::test
