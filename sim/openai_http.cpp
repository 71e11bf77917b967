#include "sim/openai_http.hpp"

#include <ctime>

#include <nlohmann/json.hpp>

namespace outrider::sim {

namespace {

using nlohmann::json;

runtime::http_response error(int status, const std::string& message) {
  runtime::http_response r;
  r.status = status;
  r.content_type = "application/json";
  r.body = json{{"error", {{"message", message}, {"code", status}}}}.dump();
  return r;
}

struct parsed {
  engine_request req;
  bool stream = false;
  bool chat = false;
  std::string model;
};

// The request as the engine takes it; the error response when it is not
// one.
std::optional<runtime::http_response>
parse(const sim_config& cfg, const text::tokenizer* tok,
      const text::chat_template* chat, bool is_chat, const std::string& body,
      parsed& out) {
  auto j = json::parse(body, nullptr, false);
  if (!j.is_object())
    return error(400, "the body is not a JSON object");
  out.chat = is_chat;
  out.model = j.value("model", std::string{});
  std::string lora;
  if (!out.model.empty() && out.model != cfg.model)
    lora = out.model;
  auto salt = j.value("cache_salt", std::string{});
  if (auto st = take_identity(cfg, lora, salt, out.req); !st.ok())
    return error(st.error_code() == grpc::StatusCode::NOT_FOUND ? 404 : 400,
                 st.error_message());
  auto max = j.value("max_tokens", json(16));
  if (!max.is_number_unsigned() || max.get<uint64_t>() == 0 ||
      max.get<uint64_t>() > 1u << 20)
    return error(400, "max_tokens must be a positive integer");
  out.req.max_tokens = max.get<uint32_t>();
  out.stream = j.value("stream", false);
  if (is_chat) {
    if (!tok || !chat)
      return error(400, "chat needs --tokenizer (with a chat template)");
    auto m = j.find("messages");
    if (m == j.end() || !m->is_array())
      return error(400, "messages must be a list");
    nlohmann::ordered_json vars;
    vars["messages"] = nlohmann::ordered_json::parse(m->dump());
    vars["add_generation_prompt"] = true;
    vars["bos_token"] = tok->bos_token();
    vars["eos_token"] = tok->eos_token();
    std::string why;
    auto text = chat->render(vars, &why);
    if (!text)
      return error(400, why);
    out.req.prompt = tok->encode(*text, false);
  } else {
    auto p = j.find("prompt");
    if (p != j.end() && p->is_string()) {
      if (!tok)
        return error(400, "text prompts need --tokenizer; send token ids");
      out.req.prompt = tok->encode(p->get<std::string>());
    } else if (p != j.end() && p->is_array()) {
      for (const auto& t : *p) {
        if (!t.is_number_unsigned() ||
            t.get<uint64_t>() >= cfg.engine.vocab_size)
          return error(400, "prompt token ids must be integers below " +
                              std::to_string(cfg.engine.vocab_size));
        out.req.prompt.push_back(t.get<uint32_t>());
      }
    } else {
      return error(400, "prompt must be a string or a list of token ids");
    }
  }
  if (out.req.prompt.empty())
    return error(400, "the prompt is empty");
  return std::nullopt;
}

std::string text_of(const text::tokenizer* tok,
                    const std::vector<uint32_t>& ids) {
  if (tok)
    return tok->decode(ids);
  std::string s;
  for (auto id : ids)
    s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

// One choice's JSON: a completion's text, or a chat's message or delta.
json choice(const parsed& p, const std::string& text, const char* finish,
            bool delta) {
  json c{{"index", 0},
         {"finish_reason", finish ? json(finish) : json(nullptr)}};
  if (!p.chat)
    c["text"] = text;
  else
    c[delta ? "delta" : "message"] = {{"role", "assistant"}, {"content", text}};
  return c;
}

const char* finish_name(finish_reason f) {
  switch (f) {
  case finish_reason::stop:
    return "stop";
  case finish_reason::aborted:
    return "abort";
  default:
    return "length";
  }
}

} // namespace

openai_http::openai_http(sim_engine& e,
                         std::shared_ptr<const text::tokenizer> tok,
                         std::shared_ptr<const text::chat_template> chat)
  : e_(e), tok_(std::move(tok)), chat_(std::move(chat)) {}

openai_http::~openai_http() {
  stop();
}

std::string openai_http::start(const std::string& host, int base_port) {
  for (int r = 0; r < e_.ranks(); ++r) {
    auto s = std::make_unique<runtime::http_server>(
      "sim_openai", runtime::http_server::async_handler{
                      [this, r](std::shared_ptr<runtime::http_exchange> ex) {
                        serve(r, ex);
                      }});
    if (base_port + r > 65535)
      return "--http-port: rank " + std::to_string(r) + " is past port 65535";
    if (auto err = s->start(host, static_cast<uint16_t>(base_port + r)))
      return "OpenAI HTTP on port " + std::to_string(base_port + r) + ": " +
             outrider::describe(err);
    servers_.push_back(std::move(s));
  }
  return {};
}

void openai_http::stop() {
  for (auto& s : servers_)
    s->stop(std::chrono::seconds{1});
  servers_.clear();
  pool_.stop();
}

void openai_http::serve(int rank,
                        const std::shared_ptr<runtime::http_exchange>& ex) {
  const auto& req = ex->request();
  if (req.method == "GET" && req.path == "/v1/models") {
    runtime::http_response r;
    r.content_type = "application/json";
    json data = json::array({{{"id", e_.config().model}, {"object", "model"}}});
    for (const auto& a : e_.config().lora_adapters)
      data.push_back({{"id", a}, {"object", "model"}});
    r.body = json{{"object", "list"}, {"data", data}}.dump();
    return ex->respond(std::move(r));
  }
  if (req.method != "POST" ||
      (req.path != "/v1/completions" && req.path != "/v1/chat/completions"))
    return ex->respond(error(404, "unknown path " + req.path));
  if (!pool_.try_run([this, rank, ex] { run(rank, ex); }))
    ex->respond(error(503, "the simulator is busy"));
}

void openai_http::run(int rank,
                      const std::shared_ptr<runtime::http_exchange>& ex) {
  parsed p;
  bool chat = ex->request().path == "/v1/chat/completions";
  if (auto bad = parse(e_.config(), tok_.get(), chat_.get(), chat,
                       ex->request().body, p))
    return ex->respond(std::move(*bad));
  p.req.id = e_.new_request_id();
  auto id = "cmpl-" + p.req.id;
  auto created = static_cast<int64_t>(std::time(nullptr));
  const char* object =
    p.chat ? (p.stream ? "chat.completion.chunk" : "chat.completion")
           : "text_completion";
  std::vector<uint32_t> ids;
  uint32_t prompt_tokens = static_cast<uint32_t>(p.req.prompt.size());
  uint32_t cached = 0;
  const char* finish = nullptr;
  auto head = [&] {
    return json{{"id", id},
                {"object", object},
                {"created", created},
                {"model", p.model.empty() ? e_.config().model : p.model}};
  };
  auto usage = [&] {
    return json{{"prompt_tokens", prompt_tokens},
                {"completion_tokens", ids.size()},
                {"total_tokens", prompt_tokens + ids.size()},
                {"prompt_tokens_details", {{"cached_tokens", cached}}}};
  };
  std::map<std::string, std::string> headers{
    {"x-sim-rank", std::to_string(rank)}};
  if (p.stream)
    ex->begin_stream(200, "text/event-stream", headers);
  auto st = e_.generate([&ex] { return ex->gone(); }, rank, std::move(p.req),
                        [&](std::vector<token_output>& outs) {
                          std::vector<uint32_t> fresh;
                          for (const auto& o : outs) {
                            if (o.has_token)
                              fresh.push_back(o.token);
                            cached = std::max(cached, o.cached_tokens);
                            if (o.finished != finish_reason::none)
                              finish = finish_name(o.finished);
                          }
                          ids.insert(ids.end(), fresh.begin(), fresh.end());
                          if (!p.stream || (fresh.empty() && !finish))
                            return true;
                          auto ev = head();
                          ev["choices"] =
                            json::array({choice(p, text_of(tok_.get(), fresh),
                                                finish, /*delta=*/true)});
                          if (finish)
                            ev["usage"] = usage();
                          return ex->send("data: " + ev.dump() + "\n\n");
                        });
  if (p.stream) {
    if (!st.ok())
      ex->send("data: " + error(500, st.error_message()).body + "\n\n");
    ex->send("data: [DONE]\n\n");
    return ex->end();
  }
  if (!st.ok())
    return ex->respond(
      error(st.error_code() == grpc::StatusCode::UNAVAILABLE ? 503 : 500,
            st.error_message()));
  auto out = head();
  out["choices"] = json::array(
    {choice(p, text_of(tok_.get(), ids), finish ? finish : "length", false)});
  out["usage"] = usage();
  runtime::http_response r;
  r.content_type = "application/json";
  r.body = out.dump();
  r.headers = headers;
  ex->respond(std::move(r));
}

} // namespace outrider::sim
