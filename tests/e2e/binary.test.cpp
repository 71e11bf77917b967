// End-to-end tests of the outrider binary: real processes on loopback.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/e2e/process.hpp"
#include "tests/e2e/sidecar_process.hpp"

using namespace outrider::test;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

std::string port_arg(uint16_t p) {
  return std::to_string(p);
}

// Runs outrider with `args`; returns (exit code, output).
std::pair<int, std::string> run_outrider(std::vector<std::string> args,
                                         std::vector<std::string> env = {}) {
  args.insert(args.begin(), OUTRIDER_BIN);
  child_process p{args, env};
  auto code = p.wait(20s);
  REQUIRE(code);
  return {*code, p.output()};
}

struct sim {
  uint16_t port = free_port();
  child_process proc;
  explicit sim(int startup_delay_ms = 0)
    : proc({OUTRIDER_SIM_BIN, "--grpc-port", port_arg(port), "--startup-delay",
            std::to_string(startup_delay_ms) + "ms"}) {}
  std::string endpoint() const { return "127.0.0.1:" + port_arg(port); }
};

// The sidecar process of these tests, with its own directories.
struct sidecar : sidecar_process {
  sidecar(const std::string& engine, std::vector<std::string> extra = {})
    : sidecar_process(engine, nullptr, std::move(extra)) {}
};

std::string run_promtool(const std::string& exposition) {
  auto path = std::filesystem::temp_directory_path() /
              ("outrider-metrics-" + std::to_string(::getpid()) + ".txt");
  std::ofstream(path) << exposition;
  auto cmd = "promtool check metrics < " + path.string() + " 2>&1; echo rc=$?";
  std::string out;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (fgets(buf, sizeof(buf), f))
      out += buf;
    pclose(f);
  }
  std::filesystem::remove(path);
  return out;
}

} // namespace

TEST_CASE("live before ready, ready follows the engine, 503 from SIGTERM on") {
  sim engine{1500}; // loading for 1.5 s
  sidecar side{engine.endpoint(),
               {"--debug-hang-on-shutdown", "--shutdown-timeout", "1500ms"}};
  REQUIRE(eventually([&] { return side.get("/live") == 200; }, 10s));
  // The engine is still loading: live, not ready.
  CHECK(side.get("/ready") == 503);
  std::string health;
  side.get("/health", &health);
  CHECK_THAT(health, Contains("\"status\":\"starting\""));
  REQUIRE(eventually([&] { return side.get("/ready") == 200; }, 10s));
  side.get("/health", &health);
  CHECK_THAT(health, Contains("\"engine\":{\"state\":\"serving\"}"));

  std::string metrics;
  REQUIRE(side.get("/metrics", &metrics) == 200);
  CHECK_THAT(metrics, Contains("outrider_engine_serving 1"));
  auto lint = run_promtool(metrics);
  INFO(lint);
  CHECK_THAT(lint, Contains("rc=0"));

  auto t0 = std::chrono::steady_clock::now();
  side.proc->signal(SIGTERM);
  // An actor hangs on shutdown: the process stays up until the shutdown
  // timeout, live but not ready.
  CHECK(eventually([&] { return side.get("/ready") == 503; }, 1s));
  CHECK(side.get("/live") == 200);
  side.get("/health", &health);
  CHECK_THAT(health, Contains("shutting_down"));
  auto code = side.proc->wait(10s);
  REQUIRE(code);
  CHECK(*code == 0);
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= 1s);
  CHECK(took < 5s);
  CHECK_THAT(side.proc->output(), Contains("did not finish within 1500 ms"));
}

TEST_CASE("a clean SIGTERM exits 0 promptly") {
  sim engine;
  sidecar side{engine.endpoint()};
  REQUIRE(eventually([&] { return side.get("/ready") == 200; }, 10s));
  auto t0 = std::chrono::steady_clock::now();
  side.proc->signal(SIGTERM);
  auto code = side.proc->wait(10s);
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
}

TEST_CASE("readiness drops when the engine dies and returns with it") {
  auto engine = std::make_unique<sim>();
  auto port = engine->port;
  sidecar side{engine->endpoint()};
  REQUIRE(eventually([&] { return side.get("/ready") == 200; }, 10s));
  engine->proc.signal(SIGKILL);
  REQUIRE(engine->proc.wait(5s));
  CHECK(eventually([&] { return side.get("/ready") == 503; }, 2s));
  CHECK(side.get("/live") == 200);
  child_process again{{OUTRIDER_SIM_BIN, "--grpc-port", port_arg(port)}};
  CHECK(eventually([&] { return side.get("/ready") == 200; }, 10s));
}

