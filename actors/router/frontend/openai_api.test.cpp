#include "actors/router/frontend/openai_api.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace outrider::router;
using json = nlohmann::json;

namespace {

json event_json(const std::string& ev) {
  REQUIRE(ev.rfind("data: ", 0) == 0);
  REQUIRE(ev.size() > 8);
  REQUIRE(ev.substr(ev.size() - 2) == "\n\n");
  return json::parse(ev.substr(6, ev.size() - 8));
}

} // namespace

TEST_CASE("openai: the fast token event is the same JSON as the general one") {
  const std::string model = "m\"odel\\ \xc3\xa9"; // quotes, backslash, UTF-8
  for (const std::vector<uint32_t>& toks :
       {std::vector<uint32_t>{}, std::vector<uint32_t>{7},
        std::vector<uint32_t>{0, 4294967295u, 31999, 12}}) {
    token_event_writer fast{"cmpl-1-2", 1700000000, model};
    auto a = event_json(fast(toks));
    auto b = event_json(
      completion_event("cmpl-1-2", 1700000000, model, toks, ids_as_text(toks)));
    CHECK(a == b);
    CHECK(a["choices"][0]["token_ids"].size() == toks.size());
  }
}
