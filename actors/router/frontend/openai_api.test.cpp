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

TEST_CASE("chat media: image parts become the placeholder and items, each "
          "placed at the tokens the text before it shares with the prompt") {
  completion_request c;
  api_limits lim;
  lim.media_placeholder = "<img>";
  auto body =
    json{{"messages",
          {{{"role", "user"},
            {"content",
             {{{"type", "text"}, {"text", "ab"}},
              {{"type", "image_url"}, {"image_url", {{"url", "data:x"}}}},
              {{"type", "text"}, {"text", "cd"}},
              {{"type", "image_url"},
               {"image_url", {{"url", "data:y"}}},
               {"uuid", "u"}}}}}}}};
  REQUIRE_FALSE(parse_chat(body.dump(), {}, lim, c));
  REQUIRE(c.params.media.size() == 2);
  CHECK(c.params.media[0].url == "data:x");
  CHECK(c.params.media[1].uuid == "u");
  CHECK(c.chat_vars.find(R"(ab\n<img>\ncd\n<img>)") != std::string::npos);
  // One token per character; "<img>" is one token (an added token), or
  // merged with what precedes it (then the item starts earlier).
  auto encode = [](std::string_view t) {
    std::vector<uint32_t> ids;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t.substr(i, 5) == "<img>") {
        ids.push_back(1000);
        i += 4;
      } else
        ids.push_back(static_cast<uint32_t>(t[i]));
    }
    return ids;
  };
  std::string text = "S:ab\n<img>\ncd\n<img>!";
  auto ids = encode(text);
  place_media(text, "<img>", ids, encode, c.params.media);
  CHECK(c.params.media[0].offset == 5); // "S:ab\n"
  CHECK(c.params.media[1].offset == 10);
  auto merged = ids;
  merged[4] = 999; // the tokenizer joined "\n" with the placeholder
  place_media(text, "<img>", merged, encode, c.params.media);
  CHECK(c.params.media[0].offset == 4);
  // A template that dropped the placeholders: nothing is matched.
  place_media("S:ab", "<img>", encode("S:ab"), encode, c.params.media);
  CHECK(c.params.media[0].offset == 0);
  CHECK(c.params.media[1].offset == 0);
  // Malformed parts and too many items are refused.
  auto refused = [&](json part) {
    completion_request r;
    auto b = json{{"messages", {{{"role", "user"}, {"content", {part}}}}}};
    return parse_chat(b.dump(), {}, lim, r).has_value();
  };
  CHECK(refused({{"type", "image_url"}, {"image_url", "data:x"}}));
  CHECK(refused({{"type", "image_url"}, {"image_url", {{"url", 7}}}}));
  CHECK(refused({{"type", "image_url"},
                 {"image_url", {{"url", "data:x"}}},
                 {"uuid", std::string(257, 'u')}}));
  CHECK(refused({{"type", "input_audio"}}));
  json many = json::array();
  for (int i = 0; i < 65; ++i)
    many.push_back({{"type", "image_url"}, {"image_url", {{"url", "d"}}}});
  completion_request r;
  auto b = json{{"messages", {{{"role", "user"}, {"content", many}}}}};
  CHECK(parse_chat(b.dump(), {}, lim, r).has_value());
}

TEST_CASE("openai: what is not supported is refused, never silently "
          "ignored, and a 404 does not echo a model name of any length") {
  api_limits lim;
  auto code_of = [&](json body) -> std::string {
    body["prompt"] = {1, 2, 3};
    completion_request r;
    auto bad = parse_completion(body.dump(), {"m"}, lim, false, r);
    if (!bad)
      return "ok";
    auto doc = json::parse(bad->body);
    return doc["error"]["code"].get<std::string>();
  };
  CHECK(code_of({{"n", 1}}) == "ok");
  CHECK(code_of({{"n", 2}}) == "n_unsupported");
  CHECK(code_of({{"n", "1"}}) == "n_unsupported");
  CHECK(code_of({{"logprobs", nullptr}}) == "ok");
  CHECK(code_of({{"logprobs", 0}}) == "ok");
  CHECK(code_of({{"logprobs", false}}) == "ok");
  CHECK(code_of({{"logprobs", 5}}) == "logprobs_unsupported");
  CHECK(code_of({{"logprobs", true}}) == "logprobs_unsupported");
  CHECK(code_of({{"top_logprobs", 2}}) == "logprobs_unsupported");
  CHECK(code_of({{"top_p", 1}}) == "ok");
  CHECK(code_of({{"top_p", 1.0}}) == "ok");
  CHECK(code_of({{"top_p", 0.9}}) == "top_p_unsupported");
  CHECK(code_of({{"top_p", 1.5}}) == "invalid_type");
  CHECK(code_of({{"top_p", 0}}) == "invalid_type");
  completion_request r;
  auto missing = parse_completion(
    json{{"model", std::string(100000, 'x')}, {"prompt", {1}}}.dump(), {"m"},
    lim, false, r);
  REQUIRE(missing);
  CHECK(missing->status == 404);
  CHECK(missing->body.size() < 1000);
}
