#pragma once

// One prefill and one decode engine with their sidecars, and a router with
// conditional disaggregation: for the disaggregation tests.

#include <nlohmann/json.hpp>

#include "tests/e2e/router_cluster.hpp"
#include "tests/e2e/sidecar_process.hpp"
#include "tests/e2e/sim_process.hpp"

namespace outrider::test {

// One prefill and one decode engine, with sidecars, and a router with
// conditional disaggregation configured by `config`.
struct disagg_cluster {
  temp_dir discovery;
  sim_process prefill;
  sim_process decode;
  std::unique_ptr<sidecar_process> prefill_side, decode_side;
  uint16_t http_port = free_port();
  uint16_t status = free_port();
  std::unique_ptr<child_process> router;

  /// `sim_extra` goes to both engines, `side_extra` to both sidecars,
  /// `router_extra` to the router.
  explicit disagg_cluster(const std::string& config,
                          const std::string& speedup = "100",
                          const std::vector<std::string>& sim_extra = {},
                          const std::vector<std::string>& side_extra = {},
                          const std::vector<std::string>& router_extra = {})
    : prefill({.role = "prefill", .extra = with(sim_extra, speedup)}),
      decode({.role = "decode", .extra = with(sim_extra, speedup)}) {
    REQUIRE(prefill.wait_serving(10s));
    REQUIRE(decode.wait_serving(10s));
    auto flags = [&](const char* id) {
      std::vector<std::string> f{"--discovery-dir", discovery.str(),
                                 "--worker-id", id};
      f.insert(f.end(), side_extra.begin(), side_extra.end());
      return f;
    };
    prefill_side = std::make_unique<sidecar_process>(prefill.endpoint(),
                                                     nullptr, flags("p0"));
    decode_side = std::make_unique<sidecar_process>(decode.endpoint(), nullptr,
                                                    flags("d0"));
    for (auto* s : {prefill_side.get(), decode_side.get()})
      REQUIRE(eventually([&] { return s->get("/ready") == 200; }, 10s));
    std::vector<std::string> args{OUTRIDER_BIN,
                                  "--role",
                                  "router",
                                  "--discovery-dir",
                                  discovery.str(),
                                  "--http-port",
                                  std::to_string(http_port),
                                  "--system-port",
                                  std::to_string(status),
                                  "--grpc-port",
                                  "0",
                                  "--router-conditional-disagg"};
    // Empty: the policy comes from a --config file in `router_extra`.
    if (!config.empty())
      args.insert(args.end(), {"--router-conditional-disagg-config", config});
    args.insert(args.end(), router_extra.begin(), router_extra.end());
    router = std::make_unique<child_process>(args);
    REQUIRE(eventually(
      [&] {
        std::string body;
        return http_get(http_port, "/v1/models", &body) == 200 &&
               body.find("sim-model") != std::string::npos;
      },
      10s));
  }

  static std::vector<std::string> with(std::vector<std::string> extra,
                                       const std::string& speedup) {
    extra.insert(extra.end(), {"--speedup", speedup});
    return extra;
  }

  double metric(const std::string& series) const {
    return metric_value(status, series);
  }

  std::vector<uint32_t> complete(const std::vector<uint32_t>& prompt,
                                 uint32_t max_tokens) {
    return complete_on(http_port, prompt, max_tokens)["choices"][0]["token_ids"]
      .get<std::vector<uint32_t>>();
  }
};

inline const std::string decisions = "outrider_router_disagg_decisions_total";

} // namespace outrider::test