TEST_CASE("an engine that never serves ends the sidecar at the deadline") {
  sidecar_dirs dirs;
  auto [code, out] =
    run_outrider({"--role", "sidecar", "--engine-endpoint",
                  "127.0.0.1:" + port_arg(free_port()), "--system-port",
                  port_arg(free_port()), "--engine-startup-deadline", "500ms",
                  "--data-dir", dirs.data.str(), "--discovery-dir",
                  dirs.discovery.str(), "--relay-port", port_arg(free_port())});
  CHECK(code == 1);
  CHECK_THAT(out, Contains("engine startup deadline exceeded"));
}

TEST_CASE("bad command lines and configuration exit 2 with one clear line") {
  struct bad_case {
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::string message;
  };
  auto dir = std::filesystem::temp_directory_path();
  auto yaml = dir / ("outrider-bad-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(yaml) << "role: sidecar\nsystem-port: 9099\nsistem-host: x\n";
  auto typed = dir / ("outrider-typed-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(typed) << "role: sidecar\nshutdown-timeout: soon\n";
  std::vector<bad_case> cases{
    {{"--role", "boss"},
     {},
     "--role: 'role' must be one of sidecar, router, all"},
    {{}, {}, "no role given"},
    {{"--role", "sidecar", "--frobnicate"}, {}, "unknown flag '--frobnicate'"},
    {{"--role", "sidecar", "--system-port", "x"},
     {},
     "--system-port: 'system-port' must be an integer, got 'x'"},
    {{"--config", yaml.string()},
     {},
     yaml.string() + ":3: unknown key 'sistem-host'"},
    {{"--config", typed.string()},
     {},
     typed.string() + ":2: 'shutdown-timeout' must be a duration"},
    {{"--role", "sidecar", "--config", "/no/such/file.yaml"},
     {},
     "cannot read config file '/no/such/file.yaml'"},
    {{"--role", "sidecar"},
     {"OUTRIDER_LOG_LEVEL=loud"},
     "OUTRIDER_LOG_LEVEL: 'log-level' must be one of"},
  };
  for (const auto& c : cases) {
    auto [code, out] = run_outrider(c.args, c.env);
    INFO(out);
    CHECK(code == 2);
    CHECK_THAT(out, Contains("outrider: error: " + c.message));
    // One line, no stack trace.
    CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  }
  std::filesystem::remove(yaml);
  std::filesystem::remove(typed);
}

TEST_CASE("Kubernetes service links and unknown variables do not stop the "
          "binary") {
  sidecar_dirs dirs;
  auto [code, out] = run_outrider(
    {"--role", "sidecar", "--engine-endpoint",
     "127.0.0.1:" + port_arg(free_port()), "--system-port",
     port_arg(free_port()), "--engine-startup-deadline", "300ms", "--data-dir",
     dirs.data.str(), "--discovery-dir", dirs.discovery.str(), "--relay-port",
     port_arg(free_port())},
    {"OUTRIDER_PORT=tcp://10.0.0.1:80", "OUTRIDER_SERVICE_HOST=10.0.0.1",
     "OUTRIDER_PORT_8000_TCP_ADDR=10.0.0.1", "OUTRIDER_SERVICE_PORT=80",
     "OUTRIDER_HTTP_PORT=tcp://10.0.0.2:8000", "OUTRIDER_NOPE=1"});
  INFO(out);
  // It ran (and gave up on the missing engine), rather than exit 2.
  CHECK(code == 1);
  CHECK_THAT(out, Contains("outrider: warning: ignoring unknown environment "
                           "variable OUTRIDER_NOPE"));
  CHECK_THAT(out, !Contains("OUTRIDER_SERVICE_HOST"));
  CHECK_THAT(out, !Contains("OUTRIDER_PORT"));
  CHECK_THAT(out, Contains("startup deadline"));
}

TEST_CASE("help explains every option") {
  auto [code, out] = run_outrider({"--help"});
  CHECK(code == 0);
  CHECK_THAT(out, Contains("--role <sidecar, router, all>"));
  CHECK_THAT(out, Contains("flag > environment > config file > default"));
  CHECK_THAT(out, Contains("e.g. --engine-endpoint 127.0.0.1:50051"));
}

TEST_CASE("json log format writes one JSON object per line") {
  sidecar_dirs dirs;
  auto [code, out] = run_outrider(
    {"--role", "sidecar", "--log-format", "json", "--engine-endpoint",
     "127.0.0.1:" + port_arg(free_port()), "--system-port",
     port_arg(free_port()), "--engine-startup-deadline", "300ms", "--data-dir",
     dirs.data.str(), "--discovery-dir", dirs.discovery.str(), "--relay-port",
     port_arg(free_port())});
  CHECK(code == 1);
  std::istringstream lines{out};
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    INFO(line);
    auto doc = nlohmann::json::parse(line, nullptr, false);
    REQUIRE_FALSE(doc.is_discarded());
    CHECK(doc.contains("ts"));
    CHECK(doc.contains("level"));
    CHECK(doc["msg"].is_string());
    ++n;
  }
  CHECK(n >= 3);
}
