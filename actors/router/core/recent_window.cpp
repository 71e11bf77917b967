#include "actors/router/core/recent_window.hpp"

#include <algorithm>
#include <map>
#include <vector>

namespace outrider::router {

namespace {

struct tally {
  std::vector<double> ttft, itl;
  uint64_t prompt = 0, cached = 0, output = 0;

  void add(const finished_request& r) {
    ttft.push_back(r.ttft_s);
    if (r.output_tokens > 1)
      itl.push_back(r.itl_s);
    prompt += r.prompt_tokens;
    cached += r.cached_tokens;
    output += r.output_tokens;
  }
};

double pct_ms(std::vector<double>& v, double p) {
  if (v.empty())
    return 0;
  auto k = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return 1000 * v[k];
}

nlohmann::json render(tally& t, double span_s) {
  return {{"requests", t.ttft.size()},
          {"hit_rate", t.prompt ? static_cast<double>(t.cached) /
                                    static_cast<double>(t.prompt)
                                : 0.0},
          {"ttft_p50_ms", pct_ms(t.ttft, 0.5)},
          {"ttft_p99_ms", pct_ms(t.ttft, 0.99)},
          {"itl_p50_ms", pct_ms(t.itl, 0.5)},
          {"itl_p99_ms", pct_ms(t.itl, 0.99)},
          {"output_tokens_per_s", static_cast<double>(t.output) / span_s}};
}

} // namespace

recent_window::recent_window(std::chrono::seconds span, size_t cap)
  : span_(span), cap_(cap) {}

void recent_window::trim(clock::time_point now) const {
  while (!items_.empty() && now - items_.front().at > span_)
    items_.pop_front();
}

void recent_window::record(finished_request r, clock::time_point at) {
  std::lock_guard<std::mutex> guard{mtx_};
  items_.push_back({at, std::move(r)});
  while (items_.size() > cap_)
    items_.pop_front();
  trim(at);
}

nlohmann::json recent_window::summary(clock::time_point now) const {
  tally all;
  std::map<std::string, tally> per;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    trim(now);
    for (const auto& i : items_) {
      all.add(i.r);
      per[i.r.worker_id].add(i.r);
    }
  }
  double span_s = static_cast<double>(span_.count());
  nlohmann::json out{{"span_s", span_.count()}, {"all", render(all, span_s)}};
  auto& workers = out["workers"] = nlohmann::json::object();
  for (auto& [id, t] : per)
    workers[id] = render(t, span_s);
  return out;
}

} // namespace outrider::router
