#pragma once

// SGLang's Generate stream (proto/sglang.proto) as OpenEngine events: one
// translator per request. Output ids come incrementally
// (--incremental-streaming-output) or cumulatively (every message carries
// all so far: what was passed on is sliced off); meta_info values are JSON
// strings (prompt_tokens, cached_tokens, and on the last message
// finish_reason as {"type": ...}).

#include <functional>
#include <optional>
#include <string>

#include "openengine.pb.h"
#include "sglang.pb.h"

namespace outrider::engine {

/// The request for SGLang: input ids, sampling and stop parameters, the
/// rid (the OpenEngine request id) and the DP rank (`rank` >= 0: in the
/// body as routed_dp_rank).
sglang::runtime::v1::GenerateRequest
to_sglang(const openengine::v1::GenerateRequest& in, int rank);

/// The transfer backend of the KV sessions the router makes for SGLang's
/// bootstrap handoff: session_id is the room (a non-negative int64 in
/// decimal), the one endpoint the prefill engine's bootstrap server.
inline constexpr const char* sglang_bootstrap_backend = "sglang-bootstrap";

/// The disaggregated_params a KV session stands for; nullopt when it is not
/// an SGLang bootstrap session or is malformed.
std::optional<sglang::runtime::v1::DisaggregatedParams>
bootstrap_params(const openengine::v1::KvSessionRef& s);

/// The KV session for a bootstrap room on a prefill engine's bootstrap
/// server `endpoint` (host:port).
openengine::v1::KvSessionRef
bootstrap_session(int64_t room, const std::string& endpoint, int prefill_rank);

class sglang_translator {
 public:
  using emit_fn =
    std::function<bool(openengine::v1::GenerateResponse&&, uint32_t)>;
  sglang_translator(std::string request_id, bool cumulative)
    : id_(std::move(request_id)), cumulative_(cumulative) {}
  /// False when `emit` asked to stop or the response is malformed (a
  /// cumulative list that shrank, a finish_reason that is not JSON).
  bool translate(const sglang::runtime::v1::GenerateResponse& resp,
                 const emit_fn& emit);

 private:
  std::string id_;
  bool cumulative_;
  bool first_ = true;
  uint32_t prompt_tokens_ = 0, cached_tokens_ = 0;
  uint32_t sent_ = 0; // output ids passed on
};

} // namespace outrider::engine
