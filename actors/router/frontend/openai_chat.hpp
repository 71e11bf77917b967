#pragma once

// OpenAI's /v1/chat/completions: the request (messages, tools, sampling,
// stop, chat_template_kwargs) and the bodies of its answers, whole and as
// chunks. The messages are rendered through the model's chat template and
// tokenized by the frontend, off the I/O threads.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/router/frontend/openai_api.hpp"

namespace outrider::router {

/// Validates a chat body into `out` (`out.chat_vars`: what the template
/// sees: messages with text parts joined, tools, add_generation_prompt,
/// chat_template_kwargs); the error response when it is bad.
std::optional<runtime::http_response>
parse_chat(const std::string& body, const std::vector<std::string>& models,
           const api_limits& lim, completion_request& out);

/// Sets each media item's offset in the rendered prompt's tokens `ids`:
/// the k-th placeholder of `text` (the rendered chat) begins at the tokens
/// the text before it shares with `ids` (tokenized alone by `encode`), so
/// a placeholder the tokenizer merges with its neighbours starts no later
/// than it really does. An item whose placeholder the template dropped
/// gets offset 0 (nothing of the prompt is matched).
void place_media(
  const std::string& text, const std::string& placeholder,
  const std::vector<uint32_t>& ids,
  const std::function<std::vector<uint32_t>(std::string_view)>& encode,
  std::vector<generate_params::media_item>& media);

/// A whole chat completion.
runtime::http_response chat_response(const std::string& id,
                                     const std::string& model,
                                     const generate_outcome& o,
                                     const std::string& text);

/// Streamed chunks: the first carries the role, the middle ones text, the
/// last the finish reason and usage.
class chat_chunk_writer {
 public:
  chat_chunk_writer(const std::string& id, int64_t created,
                    const std::string& model);
  std::string role() const;
  std::string text(const std::string& t) const;
  std::string last(const std::string& rest, const generate_outcome& o) const;

 private:
  std::string id_, model_;
  int64_t created_;
  std::string prefix_; // up to the delta's content
};

std::string chat_completion_id();

} // namespace outrider::router
