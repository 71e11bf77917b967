// Any bytes as a /v1/completions body: a request, or an error response
// with a status between 400 and 499, never a crash (deep JSON, bad UTF-8).
#include <cstddef>
#include <cstdint>
#include <string>

#include "actors/router/openai_api.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace outrider::router;
  std::string body{reinterpret_cast<const char*>(data), size};
  api_limits lim;
  lim.max_prompt_tokens = 4096;
  completion_request out;
  auto bad = parse_completion(body, {"sim-model"}, lim, out);
  if (bad && (bad->status < 400 || bad->status > 499))
    __builtin_trap();
  if (!bad && out.params.prompt.empty())
    __builtin_trap(); // an accepted request has a prompt
  return 0;
}
