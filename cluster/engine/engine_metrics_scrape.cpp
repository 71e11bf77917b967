// The engine's metrics endpoint, scraped off the status server's thread.
#include <spdlog/spdlog.h>

#include "cluster/engine/engine_metrics.hpp"
#include "runtime/http/client.hpp"
#include "runtime/metrics.hpp"

namespace outrider::engine {

std::unique_ptr<metrics_scraper>
metrics_scraper::make(const std::string& url,
                      std::vector<std::pair<std::string, std::string>> labels,
                      std::chrono::milliseconds interval, std::string* why) {
  auto at = runtime::parse_http_url(url, "/metrics", why);
  if (!at)
    return nullptr;
  std::unique_ptr<metrics_scraper> s{new metrics_scraper};
  s->host_ = at->host;
  s->port_ = at->port;
  s->target_ = at->target;
  s->labels_ = std::move(labels);
  s->cache_->interval = interval;
  auto* raw = s.get();
  // The registry renders what the last good scrape left, never waiting.
  runtime::global_metrics().add_exposition(
    [weak = std::weak_ptr<cache>(s->cache_)] {
      auto c = weak.lock();
      return c ? c->current() : std::string{};
    });
  s->thread_ = std::thread([raw] { raw->run(); });
  return s;
}

metrics_scraper::~metrics_scraper() {
  stop();
}

void metrics_scraper::stop() {
  {
    std::lock_guard<std::mutex> guard{cache_->mtx};
    cache_->stopping = true;
    cache_->text.clear();
  }
  cache_->wake.notify_all();
  if (thread_.joinable())
    thread_.join();
}

std::string metrics_scraper::cache::current() {
  std::lock_guard<std::mutex> guard{mtx};
  if (stopping || std::chrono::steady_clock::now() - taken > 3 * interval)
    return {};
  return text;
}

void metrics_scraper::run() {
  auto& m = runtime::global_metrics();
  const std::string scrapes_help =
    "Scrapes of the engine's metrics endpoint (--engine-metrics-url)";
  auto& ok = m.get_counter("outrider_engine_metrics_scrapes_total",
                           scrapes_help, {{"outcome", "ok"}});
  auto& failed = m.get_counter("outrider_engine_metrics_scrapes_total",
                               scrapes_help, {{"outcome", "failed"}});
  const std::string dropped_help =
    "Engine samples not re-exported: not the text format, or over a cap";
  auto& malformed = m.get_counter("outrider_engine_metrics_dropped_total",
                                  dropped_help, {{"reason", "malformed"}});
  auto& over = m.get_counter("outrider_engine_metrics_dropped_total",
                             dropped_help, {{"reason", "over_limit"}});
  auto& series = m.get_gauge("outrider_engine_metrics_series",
                             "Engine samples re-exported from the last scrape");
  reexport_limits lim;
  auto& c = *cache_;
  auto last_log = std::chrono::steady_clock::time_point{};
  std::unique_lock<std::mutex> guard{c.mtx};
  while (!c.stopping) {
    guard.unlock();
    auto got = runtime::http_get(
      host_, port_, target_,
      std::min(c.interval, std::chrono::milliseconds{5000}), lim.max_bytes);
    bool good = got.error.empty() && got.status == 200;
    reexport_result r;
    if (good)
      r = reexport(got.body, labels_, lim);
    (good ? ok : failed).inc();
    malformed.inc(r.malformed);
    over.inc(r.over_limit);
    if (good)
      series.set(static_cast<double>(r.kept));
    auto now = std::chrono::steady_clock::now();
    if (!good && now - last_log > std::chrono::minutes{1}) {
      last_log = now;
      spdlog::warn(
        "sidecar: engine metrics at {}:{}{}: {}", host_, port_, target_,
        got.error.empty() ? "HTTP " + std::to_string(got.status) : got.error);
    }
    guard.lock();
    if (good) {
      c.text = std::move(r.text);
      c.taken = now;
    }
    c.wake.wait_for(guard, c.interval, [&c] { return c.stopping; });
  }
}

} // namespace outrider::engine
