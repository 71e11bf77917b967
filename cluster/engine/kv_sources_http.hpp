#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cluster/engine/engine_adapter.hpp"
#include "cluster/engine/engine_info.hpp"
#include "runtime/errors.hpp"

namespace outrider::engine {

/// Reads vLLM's HTTP KV event discovery, `GET /kv_event_sources` (vLLM PR
/// #55844; docs/wire.md, "KV events: discovery"), tolerantly: the object
/// `{"sources": [...]}`, a bare list, or a map from rank to source. Each
/// source needs an `endpoint`; `replay_endpoint`, `topic` and
/// `data_parallel_rank` (else the map key, else 0) are optional; wildcard
/// hosts become `engine_host`. At most 1,024 sources, ranks below 65,536,
/// no rank twice.
caf::error parse_kv_sources_json(const std::string& body,
                                 const std::string& engine_host,
                                 std::vector<kv_source>& out);

/// Fetches and parses it from `host_port` (the engine's HTTP address)
/// within 5 s; `engine_unreachable` when no answer comes, else
/// `engine_refused` or `engine_malformed`.
caf::error fetch_kv_sources_http(const std::string& host_port,
                                 std::vector<kv_source>& out);

/// `inner`, whose KV event sources come from `host_port`'s
/// `GET /kv_event_sources` where its gRPC discovery is refused (an engine
/// whose gRPC predates `GetKvEventSources`, or one that lists nothing:
/// vLLM's gRPC or SGLang without kv_events): the HTTP answer is then the
/// truth. An unreachable gRPC engine stays unreachable (no fallback).
std::unique_ptr<engine_adapter>
with_http_kv_discovery(std::unique_ptr<engine_adapter> inner,
                       std::string host_port);

} // namespace outrider::engine
