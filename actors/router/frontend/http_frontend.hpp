#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/router/dispatch/dispatcher.hpp"
#include "actors/router/frontend/openai_api.hpp"
#include "actors/router/frontend/openai_chat.hpp"
#include "actors/router/frontend/prompt_render.hpp"
#include "actors/router/frontend/request_trace.hpp"
#include "cluster/text/chat_template.hpp"
#include "cluster/text/tokenizer.hpp"
#include "cluster/trace/tracer.hpp"
#include "runtime/http/server.hpp"
#include "runtime/worker_pool.hpp"

namespace outrider::router {

struct frontend_config {
  runtime::http_limits http;
  api_limits api;
  /// Requests generating at once (none holds a thread: the dispatcher is
  /// asynchronous); beyond it: 429 with Retry-After.
  size_t max_in_flight = 10000;
  /// --http-tls: the certificate chain, key and (mutual TLS) CA, as PEM.
  struct tls_pem {
    std::string cert, key, ca;
  };
  std::optional<tls_pem> tls;
  /// --tokenizer: text prompts, stop strings and text out (none: token ids
  /// only, and the text of a completion is its ids).
  std::shared_ptr<const text::tokenizer> tokenizer;
  /// Whether a requested model is a LoRA adapter the workers serve: its
  /// requests go to those workers, keyed by the adapter (empty: none is).
  std::function<bool(const std::string&)> is_adapter;
  /// The model's chat template (/v1/chat/completions), or why there is
  /// none.
  std::shared_ptr<const text::chat_template> chat_template;
  std::string chat_template_error;
  /// Threads that tokenize prompts (never the I/O threads).
  size_t tokenizer_threads = 2;
  /// Flow control: the priority of each x-gateway-inference-objective name
  /// (--flow-objectives).
  std::map<std::string, int> objectives;
  /// Session affinity: the header naming a session (lower-case).
  std::string session_header = "x-session-id";
  /// Each request's span (`router.request`, under the client's
  /// `traceparent`) and its tokenizing; never null.
  std::shared_ptr<trace::tracer> tracer = trace::tracer::make({});
};

/// The OpenAI-compatible HTTP frontend on the asynchronous HTTP server:
/// `POST /v1/completions` with token-id prompts, or text prompts with a
/// tokenizer (tokenized on a pool of their own; text streamed back, stop
/// strings), streaming as server-sent events ending in `data: [DONE]`;
/// `GET /v1/models`. A client that goes away, streaming or not, cancels
/// its request on the engine.
class http_frontend {
 public:
  /// `models`: the names to list and accept (empty: accept any).
  http_frontend(dispatcher& d, std::function<std::vector<std::string>()> models,
                frontend_config cfg = {});
  ~http_frontend();

  caf::error start(const std::string& host, uint16_t port);
  uint16_t port() const { return server_.port(); }
  /// --http-tls: a reloaded certificate (PEM contents) for new
  /// connections; those open keep theirs. On an error nothing changes.
  caf::error reload_tls(const std::string& cert, const std::string& key,
                        const std::string& ca) {
    return server_.use_tls(cert, key, ca);
  }

  /// Shutdown, first step: new requests get 503 (and the connection
  /// closes); requests in flight go on.
  void drain();
  /// Waits up to `grace` for the requests in flight, then ends the rest
  /// with an error (their engine requests are cancelled) and closes.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds{5});

  size_t in_flight() const { return in_flight_.load(); }

 private:
  void serve(std::shared_ptr<runtime::http_exchange> ex);
  /// On the tokenizer pool: the prompt's ids, then run().
  void tokenize(const std::shared_ptr<runtime::http_exchange>& ex,
                completion_request c);
  void run(std::shared_ptr<runtime::http_exchange> ex, completion_request c);
  void generate(std::shared_ptr<runtime::http_exchange> ex,
                completion_request c);
  void stream(std::shared_ptr<runtime::http_exchange> ex, completion_request c);
  /// Counts a request in flight; false (nothing counted) when full.
  bool admit();
  void finished() { in_flight_.fetch_sub(1); }
  /// False once the request should stop: client gone or cut at shutdown.
  bool wanted(const runtime::http_exchange& ex) const {
    return !ex.gone() && !cut_.load(std::memory_order_relaxed);
  }

  dispatcher& dispatcher_;
  std::function<std::vector<std::string>()> models_;
  frontend_config cfg_;
  prompt_tools tools_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> cut_{false};
  std::atomic<size_t> in_flight_{0};
  std::unique_ptr<runtime::worker_pool> tokenize_pool_;
  runtime::http_server server_;
};

} // namespace outrider::router
