// Labels whose values come from outside are capped: the router's per-rank
// series stop at --metrics-worker-series-cap worker ranks, the rest are
// counted as capped and still routed to and shown on the status page.

#include "tests/e2e/router_cluster.hpp"

using namespace outrider::test;
using json = nlohmann::json;

namespace {

// The workers that have a per-rank load series on the router's /metrics.
std::set<std::string> workers_with_series(uint16_t status) {
  std::string text;
  std::set<std::string> out;
  if (http_get(status, "/metrics", &text) != 200)
    return out;
  const std::string prefix = "outrider_router_active_prefill_tokens{worker=\"";
  for (auto at = text.find(prefix); at != std::string::npos;
       at = text.find(prefix, at + 1)) {
    auto start = at + prefix.size();
    out.insert(text.substr(start, text.find('"', start) - start));
  }
  return out;
}

} // namespace

TEST_CASE("metrics: the router's per-rank series stop at "
          "--metrics-worker-series-cap, the rest counted, routed and shown") {
  cluster c{3, {}, {"--metrics-worker-series-cap", "2"}};
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_workers") == 3; }, 15s));
  // Every worker serves (the placement does not care about the cap).
  std::set<std::string> served;
  for (uint32_t i = 0; i < 30 && served.size() < 3; ++i) {
    c.complete(tokens(1000 * (i + 1), 16), 2);
    for (size_t w = 0; w < c.sims.size(); ++w)
      if (c.sims[w]->cache(0)["blocks"].size() > 0)
        served.insert("worker-" + std::to_string(w));
  }
  CHECK(served.size() == 3);
  auto with = workers_with_series(c.router_status);
  INFO("series for " << with.size() << " workers");
  CHECK(with.size() == 2);
  CHECK(c.router_metric(R"(outrider_metrics_capped_total{label="worker"})") ==
        1);
  // The status page shows all three.
  std::string body;
  REQUIRE(http_get(c.router_status, "/debug/status", &body) == 200);
  CHECK(json::parse(body)["workers"].size() == 3);
}
