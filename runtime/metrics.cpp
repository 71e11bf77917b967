#include "runtime/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace outrider::runtime {

namespace {

void atomic_add(std::atomic<double>& x, double d) {
  double cur = x.load(std::memory_order_relaxed);
  while (!x.compare_exchange_weak(cur, cur + d, std::memory_order_relaxed)) {
  }
}

bool valid_name(const std::string& n) {
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0])))
    return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
  });
}

std::string escape(const std::string& s, bool quote) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && quote)
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

// Canonical label text, e.g. `a="1",b="x"`; also the key within a family.
std::string label_text(const label_set& labels) {
  std::string out;
  for (const auto& [k, v] : labels) {
    if (!valid_name(k) || k.rfind("__", 0) == 0)
      throw std::invalid_argument("bad metric label name: " + k);
    out += (out.empty() ? "" : ",") + k + "=\"" + escape(v, true) + "\"";
  }
  return out;
}

std::string number(double v) {
  if (std::isinf(v))
    return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v))
    return "NaN";
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

std::string with_labels(const std::string& name, const std::string& labels,
                        const std::string& extra = {}) {
  std::string all = labels;
  if (!extra.empty())
    all += (all.empty() ? "" : ",") + extra;
  return all.empty() ? name : name + "{" + all + "}";
}

} // namespace

void gauge::add(double d) {
  atomic_add(value_, d);
}

histogram::histogram(std::vector<double> bounds)
  : bounds_(std::move(bounds)),
    counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  std::sort(bounds_.begin(), bounds_.end());
  for (size_t i = 0; i <= bounds_.size(); ++i)
    counts_[i].store(0);
}

void histogram::observe(double v) {
  auto i =
    std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  atomic_add(sum_, v);
}

metrics_registry::family& metrics_registry::get_family(const std::string& name,
                                                       const std::string& help,
                                                       kind type) {
  if (!valid_name(name))
    throw std::invalid_argument("bad metric name: " + name);
  auto [it, added] = families_.try_emplace(name);
  if (added) {
    it->second.type = type;
    it->second.help = help;
  } else if (it->second.type != type) {
    throw std::invalid_argument("metric registered with another type: " + name);
  }
  return it->second;
}

counter& metrics_registry::get_counter(const std::string& name,
                                       const std::string& help,
                                       const label_set& labels) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& slot =
    get_family(name, help, kind::counter).counters[label_text(labels)];
  if (!slot)
    slot = std::make_unique<counter>();
  return *slot;
}

gauge& metrics_registry::get_gauge(const std::string& name,
                                   const std::string& help,
                                   const label_set& labels) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& slot = get_family(name, help, kind::gauge).gauges[label_text(labels)];
  if (!slot)
    slot = std::make_unique<gauge>();
  return *slot;
}

histogram& metrics_registry::get_histogram(const std::string& name,
                                           const std::string& help,
                                           const std::vector<double>& bounds,
                                           const label_set& labels) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& fam = get_family(name, help, kind::histogram);
  auto& slot = fam.histograms[label_text(labels)];
  if (!slot)
    slot = std::make_unique<histogram>(bounds);
  return *slot;
}

std::string metrics_registry::render() const {
  std::lock_guard<std::mutex> guard{mtx_};
  std::ostringstream os;
  for (const auto& [name, fam] : families_) {
    os << "# HELP " << name << ' ' << escape(fam.help, false) << '\n';
    switch (fam.type) {
    case kind::counter:
      os << "# TYPE " << name << " counter\n";
      for (const auto& [labels, c] : fam.counters)
        os << with_labels(name, labels) << ' ' << c->value() << '\n';
      break;
    case kind::gauge:
      os << "# TYPE " << name << " gauge\n";
      for (const auto& [labels, g] : fam.gauges)
        os << with_labels(name, labels) << ' ' << number(g->value()) << '\n';
      break;
    case kind::histogram:
      os << "# TYPE " << name << " histogram\n";
      for (const auto& [labels, h] : fam.histograms) {
        uint64_t cumulative = 0;
        for (size_t i = 0; i <= h->bounds().size(); ++i) {
          cumulative += h->bucket(i);
          auto le = i < h->bounds().size() ? number(h->bounds()[i]) : "+Inf";
          os << with_labels(name + "_bucket", labels, "le=\"" + le + "\"")
             << ' ' << cumulative << '\n';
        }
        os << with_labels(name + "_sum", labels) << ' ' << number(h->sum())
           << '\n';
        // The bucket total, not count(): keeps +Inf == _count even while
        // other threads observe during rendering.
        os << with_labels(name + "_count", labels) << ' ' << cumulative << '\n';
      }
      break;
    }
  }
  for (const auto& source : sources_)
    os << source();
  return os.str();
}

void metrics_registry::add_exposition(std::function<std::string()> source) {
  std::lock_guard<std::mutex> guard{mtx_};
  sources_.push_back(std::move(source));
}

std::vector<double> metrics_registry::latency_bounds() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
}

metrics_registry& global_metrics() {
  static metrics_registry registry;
  return registry;
}

} // namespace outrider::runtime
