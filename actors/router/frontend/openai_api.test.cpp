#include "actors/router/frontend/openai_api.hpp"

#include <chrono>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "actors/router/frontend/openai_chat.hpp"

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

TEST_CASE("openai: a chat body with an object of 100,000 keys is refused in "
          "linear time, before the ordered parse") {
  std::string tools = "{";
  for (int i = 0; i < 100000; ++i)
    tools += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
  tools += "}";
  auto body = R"({"model":"m","messages":[{"role":"user","content":"hi"}],)"
              R"("chat_template_kwargs":)" +
              tools + "}";
  completion_request out;
  auto t0 = std::chrono::steady_clock::now();
  auto refused = parse_chat(body, {"m"}, api_limits{}, out);
  auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE(refused);
  CHECK(refused->status == 400);
  CHECK(refused->body.find("too_many_members") != std::string::npos);
  CHECK(took < std::chrono::milliseconds{500}); // quadratic: 15 s
  // Keys inside strings, and arrays of any length, do not count.
  std::string many = "[";
  for (int i = 0; i < 5000; ++i)
    many += (i ? ",\"a,b\"" : "\"a,b\"");
  many += "]";
  auto ok = R"({"model":"m","messages":[{"role":"user","content":"hi"}],)"
            R"("chat_template_kwargs":{"list":)" +
            many + "}}";
  CHECK_FALSE(parse_chat(ok, {"m"}, api_limits{}, out));
}
