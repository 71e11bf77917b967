// The router's status page in a real headless browser (Debian's chromium):
// while a workload runs, the page's JavaScript fetches /debug/status and
// fills in the workers and the figures of the last minute. The DOM the
// browser built is checked; a screenshot is kept as a test artefact
// (build/test-artifacts/status_page.png).
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <regex>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/e2e/process.hpp"
#include "tests/e2e/router_cluster.hpp"
#include "tests/e2e/sidecar_process.hpp"

using namespace outrider::test;
using namespace std::chrono_literals;

namespace {

std::string chromium() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (std::filesystem::exists(p))
      return p;
  return {};
}

// The number inside the element with `id` in the DOM chromium dumped.
double figure(const std::string& dom, const std::string& id) {
  std::smatch m;
  std::regex re{"id=\"" + id + "\">([0-9.]+)"};
  return std::regex_search(dom, m, re) ? std::stod(m[1]) : -1;
}

// Runs the page for a few seconds of virtual time (its fetches complete
// meanwhile), then dumps the DOM or takes a screenshot.
std::string browse(const std::string& url, const temp_dir& profile,
                   const std::vector<std::string>& what) {
  std::vector<std::string> argv{chromium(),
                                "--headless",
                                "--no-sandbox",
                                "--disable-gpu",
                                "--disable-dev-shm-usage",
                                "--no-first-run",
                                "--user-data-dir=" + profile.str(),
                                "--virtual-time-budget=4000",
                                "--window-size=1280,1000"};
  argv.insert(argv.end(), what.begin(), what.end());
  argv.push_back(url);
  child_process browser{argv};
  auto rc = browser.wait(90s);
  REQUIRE(rc);
  CHECK(*rc == 0);
  return browser.output();
}

} // namespace

TEST_CASE("the router's status page shows the workers and live figures in a "
          "real browser") {
  if (chromium().empty())
    FAIL("chromium is not installed (scripts/setup installs it)");
  temp_dir work, profile;
  auto status = free_port(), http_port = free_port();
  child_process all{{OUTRIDER_BIN, "--role", "all", "--sim-engines", "2",
                     "--sim-speedup", "4", "--data-dir", work.str(),
                     "--system-port", std::to_string(status), "--http-port",
                     std::to_string(http_port), "--grpc-port", "0"}};
  if (!eventually([&] { return http_get(status, "/ready") == 200; }, 60s))
    FAIL("--role all never turned ready; its output:\n" << all.output());

  // A workload: two shared prefixes, so that hits are not zero. It runs
  // while the browser looks.
  std::atomic<bool> stop{false};
  std::atomic<int> done{0};
  std::thread load{[&] {
    for (uint32_t i = 0; i < 400 && !stop; ++i) {
      auto prompt =
        concat(tokens(1 + 1000 * (i % 2), 128), tokens(5000 + i, 8));
      nlohmann::json body{{"prompt", prompt}, {"max_tokens", 8}};
      if (http(http_port, "POST", "/v1/completions", body.dump()).first == 200)
        ++done;
    }
  }};
  struct joiner {
    std::atomic<bool>& stop;
    std::thread& t;
    ~joiner() {
      stop = true;
      t.join();
    }
  } join_load{stop, load};
  REQUIRE(eventually([&] { return done >= 10; }, 60s));

  // The page itself: plain HTML, nothing from elsewhere.
  std::string page;
  REQUIRE(http_get(status, "/", &page) == 200);
  CHECK(page.find("<script src") == std::string::npos);
  CHECK(page.find("http://") == std::string::npos);
  CHECK(page.find("https://") == std::string::npos);

  auto url = "http://127.0.0.1:" + std::to_string(status) + "/";
  auto dom = browse(url, profile, {"--dump-dom"});
  INFO(dom.substr(0, 4000));
  CHECK(dom.find(">worker-0<") != std::string::npos);
  CHECK(dom.find(">worker-1<") != std::string::npos);
  CHECK(dom.find(">aggregated<") != std::string::npos);
  CHECK(figure(dom, "total-requests") >= 10);
  CHECK(figure(dom, "hit-rate") > 0);
  CHECK(figure(dom, "ttft") > 0);
  CHECK(figure(dom, "tps") > 0);
  CHECK(dom.find("routing mode <span id=\"mode\">kv</span>") !=
        std::string::npos);
  // Recent decisions are listed, with the overlap they found.
  CHECK(std::regex_search(dom, std::regex{"<td>[1-9][0-9]* / [0-9]+</td>"}));

  auto dir = std::filesystem::path{OUTRIDER_ARTIFACT_DIR};
  std::filesystem::create_directories(dir);
  auto shot = dir / "status_page.png";
  std::filesystem::remove(shot);
  temp_dir profile2;
  browse(url, profile2, {"--screenshot=" + shot.string()});
  REQUIRE(std::filesystem::exists(shot));
  CHECK(std::filesystem::file_size(shot) > 10000);
}

TEST_CASE("a flood of /debug/status and /debug/index never delays /live: "
          "p99 under 50 ms, every flood request answered",
          "[alone]") {
  cluster c{1};
  REQUIRE(c.complete(tokens(1, 16), 2)["choices"].size() == 1);
  // More flooders than the status server's old worker took (1 running, 8
  // queued): asks to the router actor are answered without a thread each.
  constexpr int flooders = 16;
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0}, refused{0};
  std::vector<std::thread> flood;
  for (int i = 0; i < flooders; ++i)
    flood.emplace_back([&, i] {
      const char* path = i % 2 ? "/debug/index" : "/debug/status";
      for (int n = 0; n < 2000 && !stop.load(); ++n)
        (http_get(c.router_status, path) == 200 ? answered : refused)++;
    });
  // Until the flood is well under way.
  CHECK(eventually([&] { return answered.load() >= 100; }, 10s));
  std::vector<double> live_ms;
  for (int i = 0; i < 200; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    CHECK(http_get(c.router_status, "/live") == 200);
    live_ms.push_back(std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - t0)
                        .count());
  }
  stop = true;
  for (auto& t : flood)
    t.join();
  std::sort(live_ms.begin(), live_ms.end());
  auto p50 = live_ms[live_ms.size() / 2];
  auto p99 = live_ms[live_ms.size() * 99 / 100];
  WARN("/live under a flood of " << answered.load() << " debug requests ("
                                 << refused.load() << " refused): p50 " << p50
                                 << " ms, p99 " << p99 << " ms");
  CHECK(p99 < 50 * time_allowance);
  CHECK(refused.load() == 0);
  CHECK(answered.load() >= 200);
}
