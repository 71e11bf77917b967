#include "sim/sim_options.hpp"

#include <catch2/catch.hpp>

using namespace outrider::sim;
using Catch::Matchers::Contains;

TEST_CASE("outrider-sim: defaults are sim_config's, flags land in it") {
  auto d = parse_sim_options({});
  REQUIRE(d.what == sim_parse_result::ok);
  const sim_config fresh;
  CHECK(d.cfg.grpc_port == fresh.grpc_port);
  CHECK(d.cfg.engine.block_size == fresh.engine.block_size);
  CHECK(d.cfg.transfer_ms_per_block == fresh.transfer_ms_per_block);
  CHECK_FALSE(d.cfg.kv_events);

  auto r = parse_sim_options(
    {"--grpc-port", "50099", "--block-size=16", "--no-sleep", "--speedup",
     "2.5", "--disaggregation-mode", "prefill", "--kv-hash-format", "int64",
     "--replay-topic-frame", "false", "--startup-delay", "2s",
     "--kv-events-config",
     R"({"enable_kv_cache_events":true,"endpoint":"tcp://*:5999"})"});
  REQUIRE(r.what == sim_parse_result::ok);
  CHECK(r.cfg.grpc_port == 50099);
  CHECK(r.cfg.engine.block_size == 16);
  CHECK(r.cfg.no_sleep);
  CHECK(r.cfg.speedup == 2.5);
  CHECK(r.cfg.engine_role_prefill());
  CHECK(r.cfg.kv_hashes == hash_format::int64);
  CHECK_FALSE(r.cfg.replay_topic_frame);
  CHECK(r.cfg.startup_delay_ms == 2000);
  CHECK(r.cfg.kv_events);
  CHECK(r.cfg.kv_endpoint == "tcp://*:5999");
}

TEST_CASE("outrider-sim: bad flags are one clear line") {
  auto typo = parse_sim_options({"--grpc-prot", "1"});
  REQUIRE(typo.what == sim_parse_result::error);
  CHECK_THAT(typo.message, Contains("did you mean 'grpc-port'"));
  auto range = parse_sim_options({"--data-parallel-size", "65"});
  REQUIRE(range.what == sim_parse_result::error);
  CHECK_THAT(range.message, Contains("between 1 and 64"));
  auto json = parse_sim_options({"--kv-events-config", "{"});
  REQUIRE(json.what == sim_parse_result::error);
  CHECK_THAT(json.message, Contains("JSON object"));
  auto help = parse_sim_options({"--help"});
  REQUIRE(help.what == sim_parse_result::help);
  CHECK_THAT(help.message, Contains("--kv-events-config"));
}
