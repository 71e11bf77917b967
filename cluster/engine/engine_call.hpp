#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "cluster/engine/vocabulary.hpp"
#include "openengine.pb.h"

namespace outrider::engine {

/// Where an asynchronous engine call reports, on gRPC's callback threads,
/// one call at a time and in order.
class generate_sink {
 public:
  virtual ~generate_sink() = default;
  /// One OpenEngine response and the number of new tokens in it. Reading
  /// goes on at once: the call never waits for the sink.
  virtual void on_response(openengine::v1::GenerateResponse&& r,
                           uint32_t tokens) = 0;
  /// The last call: how the engine call ended.
  virtual void on_done(const grpc::Status& st) = 0;
};

/// Where and how urgently a call runs, as numbers: each dialect writes them
/// its own way (OpenEngine metadata, vLLM's header and body field, SGLang's
/// body field).
struct call_target {
  std::optional<uint32_t> dp_rank;
  std::optional<int32_t> priority; // vLLM takes it; SGLang drops it
  /// Other `openengine-*` metadata, passed on to OpenEngine engines.
  std::vector<std::pair<std::string, std::string>> passthrough;
  /// Routers this call already passed (`x-outrider-hops`), sent on in
  /// every dialect: a router refuses a call that already passed one, so a
  /// worker record that names a router (itself, or one whose records name
  /// it back) ends in one refused hop, not a chain of nested calls.
  uint32_t hops = 0;
  /// W3C trace context (`traceparent`, `tracestate`), sent on in every
  /// dialect: engines that trace join the caller's trace (vLLM's request
  /// has no trace field; metadata is all it gets). As received, unchecked:
  /// whoever starts a span under it parses it (cluster/trace).
  std::string traceparent;
  std::string tracestate;
  /// The worker meant, when the call goes to a relay (`worker_key`); empty
  /// for an engine. Never read from a call's metadata: a relay checks it
  /// and does not pass it on.
  std::string worker;
};

/// The metadata key of `call_target::hops`.
inline constexpr const char* hops_key = "x-outrider-hops";
/// The metadata key naming the worker a router means when it calls a
/// sidecar's relay (the worker id of the record it read the relay from): a
/// relay serving another worker refuses the call with FAILED_PRECONDITION,
/// so a stale or crossed record never has one worker's events or requests
/// taken for another's. Relays read it; engines are never sent it.
inline constexpr const char* worker_key = "x-outrider-worker";

/// The target of a call that arrived with `metadata` (its `openengine-*`
/// pairs and `x-outrider-hops`; others are ignored). A rank that is not a
/// base-10 uint32, a priority that is not an int32, or a key given twice is
/// refused with
/// `*why` (INVALID_ARGUMENT, as OpenEngine asks), never read as 0.
std::optional<call_target> call_target_from(
  const std::vector<std::pair<std::string, std::string>>& metadata,
  std::string* why);
/// The same, read from a server call's client metadata.
std::optional<call_target>
call_target_of_call(const std::multimap<grpc::string_ref, grpc::string_ref>& md,
                    std::string* why);

/// Starts `Generate` on an engine speaking `d`, on gRPC's callback API (no
/// thread per stream): passed through to OpenEngine engines, translated for
/// vLLM and SGLang engines. `ctx` and `sink` must live until
/// `sink.on_done`; cancel with `ctx.TryCancel()`.
void start_generate(const std::shared_ptr<grpc::Channel>& ch, dialect d,
                    const openengine::v1::GenerateRequest& req,
                    const call_target& target, grpc::ClientContext& ctx,
                    generate_sink& sink);

/// The stream ended because its connection broke (the engine or its sidecar
/// died), not because the request was refused: UNAVAILABLE, or UNKNOWN /
/// INTERNAL carrying the OS error, which gRPC 1.51 sometimes reports
/// instead (grpc/grpc#36043 shows UNKNOWN with grpc_status 14 inside).
bool transport_broke(const grpc::Status& st);

} // namespace outrider::engine
