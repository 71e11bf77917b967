// What ships for operators (deploy/prometheus, deploy/grafana) names only
// metrics a live router and sidecar export: scraped here after a request,
// checked by tests/deploy/check_observability.py; both expositions pass
// `promtool check metrics`.

#include <fstream>

#include "tests/e2e/router_cluster.hpp"

using namespace outrider::test;

namespace {

// Runs `cmd` (a shell line); its output and exit status.
std::pair<int, std::string> shell(const std::string& cmd) {
  std::string out;
  int rc = -1;
  if (FILE* f = popen((cmd + " 2>&1").c_str(), "r")) {
    char buf[512];
    while (fgets(buf, sizeof(buf), f))
      out += buf;
    rc = pclose(f);
  }
  return {rc, out};
}

} // namespace

TEST_CASE("the shipped alert rules and dashboard name only metrics a live "
          "router and sidecar export, and both expositions are valid") {
  cluster c{1};
  c.complete(tokens(100, 40), 4);
  temp_dir dir;
  std::string router, sidecar;
  REQUIRE(http_get(c.router_status, "/metrics", &router) == 200);
  REQUIRE(eventually(
    [&] {
      return c.sides[0]->get("/metrics", &sidecar) == 200 &&
             sidecar.find("outrider_kv_batches_received_total") !=
               std::string::npos;
    },
    10s));
  auto rpath = dir.str() + "/router.txt", spath = dir.str() + "/sidecar.txt";
  std::ofstream(rpath) << router;
  std::ofstream(spath) << sidecar;
  auto [rc, out] = shell("python3 " OUTRIDER_SOURCE_DIR
                         "/tests/deploy/check_observability.py " +
                         rpath + " " + spath);
  INFO(out);
  CHECK(rc == 0);
  for (const auto& p : {rpath, spath}) {
    auto [lrc, lint] = shell("promtool check metrics < " + p);
    INFO(p << ": " << lint);
    CHECK(lrc == 0);
  }
}
