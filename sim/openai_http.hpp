#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cluster/text/chat_template.hpp"
#include "cluster/text/tokenizer.hpp"
#include "runtime/http/server.hpp"
#include "runtime/worker_pool.hpp"
#include "sim/sim_server.hpp"

namespace outrider::sim {

/// vLLM's OpenAI HTTP server beside its gRPC, one listener per
/// data-parallel rank (rank r on base port + r, as a pod's targetPorts list
/// them for a gateway): `POST /v1/completions` (token-id prompts; text with
/// `--tokenizer`) and `POST /v1/chat/completions` (with `--tokenizer`:
/// the tokenizer's chat template over `messages`), whole or streamed as
/// server-sent events ending in `data: [DONE]`; `GET /v1/models`. Usage
/// carries `prompt_tokens_details.cached_tokens` (vLLM's
/// --enable-prompt-tokens-details) and the answer the header
/// `x-sim-rank`. A request runs on a bounded pool (the engine call blocks):
/// past it, 503.
class openai_http {
 public:
  openai_http(sim_engine& e, std::shared_ptr<const text::tokenizer> tok,
              std::shared_ptr<const text::chat_template> chat);
  ~openai_http();
  /// Listens on `base_port + r` for every rank; error text or empty.
  std::string start(const std::string& host, int base_port);
  void stop();

 private:
  void serve(int rank, const std::shared_ptr<runtime::http_exchange>& ex);
  void run(int rank, const std::shared_ptr<runtime::http_exchange>& ex);

  sim_engine& e_;
  std::shared_ptr<const text::tokenizer> tok_;
  std::shared_ptr<const text::chat_template> chat_;
  runtime::worker_pool pool_{64, 1024};
  std::vector<std::unique_ptr<runtime::http_server>> servers_;
};

} // namespace outrider::sim
