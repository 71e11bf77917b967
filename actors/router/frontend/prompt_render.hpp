#pragma once

// A request's text or chat prompt to token ids, the same for every
// frontend that takes OpenAI bodies (HTTP, the endpoint picker).

#include <functional>
#include <memory>
#include <optional>

#include "actors/router/frontend/openai_api.hpp"
#include "cluster/text/chat_template.hpp"
#include "cluster/text/tokenizer.hpp"
#include "runtime/http/types.hpp"

namespace outrider::router {

struct prompt_tools {
  std::shared_ptr<const text::tokenizer> tokenizer;
  std::shared_ptr<const text::chat_template> chat_template;
  api_limits api;
  std::string chat_template_error; // why there is none, with a tokenizer
  /// Whether a requested model is a LoRA adapter the workers serve.
  std::function<bool(const std::string&)> is_adapter;
};

/// Reads an OpenAI body (`chat`: /v1/chat/completions, else
/// /v1/completions) into `c`, the adapter named where the model is one;
/// the error response when it cannot be (no chat template, a bad body).
/// `models`: the names to accept (empty: any). Quick: no tokenizing.
std::optional<runtime::http_response>
read_request(const prompt_tools& t, const std::vector<std::string>& models,
             bool chat, const std::string& body, completion_request& c);

/// Renders a chat through the template (media items placed) or tokenizes
/// a text prompt into `c.params.prompt`, timing it (`c.params.preprocess`,
/// `outrider_router_tokenize_seconds`); a request with token ids is left as
/// it is. The error response when the template fails or the prompt is past
/// `max_prompt_tokens`. Slow: never on an I/O thread.
std::optional<runtime::http_response> render_prompt(const prompt_tools& t,
                                                    completion_request& c);

} // namespace outrider::router
