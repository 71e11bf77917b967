#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace outrider::runtime {

using label_set = std::vector<std::pair<std::string, std::string>>;

/// A monotonically increasing count. Thread-safe, lock-free updates.
class counter {
 public:
  void inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

/// A value that goes up and down. Thread-safe, lock-free updates.
class gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double d);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

/// A distribution over fixed upper bounds. Thread-safe, lock-free updates.
class histogram {
 public:
  explicit histogram(std::vector<double> bounds);
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  /// Non-cumulative count of bucket `i` (the last bucket is +Inf).
  uint64_t bucket(size_t i) const { return counts_[i].load(); }
  uint64_t count() const { return count_.load(); }
  double sum() const { return sum_.load(); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

/// Holds metric families and renders the Prometheus text format. Creating or
/// looking up a metric takes a lock; callers keep the returned reference
/// (stable for the registry's lifetime) and update it without one.
class metrics_registry {
 public:
  counter& get_counter(const std::string& name, const std::string& help,
                       const label_set& labels = {});
  gauge& get_gauge(const std::string& name, const std::string& help,
                   const label_set& labels = {});
  histogram& get_histogram(const std::string& name, const std::string& help,
                           const std::vector<double>& bounds,
                           const label_set& labels = {});

  /// The exposition in Prometheus text format 0.0.4.
  std::string render() const;

  /// Text appended to every rendering, as `source` returns it at that
  /// moment (an engine's metrics re-exported, already in the format;
  /// names must not collide with the registry's). Kept for the
  /// registry's life; a source must be quick, never block and never touch
  /// the registry (it runs under the registry's lock).
  void add_exposition(std::function<std::string()> source);

  /// Latency buckets in seconds, 100 µs to 10 s.
  static std::vector<double> latency_bounds();

 private:
  enum class kind { counter, gauge, histogram };
  struct family {
    kind type;
    std::string help;
    std::map<std::string, std::unique_ptr<counter>> counters;
    std::map<std::string, std::unique_ptr<gauge>> gauges;
    std::map<std::string, std::unique_ptr<histogram>> histograms;
  };
  family& get_family(const std::string& name, const std::string& help,
                     kind type);

  mutable std::mutex mtx_;
  std::map<std::string, family> families_;            // guarded by mtx_
  std::vector<std::function<std::string()>> sources_; // guarded by mtx_
};

/// The process-wide registry served on `/metrics`.
metrics_registry& global_metrics();

} // namespace outrider::runtime
