#include "actors/router/core/disagg_policy.hpp"

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

TEST_CASE("plan_prefill: no pool, incompatible legs, bootstrap rooms, then "
          "the policy") {
  disagg_config cfg; // isl_bounding, 2048 tokens, ratio 0.7
  prefill_facts f;
  f.load = {50000, 0, 0, 0}; // long and cold: the policy says remote
  CHECK(plan_prefill(cfg, f, std::nullopt) == prefill_plan::no_pool);
  f.prefill_placed = true;
  CHECK(plan_prefill(cfg, f, std::nullopt) == prefill_plan::remote);
  f.load = {1000, 500, 0, 0}; // short and half cached: local
  CHECK(plan_prefill(cfg, f, std::nullopt) == prefill_plan::local);
  // An SGLang prefill worker's room for an engine that takes sessions, and
  // the other way round: the decode worker prefills itself.
  f.prefill_bootstrap = true;
  CHECK(plan_prefill(cfg, f, std::nullopt) == prefill_plan::incompatible);
  f.prefill_bootstrap = false;
  f.decode_sglang = true;
  CHECK(plan_prefill(cfg, f, std::nullopt) == prefill_plan::incompatible);
  // An SGLang decode engine cannot prefill: a room, whatever the policy.
  f.prefill_bootstrap = true;
  CHECK(plan_prefill(cfg, f, std::nullopt) == prefill_plan::bootstrap);
  CHECK(std::string{to_string(prefill_plan::no_pool)} == "no_prefill_pool");
  CHECK(std::string{to_string(prefill_plan::local)} == "local_prefill");
}
