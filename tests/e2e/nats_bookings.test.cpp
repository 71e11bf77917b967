// Router replicas in step (--share-bookings): under a burst of requests
// sharing a prefix cached on one worker, routers that do not share their
// books each pile their own share onto that worker (a herd); routers that
// share them spread the burst as one router does.

#include <algorithm>
#include <thread>

#include "tests/e2e/nats_server.hpp"
#include "tests/e2e/router_cluster.hpp"
#include "tests/sse_load.hpp"

using namespace outrider::test;
using json = nlohmann::json;

namespace {

constexpr size_t workers = 4;
constexpr size_t burst = 32;

// Requests placed per worker by the routers on `statuses`, summed.
std::vector<double> placed(const std::vector<uint16_t>& statuses) {
  std::vector<double> out(workers, 0);
  for (size_t w = 0; w < workers; ++w)
    for (auto s : statuses)
      out[w] +=
        metric_value(s, R"(outrider_router_placed_total{worker="worker-)" +
                          std::to_string(w) + R"(",rank="0"})");
  return out;
}

// One burst of `burst` streams sharing a new prefix (cached on worker-0
// only), spread over the routers on `ports`; the requests per worker,
// busiest first. One router sends the first 16 to worker-0 (its booked
// load there then costs as much as computing the 32-block prefix
// elsewhere) and spreads the rest; routers blind to each other's books
// each send it their first 16, so worker-0 takes the whole burst.
std::vector<double> run_burst(cluster& c, uint32_t first_token,
                              const std::vector<uint16_t>& ports,
                              const std::vector<uint16_t>& statuses) {
  auto prefix = tokens(first_token, 128); // 32 blocks of 4
  warm(*c.sims[0], prefix);
  // Every router knows worker-0's cache as it is now.
  REQUIRE(eventually(
    [&] {
      auto truth = c.sims[0]->cache(0);
      std::vector<uint64_t> want;
      for (const auto& b : truth["blocks"])
        want.push_back(b["hash"].get<uint64_t>());
      std::sort(want.begin(), want.end());
      return std::all_of(statuses.begin(), statuses.end(), [&](uint16_t s) {
        std::string body;
        if (http_get(s, "/debug/index", &body) != 200)
          return false;
        auto doc = json::parse(body, nullptr, false);
        auto held = doc["workers"]["worker-0"]["0"];
        return held.is_array() && held.get<std::vector<uint64_t>>() == want;
      });
    },
    10s));
  // Nothing booked from the burst before (its requests were cut).
  REQUIRE(eventually(
    [&] {
      for (auto st : statuses)
        for (size_t w = 0; w < workers; ++w)
          if (metric_value(
                st, R"(outrider_router_active_decode_blocks{worker="worker-)" +
                      std::to_string(w) + R"(",rank="0"})") > 0)
            return false;
      return true;
    },
    20s));
  auto before = placed(statuses);
  // A client pool: one request every 10 ms, to each router in turn. The
  // engines are slow enough that no prompt is computed before the burst
  // is placed: the books alone decide, not the timing of completions.
  // The clients hang up after 5 s; the requests are cancelled. (After 2 s,
  // a request of the burst was once not yet placed under ASan on a busy
  // machine: 31 of 32 counted.)
  std::vector<std::thread> clients;
  std::vector<sse_summary> sums(burst);
  for (size_t i = 0; i < burst; ++i) {
    clients.emplace_back([&, i] {
      sse_load_config cfg;
      cfg.port = ports[i % ports.size()];
      cfg.deadline = 5s;
      cfg.body = [&, i](size_t) {
        auto suffix = tokens(30000 + 10 * static_cast<uint32_t>(i), 8);
        return json{{"prompt", concat(prefix, suffix)},
                    {"max_tokens", 400},
                    {"stream", true}}
          .dump();
      };
      sums[i] = summarize(run_sse_load(cfg));
    });
    std::this_thread::sleep_for(10ms);
  }
  for (auto& t : clients)
    t.join();
  auto after = placed(statuses);
  std::vector<double> spread(workers);
  for (size_t w = 0; w < workers; ++w)
    spread[w] = after[w] - before[w];
  std::sort(spread.rbegin(), spread.rend());
  return spread;
}

std::string show(const std::vector<double>& v) {
  std::string s;
  for (auto x : v)
    s += std::to_string(static_cast<int>(x)) + " ";
  return s;
}

} // namespace

TEST_CASE("routers sharing their bookings spread a burst as one router "
          "does, routers that do not share herd") {
  nats_server nats;
  auto flags = fleet_flags(nats);
  // The plain cost (every weight 1), as measured below: queued load then
  // counts as much as a hit, so one router spreads a burst visibly (the
  // default weights favour the cached prefix more, and leave less room
  // between one router and a herd).
  flags.insert(flags.end(),
               {"--kv-queue-weight", "1", "--kv-decode-weight", "1"});
  auto shared = flags;
  shared.push_back("--share-bookings");
  // Slow engines: a burst's requests are all in flight at once and none is
  // prefilled while the burst is placed.
  sim_process::options slow;
  slow.extra = {"--speedup", "0.2"};
  cluster c{workers, slow, shared, flags};
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_workers") == workers; },
    15s));
  extra_router peer{shared};
  extra_router lone_a{flags}, lone_b{flags};
  for (auto* r : {&peer, &lone_a, &lone_b})
    REQUIRE(eventually(
      [&] {
        return metric_value(r->status, "outrider_router_workers") == workers;
      },
      15s));

  auto one = run_burst(c, 1000, {c.http_port}, {c.router_status});
  auto two_shared = run_burst(c, 5000, {c.http_port, peer.http},
                              {c.router_status, peer.status});
  auto two_alone = run_burst(c, 9000, {lone_a.http, lone_b.http},
                             {lone_a.status, lone_b.status});
  WARN("one router: " << show(one) << "| two sharing: " << show(two_shared)
                      << "| two not sharing: " << show(two_alone));
  // The spread is what the busiest worker (the one caching the prefix)
  // takes (measured: 20-22 of 32 for one router, 18-20 for two sharing, 32
  // for two not sharing); the others split the rest, by ties at random.
  // Two routers see each other's bookings a note later (NATS, a few ms,
  // more under ASan): a request placed before the other's last note came
  // sees that worker's load without it, so two sharing routers differ from
  // one by up to 4 requests (4 once in 9 ASan runs), a herd by 10 or more.
  // Towards the herd (more on the busiest worker) that is the bound; the
  // other way (two sharing routers spreading more than one router) is
  // timing, not a herd: 17 against one router's 22 in a full ASan run
  // (2026-12-06), so that side is given twice the room.
  double tolerance = 0.125 * burst;
  CHECK(two_shared[0] - one[0] <= tolerance);
  CHECK(one[0] - two_shared[0] <= 2 * tolerance);
  CHECK(two_shared[0] + two_shared[1] + two_shared[2] + two_shared[3] == burst);
  // The herd: blind to each other, the two pile onto that worker.
  CHECK(two_alone[0] - one[0] > tolerance);
}
