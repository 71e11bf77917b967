#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/router/core/migration.hpp"
#include "runtime/http/types.hpp"

namespace outrider::router {

class request_trace; // request_trace.hpp

/// What the frontend accepts of a request, before any engine sees it.
struct api_limits {
  size_t json_depth = 8; // the API itself needs 3
  size_t max_prompt_tokens = 1'000'000;
  /// What a chat's image part becomes in the text the template sees (the
  /// model's image token; `--chat-media-placeholder`).
  std::string media_placeholder = "<|image_pad|>";
};

/// The longest `cache_salt` accepted.
inline constexpr size_t max_cache_salt_bytes = 1024;

struct completion_request {
  generate_params params;
  bool stream = false;
  std::string model;
  /// A text prompt, tokenized later (off the I/O thread).
  std::optional<std::string> prompt_text;
  /// `stop`: the text ends just before the first of these.
  std::vector<std::string> stop;
  /// /v1/chat/completions: the chat template's variables (JSON), rendered
  /// and tokenized later (off the I/O thread).
  bool chat = false;
  std::string chat_vars;
  /// Its span (the frontend's; null when untraced by construction).
  std::shared_ptr<request_trace> trace;
};

/// Validates an OpenAI `/v1/completions` body (token-id prompts, or a text
/// prompt when `text` — there is a tokenizer); the error response when it
/// is bad. `models`: the names to accept (empty: any).
std::optional<runtime::http_response>
parse_completion(const std::string& body,
                 const std::vector<std::string>& models, const api_limits& lim,
                 bool text, completion_request& out);

/// The text of tokens when there is no tokenizer: their ids, space
/// separated.
std::string ids_as_text(const std::vector<uint32_t>& tokens);

/// An OpenAI error body; counts it by `code` in
/// `outrider_http_errors_total`.
runtime::http_response
api_error(int status, const std::string& message, const std::string& code,
          const std::string& type = "invalid_request_error");

/// Turned away by flow control: come back later (429 with Retry-After),
/// the reason in `x-outrider-dropped-reason` (saturated, ttl-expired); "no
/// worker" stays 503.
runtime::http_response shed_response(shed_reason reason,
                                     const std::string& why);

/// `GET /v1/models`.
runtime::http_response models_response(const std::vector<std::string>& models);

/// A whole (non-streamed) completion.
runtime::http_response completion_response(const std::string& id,
                                           const std::string& model,
                                           const generate_outcome& o,
                                           const std::string& text);

/// One server-sent event of a streamed completion (`data: ...\n\n`);
/// `last` (its finish reason and usage) only on the last one.
std::string completion_event(const std::string& id, int64_t created,
                             const std::string& model,
                             const std::vector<uint32_t>& tokens,
                             const std::string& text,
                             const generate_outcome* last = nullptr);

/// The per-token events of one stream, fast: the same JSON as
/// `completion_event` without finish or usage, formatted by appending to a
/// prefix escaped once per stream (a JSON tree per token cost more than
/// the rest of the router's path).
class token_event_writer {
 public:
  token_event_writer(const std::string& id, int64_t created,
                     const std::string& model);
  /// `text`: the chunk's text (nullptr: the ids, no tokenizer).
  std::string operator()(const std::vector<uint32_t>& tokens,
                         const std::string* text = nullptr) const;

 private:
  std::string prefix_; // up to the text's opening quote
};

/// The event that ends a failed stream.
std::string error_event(const std::string& message);

std::string completion_id();
int64_t now_seconds();

} // namespace outrider::router
