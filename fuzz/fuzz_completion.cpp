// Any bytes as a /v1/completions and as a /v1/chat/completions body: a
// request, or an error response with a status between 400 and 499, never a
// crash (deep JSON, bad UTF-8, odd messages).
#include <cstddef>
#include <cstdint>
#include <string>

#include "actors/router/frontend/openai_api.hpp"
#include "actors/router/frontend/openai_chat.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace outrider::router;
  std::string body{reinterpret_cast<const char*>(data), size};
  api_limits lim;
  lim.max_prompt_tokens = 4096;
  for (bool text : {false, true}) {
    completion_request out;
    auto bad = parse_completion(body, {"sim-model"}, lim, text, out);
    if (bad && (bad->status < 400 || bad->status > 499))
      __builtin_trap();
    if (!bad && out.params.prompt.empty() && !out.prompt_text)
      __builtin_trap(); // an accepted request has a prompt
    if (!bad && out.prompt_text && !text)
      __builtin_trap(); // no text prompt without a tokenizer
  }
  completion_request chat;
  auto bad = parse_chat(body, {"sim-model"}, lim, chat);
  if (bad && (bad->status < 400 || bad->status > 499))
    __builtin_trap();
  if (!bad && (!chat.chat || chat.chat_vars.empty()))
    __builtin_trap(); // an accepted chat carries its template variables
  return 0;
}
