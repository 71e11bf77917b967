#pragma once

// vLLM's Generate stream as OpenEngine events: one translator per request.

#include <functional>

#include "openengine.pb.h"
#include "vllm.pb.h"

namespace outrider::engine {

vllm::GenerateRequest to_vllm(const openengine::v1::GenerateRequest& in);

/// Turns each vLLM response into OpenEngine `prompt` (first), `token` and
/// `finished` events, handed to `emit` with their new-token counts; `emit`
/// returning false stops the rest of this response.
class vllm_translator {
 public:
  using emit_fn =
    std::function<bool(openengine::v1::GenerateResponse&&, uint32_t)>;
  explicit vllm_translator(std::string request_id)
    : id_(std::move(request_id)) {}
  bool translate(const vllm::GenerateResponse& resp, const emit_fn& emit);

 private:
  std::string id_;
  bool first_ = true;
  uint32_t prompt_tokens_ = 0;
};

} // namespace outrider::engine
