// vLLM's HTTP KV event discovery, read in each shape engines and mocks
// answer with (docs/wire.md, "KV events: discovery"), and refused clearly
// when it is not a list of sources.
#include "cluster/engine/kv_sources_http.hpp"

#include <catch2/catch.hpp>

using namespace outrider;
using namespace outrider::engine;

namespace {

std::vector<kv_source> parsed(const std::string& body) {
  std::vector<kv_source> out;
  auto err = parse_kv_sources_json(body, "10.0.0.7", out);
  INFO(body);
  REQUIRE(!err);
  return out;
}

bool refused(const std::string& body) {
  std::vector<kv_source> out{kv_source{}};
  auto err = parse_kv_sources_json(body, "10.0.0.7", out);
  return err == errc::engine_malformed && out.size() == 1;
}

} // namespace

TEST_CASE("GET /kv_event_sources: vLLM's object of sources, sorted by rank") {
  auto s = parsed(R"({"sources": [
    {"data_parallel_rank": 0, "endpoint": "tcp://*:5557",
     "replay_endpoint": "tcp://*:5560", "topic": "kv"},
    {"data_parallel_rank": 1, "endpoint": "tcp://10.0.0.8:41000",
     "replay_endpoint": null, "topic": "kv"}]})");
  REQUIRE(s.size() == 2);
  CHECK(s[0].rank == 0);
  CHECK(s[0].endpoint == "tcp://10.0.0.7:5557"); // wildcard: the engine's
  CHECK(s[0].replay_endpoint == "tcp://10.0.0.7:5560");
  CHECK(s[0].topic == "kv");
  CHECK(s[1].rank == 1);
  CHECK(s[1].endpoint == "tcp://10.0.0.8:41000"); // port 0, resolved
  CHECK(s[1].replay_endpoint.empty());
}

TEST_CASE("GET /kv_event_sources: a bare list and a map by rank are read") {
  auto list = parsed(R"([{"endpoint": "tcp://0.0.0.0:5557"}])");
  REQUIRE(list.size() == 1);
  CHECK(list[0].rank == 0);
  CHECK(list[0].endpoint == "tcp://10.0.0.7:5557");
  auto map = parsed(R"({"0": {"endpoint": "tcp://*:5557", "topic": ""},
                        "3": {"endpoint": "tcp://*:5560", "extra": 1}})");
  REQUIRE(map.size() == 2);
  CHECK(map[1].rank == 3);
  CHECK(map[1].endpoint == "tcp://10.0.0.7:5560");
  CHECK(parsed(R"({"sources": []})").empty()); // no KV events: none
}

TEST_CASE("GET /kv_event_sources: what is not a list of sources is refused "
          "and leaves the caller's list alone") {
  CHECK(refused("not json"));
  CHECK(refused("42"));
  CHECK(refused(R"({"sources": {"endpoint": "tcp://*:1"}})"));
  CHECK(refused(R"([{"topic": "kv"}])"));                   // no endpoint
  CHECK(refused(R"([{"endpoint": "ipc:///tmp/kv"}])"));     // not tcp
  CHECK(refused(R"({"zero": {"endpoint": "tcp://*:1"}})")); // key not a rank
  CHECK(refused(R"({"-1": {"endpoint": "tcp://*:1"}})"));
  CHECK(refused(R"([{"endpoint": "tcp://*:1", "data_parallel_rank": -1}])"));
  CHECK(refused(R"([{"endpoint": "tcp://*:1", "data_parallel_rank": "0"}])"));
  CHECK(refused(R"([{"endpoint": "tcp://*:1"}, {"endpoint": "tcp://*:2"}])"));
  std::string many = "[";
  for (int i = 0; i < 1025; ++i)
    many += std::string(i ? "," : "") + R"({"data_parallel_rank": )" +
            std::to_string(i) + R"(, "endpoint": "tcp://*:1"})";
  CHECK(refused(many + "]"));
}
