#include "runtime/metrics.hpp"

#include <thread>

#include <catch2/catch.hpp>

using namespace outrider::runtime;
using Catch::Matchers::Contains;

TEST_CASE("counters, gauges and histograms render in the text format") {
  metrics_registry reg;
  reg.get_counter("x_total", "Things", {{"kind", "a\"b"}}).inc(3);
  reg.get_gauge("y", "Level").set(2.5);
  auto& h = reg.get_histogram("z_seconds", "Time", {0.1, 1});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5);
  auto text = reg.render();
  CHECK_THAT(text, Contains("# TYPE x_total counter\n"));
  CHECK_THAT(text, Contains("x_total{kind=\"a\\\"b\"} 3\n"));
  CHECK_THAT(text, Contains("y 2.5\n"));
  CHECK_THAT(text,
             Contains("z_seconds_bucket{le=\"0.10000000000000001\"} 1\n"));
  CHECK_THAT(text, Contains("z_seconds_bucket{le=\"1\"} 2\n"));
  CHECK_THAT(text, Contains("z_seconds_bucket{le=\"+Inf\"} 3\n"));
  CHECK_THAT(text, Contains("z_seconds_count 3\n"));
  CHECK_THAT(text, Contains("z_seconds_sum 5.5499999999999998\n"));
}

TEST_CASE("the same name and labels give the same metric") {
  metrics_registry reg;
  auto& a = reg.get_counter("c_total", "C", {{"k", "1"}});
  auto& b = reg.get_counter("c_total", "C", {{"k", "1"}});
  auto& c = reg.get_counter("c_total", "C", {{"k", "2"}});
  CHECK(&a == &b);
  CHECK(&a != &c);
  CHECK_THROWS(reg.get_gauge("c_total", "C"));
  CHECK_THROWS(reg.get_counter("bad name", "C"));
}

TEST_CASE("updates from many threads are not lost") {
  metrics_registry reg;
  auto& c = reg.get_counter("n_total", "N");
  auto& g = reg.get_gauge("g", "G");
  auto& h = reg.get_histogram("h", "H", {1});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.inc();
        g.add(1);
        h.observe(0.5);
      }
    });
  for (auto& t : threads)
    t.join();
  CHECK(c.value() == 40000);
  CHECK(g.value() == 40000);
  CHECK(h.count() == 40000);
  CHECK(h.sum() == 20000);
}
