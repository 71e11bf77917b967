#include "sim/engine_runner.hpp"

#include <catch2/catch.hpp>

using namespace outrider::sim;
using namespace std::chrono_literals;

namespace {

engine_request request(std::string id, size_t prompt, uint32_t max_tokens) {
  engine_request r;
  r.id = std::move(id);
  for (size_t i = 0; i < prompt; ++i)
    r.prompt.push_back(static_cast<uint32_t>(1 + i % 30000));
  r.max_tokens = max_tokens;
  return r;
}

// Waits for a stream to finish (bounded); returns the tokens.
std::vector<uint32_t> drain(request_stream& s) {
  std::vector<uint32_t> out;
  for (int i = 0; i < 10000 && !s.finished(); ++i)
    for (auto& o : s.wait(100ms))
      if (o.has_token)
        out.push_back(o.token);
  for (auto& o : s.wait(0ms))
    if (o.has_token)
      out.push_back(o.token);
  return out;
}

} // namespace

TEST_CASE("the runner's wall time is within 5% of the timing model",
          "[timing]") {
  engine_config cfg; // the reference defaults
  // What the model says, from the same core stepped without a clock.
  engine_core model{cfg};
  REQUIRE(model.submit(request("r", 8000, 100)));
  double model_ms = 0;
  for (int i = 0; i < 1000 && !model.idle(); ++i)
    model_ms += model.step().duration_ms;
  REQUIRE(model.idle());
  REQUIRE(model_ms > 500);

  engine_runner runner{cfg, runner_options{}, nullptr};
  auto t0 = std::chrono::steady_clock::now();
  std::string why;
  auto stream = runner.submit(request("r", 8000, 100), &why);
  REQUIRE(stream);
  auto tokens = drain(*stream);
  auto wall_ms = std::chrono::duration<double, std::milli>(
                   std::chrono::steady_clock::now() - t0)
                   .count();
  CHECK(tokens.size() == 100);
  INFO("model " << model_ms << " ms, wall " << wall_ms << " ms");
  CHECK(wall_ms >= model_ms * 0.95);
  CHECK(wall_ms <= model_ms * 1.05);
}

TEST_CASE("the speed-up divides the modelled time") {
  engine_config cfg;
  runner_options fast;
  fast.speedup = 10;
  engine_runner runner{cfg, fast, nullptr};
  auto t0 = std::chrono::steady_clock::now();
  std::string why;
  auto stream = runner.submit(request("r", 8000, 100), &why);
  REQUIRE(stream);
  CHECK(drain(*stream).size() == 100);
  auto wall_ms = std::chrono::duration<double, std::milli>(
                   std::chrono::steady_clock::now() - t0)
                   .count();
  CHECK(wall_ms < 200); // the model says ~770 ms at speed 1
}

TEST_CASE("a paused runner holds requests until resumed") {
  engine_config cfg;
  runner_options o;
  o.no_sleep = true;
  engine_runner runner{cfg, o, nullptr};
  runner.set_paused(true);
  std::string why;
  auto stream = runner.submit(request("r", 10, 3), &why);
  REQUIRE(stream);
  CHECK(stream->wait(100ms).empty());
  runner.set_paused(false);
  CHECK(drain(*stream).size() == 3);
}
