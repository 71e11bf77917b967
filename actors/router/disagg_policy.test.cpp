#include "actors/router/disagg_policy.hpp"

#include <catch2/catch.hpp>

using namespace outrider::router;
using d = disagg_decision;

TEST_CASE("isl_bounding prefills short, mostly cached prompts locally") {
  disagg_config cfg; // defaults: 2048 tokens, ratio 0.7
  // 10,000 tokens, 9,000 cached on the decode worker: 1,000 effective (0.1).
  CHECK(decide(cfg, {10000, 9000, 0, 0}, std::nullopt) == d::local_prefill);
  // Effective 3,000: above the token threshold.
  CHECK(decide(cfg, {10000, 7000, 0, 0}, std::nullopt) == d::remote_prefill);
  // Short (1,000) but nothing cached: ratio 1.0 >= 0.7.
  CHECK(decide(cfg, {1000, 0, 0, 0}, std::nullopt) == d::remote_prefill);
  // Short and 40% cached: ratio 0.6 < 0.7.
  CHECK(decide(cfg, {1000, 400, 0, 0}, std::nullopt) == d::local_prefill);
}

TEST_CASE("prefill_load goes local when the prefill worker is busy") {
  disagg_config cfg;
  cfg.policy = disagg_config::policy_kind::prefill_load;
  cfg.prefill_busy_threshold = 8192;
  CHECK(decide(cfg, {50000, 0, 9000, 0}, std::nullopt) == d::local_prefill);
  CHECK(decide(cfg, {50000, 0, 8000, 0}, std::nullopt) == d::remote_prefill);
  // Without its own threshold it falls back to the router queue threshold.
  cfg.prefill_busy_threshold.reset();
  CHECK(decide(cfg, {50000, 0, 3000, 0}, 2000.0) == d::local_prefill);
  CHECK(decide(cfg, {50000, 0, 3000, 0}, std::nullopt) == d::remote_prefill);
}

TEST_CASE("isl_or_load takes either reason, and decode load can veto") {
  disagg_config cfg;
  cfg.policy = disagg_config::policy_kind::isl_or_load;
  cfg.prefill_busy_threshold = 100;
  CHECK(decide(cfg, {1000, 500, 0, 0}, std::nullopt) == d::local_prefill);
  CHECK(decide(cfg, {50000, 0, 500, 0}, std::nullopt) == d::local_prefill);
  CHECK(decide(cfg, {50000, 0, 50, 0}, std::nullopt) == d::remote_prefill);
  cfg.decode_busy_threshold = 1000;
  CHECK(decide(cfg, {50000, 0, 500, 2000}, std::nullopt) == d::remote_prefill);
  CHECK(decide(cfg, {50000, 0, 500, 10}, std::nullopt) == d::local_prefill);
}

TEST_CASE("the disaggregation config is validated") {
  std::string why;
  auto c = parse_disagg_config(
    R"({"policy":"isl_or_load","eff_isl_threshold":4096,"eff_isl_ratio_threshold":0.6})",
    &why);
  REQUIRE(c);
  CHECK(c->policy == disagg_config::policy_kind::isl_or_load);
  CHECK(c->eff_isl_threshold == 4096);
  CHECK(c->eff_isl_ratio_threshold == 0.6);
  CHECK_FALSE(parse_disagg_config(R"({"eff_isl_ratio_threshold":1.5})", &why));
  CHECK(why.find("in [0, 1]") != std::string::npos);
  CHECK_FALSE(parse_disagg_config(R"({"polcy":"isl_bounding"})", &why));
  CHECK(why.find("unknown field 'polcy'") != std::string::npos);
  CHECK_FALSE(parse_disagg_config(R"({"policy":"always"})", &why));
  CHECK(why.find("unknown policy") != std::string::npos);
  CHECK_FALSE(parse_disagg_config(R"({"eff_isl_threshold":"big"})", &why));
  CHECK_FALSE(parse_disagg_config("[]", &why));
  auto defaults = parse_disagg_config("{}", &why);
  REQUIRE(defaults);
  CHECK(defaults->eff_isl_threshold == 2048);
  CHECK(defaults->eff_isl_ratio_threshold == 0.7);
}
