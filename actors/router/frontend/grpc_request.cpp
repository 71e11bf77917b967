// The gRPC frontend's request checks and outcome statuses.
#include "actors/router/frontend/grpc_request.hpp"

#include <algorithm>

namespace outrider::router {

using grpc::Status;
using grpc::StatusCode;
namespace oe = openengine::v1;

StatusCode code_for(outcome_kind k) {
  switch (k) {
  case outcome_kind::ok:
    return StatusCode::OK;
  case outcome_kind::refused:
    return StatusCode::INVALID_ARGUMENT;
  case outcome_kind::cancelled:
    return StatusCode::CANCELLED;
  case outcome_kind::no_worker:
  case outcome_kind::shutting_down:
    return StatusCode::UNAVAILABLE;
  case outcome_kind::overloaded:
  case outcome_kind::shed:
    return StatusCode::RESOURCE_EXHAUSTED;
  case outcome_kind::timed_out:
    return StatusCode::DEADLINE_EXCEEDED;
  case outcome_kind::failed:
    return StatusCode::INTERNAL;
  }
  return StatusCode::INTERNAL;
}

Status check_generate(const oe::GenerateRequest& in,
                      const std::vector<std::string>& models) {
  if (in.has_prompt())
    return {StatusCode::INVALID_ARGUMENT,
            "text prompts need a tokenizer; send token_ids"};
  if (in.token_ids().ids_size() == 0)
    return {StatusCode::INVALID_ARGUMENT, "the prompt is empty"};
  if (!in.model().empty() && !models.empty() &&
      std::find(models.begin(), models.end(), in.model()) == models.end())
    return {StatusCode::NOT_FOUND,
            "the model '" + in.model() + "' is not served"};
  const auto& stop = in.stopping();
  if (stop.has_max_tokens() && stop.max_tokens() == 0)
    return {StatusCode::INVALID_ARGUMENT, "max_tokens must be at least 1"};
  if (in.media_size() > static_cast<int>(generate_params::max_media))
    return {StatusCode::INVALID_ARGUMENT,
            "more than " + std::to_string(generate_params::max_media) +
              " media items"};
  for (const auto& m : in.media())
    if (m.url().empty() || m.uuid().size() > generate_params::max_uuid_bytes ||
        m.offset() > static_cast<uint64_t>(in.token_ids().ids_size()))
      return {StatusCode::INVALID_ARGUMENT,
              "a media item needs a url, a uuid of at most " +
                std::to_string(generate_params::max_uuid_bytes) +
                " bytes and an offset within the prompt"};
  return Status::OK;
}

} // namespace outrider::router
