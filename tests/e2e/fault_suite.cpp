#include "tests/e2e/fault_suite.hpp"

#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/engine_core.hpp"
#include "tests/e2e/process.hpp"

namespace outrider::test {

using clock_type = std::chrono::steady_clock;

std::vector<uint32_t> fault_workload::prompt(size_t i) const {
  std::vector<uint32_t> p;
  if (shapes_ > 0) {
    auto first = static_cast<uint32_t>(1 + 64 * (i % shapes_));
    for (uint32_t k = 0; k < 32; ++k)
      p.push_back(first + k);
    return p;
  }
  // Every prompt new: `i` in its first two tokens (ids stay below the
  // simulator's vocabulary of 32,000).
  p.push_back(static_cast<uint32_t>(1 + i % 30000));
  p.push_back(static_cast<uint32_t>(1 + (i / 30000) % 30000));
  for (uint32_t k = 2; k < 32; ++k)
    p.push_back(1000 + k);
  return p;
}

fault_workload::fault_workload(uint16_t http_port, size_t shapes)
  : shapes_(shapes), t0_(clock_type::now()) {
  load_ = std::thread{[this, http_port] {
    sse_load_config cfg;
    cfg.port = http_port;
    cfg.streams = 1'000'000; // until stop()
    cfg.concurrency = concurrency;
    cfg.launch_for = std::chrono::seconds{240}; // a bound if stop() is missed
    cfg.deadline = std::chrono::seconds{300};
    cfg.record_token_ids = true;
    cfg.stop = &stop_;
    cfg.epoch = t0_; // stream times on the faults' clock
    cfg.body = [this](size_t i) {
      return nlohmann::json{
        {"prompt", prompt(i)}, {"max_tokens", max_tokens}, {"stream", true}}
        .dump();
    };
    results_ = run_sse_load(cfg);
  }};
}

fault_workload::~fault_workload() {
  stop_ = true;
  if (load_.joinable())
    load_.join();
}

double fault_workload::since_start() const {
  return std::chrono::duration<double>(clock_type::now() - t0_).count();
}

bool fault_workload::inject(const std::string& setup, const std::string& name,
                            const std::function<void()>& fault,
                            const std::function<bool()>& whole,
                            std::chrono::milliseconds settle) {
  std::this_thread::sleep_for(settle); // steady load first
  fault_row r;
  r.setup = setup;
  r.fault = name;
  r.at_s = since_start();
  fault();
  auto start = clock_type::now(); // after the restart or resume
  bool ok = eventually(whole, std::chrono::seconds{30});
  r.recovery_s =
    std::chrono::duration<double>(clock_type::now() - start).count();
  rows_.push_back(r);
  return ok;
}

std::vector<fault_row> fault_workload::finish() {
  stop_ = true;
  if (load_.joinable())
    load_.join();
  for (size_t i = 0; i < results_.size(); ++i) {
    const auto& s = results_[i];
    // The last fault that could have touched it: the last one injected
    // (less a second) before the stream ended. A stream still open when
    // the next fault came is that fault's, whenever it started.
    fault_row* row = nullptr;
    double ended_s = s.started_s + s.total_s;
    for (auto& r : rows_)
      if (ended_s >= r.at_s - 1)
        row = &r;
    if (!row)
      continue; // over before the first fault
    bool done = s.status == 200 && s.done;
    if (done && !s.error && s.tokens == max_tokens) {
      // Complete only with exactly the engine's deterministic sequence:
      // a token lost, repeated (e.g. by a migration) or changed is wrong.
      if (s.token_ids == sim::continuation(prompt(i), max_tokens))
        ++row->complete;
      else
        ++row->wrong;
    } else if (s.status >= 400 || (done && s.error)) {
      if (row->clear_error++ == 0)
        row->first_error =
          std::to_string(s.status) + " " +
          (s.error_event.empty() ? s.last_line : s.error_event);
    } else if (!s.done)
      ++row->broken; // cut without [DONE]: the client sees it
    else
      ++row->lost;
  }
  return rows_;
}

std::string fault_table(const std::vector<fault_row>& rows) {
  std::ostringstream os;
  os << "| setup | fault | at (s) | recovery (s) | complete | clear errors | "
        "broken connections | lost | wrong tokens |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : rows) {
    char line[512];
    std::snprintf(line, sizeof(line),
                  "| %s | %s | %.1f | %.2f | %zu | %zu | %zu | %zu | %zu |\n",
                  r.setup.c_str(), r.fault.c_str(), r.at_s, r.recovery_s,
                  r.complete, r.clear_error, r.broken, r.lost, r.wrong);
    os << line;
  }
  return os.str();
}

bool router_whole(uint16_t http_port, uint16_t status_port, double workers) {
  if (metric_value(status_port, "outrider_router_workers") < workers)
    return false;
  // A probe, non-streamed, on a connection of its own.
  auto body =
    nlohmann::json{{"prompt", {7, 8, 9, 10}}, {"max_tokens", 2}}.dump();
  sse_load_config cfg;
  cfg.port = http_port;
  cfg.streams = 1;
  cfg.deadline = std::chrono::seconds{10};
  cfg.body = [&](size_t) { return body; };
  auto r = run_sse_load(cfg);
  return !r.empty() && r[0].status == 200;
}

} // namespace outrider::test
