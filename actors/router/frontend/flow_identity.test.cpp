#include "actors/router/frontend/flow_identity.hpp"

#include <catch2/catch.hpp>

using namespace outrider::router;

TEST_CASE("flow identity: an API key decides the flow before a fairness id, "
          "and the band comes from the priority or the objective") {
  std::string why;
  auto objectives = parse_objectives(R"({"critical": 10, "batch": -10})", &why);
  REQUIRE(objectives);
  auto none = flow_identity_of({}, *objectives, "x-session-id", &why);
  REQUIRE(none);
  CHECK(none->flow == "default");
  CHECK(none->band == 0);
  CHECK(none->session.empty());
  CHECK(flow_identity_of({{"x-session-id", std::string(300, 's')}}, *objectives,
                         "x-session-id", &why)
          ->session == std::string(256, 's'));

  auto tenant = flow_identity_of({{fairness_id_header, "tenant-a"}},
                                 *objectives, "x-session-id", &why);
  CHECK(tenant->flow == "tenant-a");
  // A key wins over a header the client may choose freely.
  auto keyed = flow_identity_of(
    {{"authorization", "Bearer sk-1"}, {fairness_id_header, "tenant-b"}},
    *objectives, "x-session-id", &why);
  auto keyed_again = flow_identity_of(
    {{"authorization", "Bearer sk-1"}, {fairness_id_header, "tenant-c"}},
    *objectives, "x-session-id", &why);
  // The first 8 bytes of SHA-256("sk-1"), never the key itself.
  CHECK(keyed->flow == "key:0f2c10bf3d128c71");
  CHECK(keyed->flow == keyed_again->flow);
  CHECK(keyed->flow != flow_identity_of({{"authorization", "Bearer sk-2"}},
                                        *objectives, "x-session-id", &why)
                         ->flow);
  // A fairness id becomes a metric label: printable and short.
  auto odd =
    flow_identity_of({{fairness_id_header, std::string(100, 'x') + "\"\\"}},
                     *objectives, "x-session-id", &why);
  CHECK(odd->flow == std::string(64, 'x'));

  CHECK(flow_identity_of({{objective_header, "critical"}}, *objectives,
                         "x-session-id", &why)
          ->band == 10);
  CHECK(flow_identity_of({{objective_header, "batch"}}, *objectives,
                         "x-session-id", &why)
          ->band == -10);
  CHECK(flow_identity_of({{objective_header, "unknown"}}, *objectives,
                         "x-session-id", &why)
          ->band == 0);
  CHECK(flow_identity_of({{priority_header, "-7"}, {objective_header, "batch"}},
                         *objectives, "x-session-id", &why)
          ->band == -7);
  for (const char* bad : {"high", "101", "-101", "1.5", "", "7 "}) {
    CHECK_FALSE(flow_identity_of({{priority_header, bad}}, *objectives,
                                 "x-session-id", &why));
    CHECK(why.find(priority_header) != std::string::npos);
  }
}

TEST_CASE("flow objectives: a JSON object of priorities in -100..100") {
  std::string why;
  CHECK(parse_objectives("{}", &why)->empty());
  CHECK_FALSE(parse_objectives("[]", &why));
  CHECK_FALSE(parse_objectives("{\"a\": 1.5}", &why));
  CHECK_FALSE(parse_objectives("{\"a\": 101}", &why));
  CHECK(why.find("'a'") != std::string::npos);
  CHECK_FALSE(parse_objectives("{\"a\": \"high\"}", &why));
  CHECK_FALSE(parse_objectives("not json", &why));
}
