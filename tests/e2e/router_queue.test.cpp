// --router-queue-threshold: while every rank has more prompt tokens queued
// than the threshold, requests wait in the router, and leave it in the
// order they came.

#include <fstream>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/e2e/router_cluster.hpp"

using namespace outrider::test;
using json = nlohmann::json;

TEST_CASE("requests waiting for a busy cluster leave the router's queue in "
          "the order they came") {
  // A slow engine; any queued prompt token makes its one rank busy.
  cluster c{1,
            {.num_blocks = 16384, .extra = {"--speedup", "0.25"}},
            {"--router-queue-threshold", "1"}};
  auto depth = [&] { return c.router_metric("outrider_router_queue_depth"); };
  std::mutex mtx;
  std::vector<int> finished;        // in the order they completed
  std::vector<std::string> answers; // their HTTP status codes
  temp_dir bodies;
  auto send = [&](int id, const std::vector<uint32_t>& prompt) {
    // From a file: a long prompt is over the limit of one argument.
    auto file = bodies.str() + "/" + std::to_string(id) + ".json";
    std::ofstream(file) << json{{"prompt", prompt}, {"max_tokens", 1}}.dump();
    return std::thread([&, id, file] {
      child_process curl{
        {"/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H",
         "Content-Type: application/json", "--data-binary", "@" + file,
         "http://127.0.0.1:" + std::to_string(c.http_port) +
           "/v1/completions"}};
      curl.wait(60s);
      std::lock_guard<std::mutex> guard{mtx};
      finished.push_back(id);
      answers.push_back(curl.output());
    });
  };
  std::vector<std::thread> clients;
  // A long prompt keeps the rank busy (about 3 s of prefill).
  clients.push_back(send(0, tokens(1, 30000)));
  auto on_engine = [&] {
    std::string body;
    if (http_get(c.sims[0]->debug, "/debug/load?rank=0", &body) != 200)
      return 0;
    auto doc = json::parse(body);
    return doc["running"].get<int>() + doc["waiting"].get<int>();
  };
  bool started = eventually([&] { return on_engine() == 1; }, 10s);
  // Six more, each sent once the one before it is waiting in line.
  bool lined_up = started;
  for (int i = 1; i <= 6 && lined_up; ++i) {
    clients.push_back(send(i, tokens(3000 * static_cast<uint32_t>(i), 2000)));
    lined_up = eventually([&] { return depth() == i; }, 10s);
  }
  for (auto& t : clients)
    t.join();
  REQUIRE(started);
  REQUIRE(lined_up);
  CHECK(depth() == 0);
  CHECK(answers == std::vector<std::string>(7, "200"));
  // One at a time (each makes the rank busy again), first come first.
  CHECK(finished == std::vector<int>{0, 1, 2, 3, 4, 5, 6});
}
