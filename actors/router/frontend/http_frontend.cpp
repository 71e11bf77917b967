#include "actors/router/frontend/http_frontend.hpp"

#include <thread>

#include <spdlog/spdlog.h>

#include "actors/router/frontend/flow_identity.hpp"
#include "actors/router/frontend/prompt_render.hpp"
#include "cluster/text/text_stream.hpp"

namespace outrider::router {

namespace {

const std::string shutting_down = "the router is shutting down";

runtime::http_response busy(const std::string& why) {
  auto r = api_error(503, why, "overloaded", "server_error");
  r.headers["Retry-After"] = "1";
  return r;
}

// A request that did not succeed, in OpenAI's terms: the request's own
// fault is an invalid_request_error, the rest server errors; an overloaded
// engine says when to come back.
runtime::http_response failure(const generate_outcome& o) {
  switch (o.kind) {
  case outcome_kind::refused:
    return api_error(400, o.error, "engine_refused");
  case outcome_kind::overloaded:
    return busy(o.error);
  case outcome_kind::shed:
    return shed_response(o.shed, o.error);
  case outcome_kind::no_worker:
    return api_error(503, o.error, "no_worker", "server_error");
  case outcome_kind::timed_out:
    return api_error(504, o.error, "timed_out", "server_error");
  default:
    return api_error(o.http_status(), o.error, "generation_failed",
                     "server_error");
  }
}

// The text side of one request: generated ids to text, stop strings.
// Without a tokenizer the text is the ids. Its calls come one at a time
// (the token callbacks and the last one are serialised).
struct text_side {
  std::optional<text::text_stream> stream;
  std::string text; // a whole completion's, so far
  bool stopped = false;

  text_side(const std::shared_ptr<const text::tokenizer>& t,
            std::vector<std::string> stop) {
    if (t)
      stream.emplace(t, std::move(stop));
  }
  /// The text of a chunk; `kept`: its ids up to a stop string.
  std::string chunk(const std::vector<uint32_t>& ids,
                    std::vector<uint32_t>& kept) {
    if (!stream) {
      kept = ids;
      return ids_as_text(ids);
    }
    std::string out;
    for (auto id : ids) {
      if (stream->stopped())
        break;
      out += stream->push(id);
      kept.push_back(id);
    }
    stopped = stream->stopped();
    return out;
  }
  /// At the end: a stop string reached counts as a finished request.
  std::string finish(generate_outcome& o) {
    if (!stream)
      return {};
    if (stopped) {
      o.ok = true;
      o.kind = outcome_kind::ok;
      o.error.clear();
      o.finish = engine::finish_reason::stop;
      o.tokens.resize(std::min(o.tokens.size(), stream->tokens_used()));
      return {};
    }
    return stream->finish();
  }
};

// The server-sent events of one stream: completions' (text and token ids
// per chunk) or chat's (a role chunk first, then content deltas).
class sse_format {
 public:
  sse_format(bool chat, const std::string& model)
    : id_(chat ? chat_completion_id() : completion_id()),
      created_(now_seconds()), model_(model) {
    if (chat)
      chat_.emplace(id_, created_, model_);
    else
      completions_.emplace(id_, created_, model_);
  }
  std::string first() const { return chat_ ? chat_->role() : std::string{}; }
  std::string chunk(const std::vector<uint32_t>& ids, const std::string& text,
                    bool has_text) const {
    if (chat_)
      return text.empty() ? std::string{} : chat_->text(text);
    return (*completions_)(ids, has_text ? &text : nullptr);
  }
  std::string last(const std::string& rest, const generate_outcome& o) const {
    if (chat_)
      return chat_->last(rest, o);
    return completion_event(id_, created_, model_, {}, rest, &o);
  }

