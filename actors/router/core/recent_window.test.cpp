#include "actors/router/core/recent_window.hpp"

#include <catch2/catch.hpp>

using namespace outrider::router;
using namespace std::chrono_literals;

TEST_CASE("recent window: per-worker hit rate and percentiles over the span") {
  recent_window w{60s, 1000};
  auto t0 = recent_window::clock::now();
  for (int i = 0; i < 100; ++i)
    w.record({"a", 0.001 * (i + 1), 0.002, 100, 50, 10}, t0);
  w.record({"b", 1.0, 0.0, 200, 0, 1}, t0);
  auto s = w.summary(t0 + 1s);
  CHECK(s["all"]["requests"] == 101);
  CHECK(s["workers"]["a"]["hit_rate"].get<double>() == Approx(0.5));
  CHECK(s["workers"]["a"]["ttft_p50_ms"].get<double>() == Approx(50));
  CHECK(s["workers"]["a"]["ttft_p99_ms"].get<double>() == Approx(99));
  CHECK(s["workers"]["a"]["itl_p50_ms"].get<double>() == Approx(2));
  // One-token requests have no gaps.
  CHECK(s["workers"]["b"]["itl_p50_ms"].get<double>() == 0);
  CHECK(s["all"]["hit_rate"].get<double>() ==
        Approx(5000.0 / (100 * 100 + 200)));
  // Past the span everything is gone.
  auto later = w.summary(t0 + 61s);
  CHECK(later["all"]["requests"] == 0);
  CHECK(later["workers"].empty());
}

TEST_CASE("recent window: bounded by its cap") {
  recent_window w{60s, 10};
  auto t0 = recent_window::clock::now();
  for (int i = 0; i < 50; ++i)
    w.record({"a", 0.1, 0.0, 1, 1, 1}, t0);
  CHECK(w.summary(t0)["all"]["requests"] == 10);
}
