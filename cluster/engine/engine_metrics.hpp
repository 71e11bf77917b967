#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace outrider::engine {

/// Bounds on an engine's exposition re-exported by its sidecar.
struct reexport_limits {
  size_t max_bytes = 4 << 20;   ///< read at most this much of the scrape
  size_t max_series = 5000;     ///< samples kept, the rest dropped
  size_t max_families = 500;    ///< metric families kept
  size_t max_label_bytes = 256; ///< a label value longer is cut
  size_t max_labels = 16;       ///< labels per sample, the engine's own
};

/// What became of a scrape.
struct reexport_result {
  std::string text;      ///< Prometheus text format 0.0.4, ready to append
  size_t kept = 0;       ///< samples re-exported
  size_t malformed = 0;  ///< lines that are not the text format
  size_t over_limit = 0; ///< samples or families dropped by a cap
};

/// An engine's Prometheus text exposition (vLLM's, SGLang's `/metrics`),
/// made safe to append to the sidecar's own: every sample gets `labels`
/// (the worker's) in front of its own (an engine label of the same name is
/// dropped), HELP and TYPE lines are re-emitted once per family before its
/// first sample, and whatever is not the text format is dropped and
/// counted: a malformed name, label or value, a sample whose family was
/// typed differently, a name outrider uses itself (`outrider_`), a family
/// seen again after another one (the format wants them together),
/// timestamps (a re-export is as of now). Bounded by `lim`. Hand-written:
/// no library in Debian parses the text format in C++.
reexport_result
reexport(std::string_view exposition,
         const std::vector<std::pair<std::string, std::string>>& labels,
         const reexport_limits& lim = {});

/// Scrapes an engine's metrics endpoint (`http://host:port/path`) every
/// `interval` from a thread of its own and keeps the re-exported text for
/// the registry's rendering (`metrics_registry::add_exposition`): the
/// sidecar's `/metrics` then carries the engine's series with the worker's
/// labels, stays valid whatever the engine sends, and never waits on the
/// engine (a scrape that fails or is older than three intervals is not
/// re-exported). Counted in `outrider_engine_metrics_scrapes_total{outcome}`,
/// `outrider_engine_metrics_dropped_total{reason}` and
/// `outrider_engine_metrics_series`.
class metrics_scraper {
 public:
  /// nullopt with `*why` when `url` is not `http://host:port[/path]`.
  static std::unique_ptr<metrics_scraper>
  make(const std::string& url,
       std::vector<std::pair<std::string, std::string>> labels,
       std::chrono::milliseconds interval, std::string* why);
  ~metrics_scraper();
  metrics_scraper(const metrics_scraper&) = delete;
  metrics_scraper& operator=(const metrics_scraper&) = delete;
  void stop();

 private:
  // What the registry reads (it holds this weakly, for its whole life).
  struct cache {
    std::mutex mtx;
    std::condition_variable wake;
    bool stopping = false;                         // guarded by mtx
    std::string text;                              // guarded by mtx
    std::chrono::steady_clock::time_point taken{}; // guarded by mtx
    std::chrono::milliseconds interval{5000};
    std::string current();
  };

  metrics_scraper() = default;
  void run();

  std::string host_, target_;
  uint16_t port_ = 0;
  std::vector<std::pair<std::string, std::string>> labels_;
  std::shared_ptr<cache> cache_ = std::make_shared<cache>();
  std::thread thread_;
};

} // namespace outrider::engine