 private:
  std::string id_;
  int64_t created_;
  std::string model_;
  std::optional<token_event_writer> completions_;
  std::optional<chat_chunk_writer> chat_;
};

} // namespace

http_frontend::http_frontend(dispatcher& d,
                             std::function<std::vector<std::string>()> models,
                             frontend_config cfg)
  : dispatcher_(d), models_(std::move(models)),
    cfg_(cfg), tools_{cfg.tokenizer, cfg.chat_template, cfg.api,
                      cfg.chat_template_error, cfg.is_adapter},
    tokenize_pool_(std::make_unique<runtime::worker_pool>(
      std::max<size_t>(1, cfg.tokenizer_threads), 4096)),
    server_("frontend",
            runtime::http_server::async_handler{
              [this](std::shared_ptr<runtime::http_exchange> ex) {
                serve(std::move(ex));
              }},
            cfg.http) {}

http_frontend::~http_frontend() {
  stop(std::chrono::milliseconds{0});
}

caf::error http_frontend::start(const std::string& host, uint16_t port) {
  if (cfg_.tls)
    if (auto err = server_.use_tls(cfg_.tls->cert, cfg_.tls->key, cfg_.tls->ca))
      return err;
  return server_.start(host, port);
}

void http_frontend::drain() {
  draining_ = true;
}

void http_frontend::stop(std::chrono::milliseconds grace) {
  draining_ = true;
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (in_flight_.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  if (auto left = in_flight_.load(); left > 0)
    spdlog::warn("frontend: ending {} request(s) still in flight", left);
  // The rest end now, with an error event; their engine requests are
  // cancelled. Then the connections close.
  cut_ = true;
  tokenize_pool_->stop(); // what it still holds answers 503 (cut_)
  dispatcher_.cancel_all(std::chrono::milliseconds{1000});
  server_.stop(); // waits for handlers to release their exchanges
}

bool http_frontend::admit() {
  if (in_flight_.fetch_add(1) < cfg_.max_in_flight)
    return true;
  in_flight_.fetch_sub(1);
  return false;
}

// On an I/O thread: nothing here blocks (the dispatcher answers in
// callbacks).
void http_frontend::serve(std::shared_ptr<runtime::http_exchange> ex) {
  static auto& requests = runtime::global_metrics().get_counter(
    "outrider_http_requests_total", "Frontend requests", {{"path", "all"}});
  requests.inc();
  auto received = std::chrono::system_clock::now();
  const auto& req = ex->request();
  if (req.path == "/v1/models" && req.method == "GET")
    return ex->respond(models_response(models_()));
  bool chat = req.path == "/v1/chat/completions";
  if (req.path != "/v1/completions" && req.path != "/v1/models" && !chat)
    return ex->respond(api_error(404, "unknown path " + req.path, "not_found"));
  if (req.method != "POST" || req.path == "/v1/models")
    return ex->respond(
      api_error(405, "method not allowed", "method_not_allowed"));
  if (draining_.load()) {
    auto r = api_error(503, shutting_down, "shutting_down", "server_error");
    r.headers["Connection"] = "close";
    return ex->respond(std::move(r));
  }
  completion_request c;
  if (auto bad = read_request(tools_, models_(), chat, req.body, c))
    return ex->respond(std::move(*bad));
  ex->drop_body(); // what it said is in `c` now
  std::string why;
  auto who =
    flow_identity_of(req.headers, cfg_.objectives, cfg_.session_header, &why);
  if (!who)
    return ex->respond(api_error(400, why, "invalid_priority"));
  c.params.flow = std::move(who->flow);
  c.params.band = who->band;
  c.params.session = std::move(who->session);
  auto header = [&req](const char* name) {
    auto it = req.headers.find(name);
    return it == req.headers.end() ? std::string{} : it->second;
  };
  c.trace = std::make_shared<request_trace>(
    *cfg_.tracer, header("traceparent"), header("tracestate"),
    chat ? "chat.completions" : "completions", received);
  if (!admit()) {
    c.trace->refused(429, "too many requests in flight");
    return ex->respond(
      shed_response(shed_reason::saturated,
                    "too many requests in flight (--http-max-in-flight)"));
  }
  if (!c.prompt_text && !c.chat)
    return run(std::move(ex), std::move(c));
  auto trace = c.trace;
  if (!tokenize_pool_->try_run(
        [this, ex, c]() mutable { tokenize(ex, std::move(c)); })) {
    trace->refused(429, "too many prompts waiting to be tokenized");
    finished();
    ex->respond(shed_response(shed_reason::saturated,
                              "too many prompts waiting to be tokenized"));
  }
}

void http_frontend::tokenize(const std::shared_ptr<runtime::http_exchange>& ex,
                             completion_request c) {
  if (cut_.load() || ex->gone()) {
    if (!ex->gone())
      ex->respond(
        api_error(503, shutting_down, "shutting_down", "server_error"));
    return finished();
  }
  auto from = std::chrono::system_clock::now();
  auto bad = render_prompt(tools_, c);
  c.trace->tokenized(from, std::chrono::system_clock::now());
  if (bad) {
    c.trace->refused(bad->status, "the prompt was refused");
    ex->respond(std::move(*bad));
    return finished();
  }
  run(ex, std::move(c));
}

void http_frontend::run(std::shared_ptr<runtime::http_exchange> ex,
                        completion_request c) {
  c.trace->describe(c.model, c.stream, c.params.prompt.size());
  c.trace->hand_on(c.params);
  if (c.stream)
    stream(std::move(ex), std::move(c));
  else
    generate(std::move(ex), std::move(c));
}

void http_frontend::generate(std::shared_ptr<runtime::http_exchange> ex,
                             completion_request c) {
  auto* raw = ex.get();
  auto params = c.params;
  auto text = std::make_shared<text_side>(cfg_.tokenizer, c.stop);
  auto trace = c.trace;
  dispatcher_.generate(
    std::move(params),
    [this, raw, text, trace](const std::vector<uint32_t>& ids) {
      trace->token();
      std::vector<uint32_t> kept;
      text->text += text->chunk(ids, kept);
      return !text->stopped && wanted(*raw);
    },
    [this, ex, text, c = std::move(c)](generate_outcome o) {
      c.trace->finish(o);
      text->text += text->finish(o);
      if (!text->stream)
        text->text = ids_as_text(o.tokens);
      if (cut_.load())
        ex->respond(
          api_error(503, shutting_down, "shutting_down", "server_error"));
      else if (ex->gone()) {
        // nobody to answer (the engine request was cancelled)
      } else if (!o.ok)
        ex->respond(failure(o));
      else
        ex->respond(
          c.chat
            ? chat_response(chat_completion_id(), c.model, o, text->text)
            : completion_response(completion_id(), c.model, o, text->text));
      finished();
    });
}

// Server-sent events. The headers wait for the first tokens: a request that
// fails before any (no worker, refused by the engine, timed out) gets its
// HTTP status, as OpenAI's API answers, instead of a 200 and an error
// event. Then one event per chunk and [DONE]; while a write is in flight,
// events queue and go out together. The token callbacks and the last one
// come one at a time, in order, so `begun` needs no lock.
void http_frontend::stream(std::shared_ptr<runtime::http_exchange> ex,
                           completion_request c) {
  auto* raw = ex.get();
  auto params = c.params;
  auto events = std::make_shared<const sse_format>(c.chat, c.model);
  auto text = std::make_shared<text_side>(cfg_.tokenizer, c.stop);
  auto begun = std::make_shared<bool>(false);
  auto begin = [raw, begun, events] {
    if (*begun)
      return;
    *begun = true;
    raw->begin_stream(200, "text/event-stream",
                      {{"Cache-Control", "no-cache"}});
    if (auto first = events->first(); !first.empty())
      raw->send(first);
  };
  auto trace = c.trace;
  dispatcher_.generate(
    std::move(params),
    [this, raw, events, begin, text, trace](const std::vector<uint32_t>& toks) {
      if (!wanted(*raw))
        return false;
      trace->token();
      begin();
      std::vector<uint32_t> kept;
      auto chunk = text->chunk(toks, kept);
      auto ev = kept.empty()
                  ? std::string{}
                  : events->chunk(kept, chunk, text->stream.has_value());
      bool sent = ev.empty() || raw->send(ev);
      return sent && !text->stopped;
    },
    [this, ex, events, begun, begin, text, trace](generate_outcome o) {
      trace->finish(o);
      auto rest = text->finish(o);
      if (ex->gone()) {
        // nobody to answer (the engine request was cancelled)
      } else if (!*begun && (cut_.load() || !o.ok)) {
        ex->respond(cut_.load() ? api_error(503, shutting_down, "shutting_down",
                                            "server_error")
                                : failure(o));
      } else {
        begin();
        if (cut_.load())
          ex->send(error_event(shutting_down));
        else if (o.ok)
          ex->send(events->last(rest, o));
        else
          ex->send(error_event(o.error));
        ex->send("data: [DONE]\n\n");
        ex->end();
      }
      finished();
    });
}

} // namespace outrider::router
