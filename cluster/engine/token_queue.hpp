#pragma once

// The outgoing queue of one OpenEngine stream (the relay, the router's gRPC
// frontend): a token event that arrives while earlier ones wait is merged
// into the last waiting one (OpenEngine
// `TokenOutput.tokens` is repeated), so a slow reader costs one message per
// write, not one per token. Other events keep their place and order.

#include <deque>

#include "openengine.pb.h"

namespace outrider::engine {

/// Moves `r`'s tokens onto `last` when both are token events of one
/// output; false (nothing moved) otherwise.
inline bool merge_tokens(openengine::v1::GenerateResponse& last,
                         openengine::v1::GenerateResponse& r) {
  if (!r.has_token() || !last.has_token() ||
      last.token().output_index() != r.token().output_index())
    return false;
  auto* into = last.mutable_token()->mutable_tokens();
  for (auto& t : *r.mutable_token()->mutable_tokens())
    into->Add(std::move(t));
  return true;
}

inline void enqueue_coalesced(std::deque<openengine::v1::GenerateResponse>& q,
                              openengine::v1::GenerateResponse&& r) {
  if (q.empty() || !merge_tokens(q.back(), r))
    q.push_back(std::move(r));
}

} // namespace outrider::engine
