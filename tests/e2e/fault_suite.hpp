#pragma once

// The fault suite's workload and book-keeping (tests/e2e/faults.test.cpp):
// a steady load of streamed completions through a router, faults injected
// one after the other, and every stream accounted for in the row of the
// last fault injected before it ended.

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/sse_load.hpp"

namespace outrider::test {

struct fault_row {
  std::string setup; // e.g. "separate processes, relay"
  std::string fault;
  double at_s = 0;       // since the workload began
  double recovery_s = 0; // after the restart or resume, until the worker
                         // set is whole and a probe completion passes
  size_t complete = 0;   // every token, equal to the engine's sequence
  size_t clear_error = 0, broken = 0;
  size_t lost = 0;         // claimed success without all its tokens
  size_t wrong = 0;        // tokens missing, repeated or different
  std::string first_error; // what the first clear error said
};

/// 8 streams at all times until stop(): prompts of 32 tokens from
/// `shapes` shapes (0: every prompt new), 24 output tokens each, token ids
/// recorded.
class fault_workload {
 public:
  static constexpr uint32_t max_tokens = 24;
  static constexpr size_t concurrency = 8;

  explicit fault_workload(uint16_t http_port, size_t shapes = 300);
  ~fault_workload();

  double since_start() const;
  /// Injects one fault after `settle` of steady load: `fault()` returns
  /// once it is over (restarted, resumed); then `whole()` is polled until
  /// it holds (at most 30 s) and the recovery time recorded.
  bool inject(const std::string& setup, const std::string& name,
              const std::function<void()>& fault,
              const std::function<bool()>& whole,
              std::chrono::milliseconds settle = std::chrono::seconds{5});
  /// Stops launching, waits for the open streams and sorts each stream
  /// into the row of the last fault injected (less a second) before it
  /// ended.
  std::vector<fault_row> finish();

  /// The prompt of stream `i` (shared by the body and the check).
  std::vector<uint32_t> prompt(size_t i) const;

 private:
  size_t shapes_;
  std::atomic<bool> stop_{false};
  std::vector<sse_stream_result> results_;
  std::vector<fault_row> rows_;
  std::chrono::steady_clock::time_point t0_;
  std::thread load_;
};

/// The markdown table of rows (all setups so far).
std::string fault_table(const std::vector<fault_row>& rows);

/// A probe completion through the router answers 200 and the router knows
/// `workers` workers.
bool router_whole(uint16_t http_port, uint16_t status_port, double workers);

} // namespace outrider::test
