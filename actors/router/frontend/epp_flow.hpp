#pragma once

// What one gateway request's ext_proc stream and the asynchronous work for
// it (parse, tokenize, placement) share; internal to frontend/epp_*.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/router/frontend/epp_state.hpp"
#include "envoy/service/ext_proc/v3/external_processor.pb.h"

namespace outrider::router {

/// Everything below is guarded by `mtx`. The stream's reactor goes when
/// gRPC is done with it (`writer` turns null); work finishing later finds
/// it gone and only gives its bookings back.
struct epp_flow {
  using response = envoy::service::ext_proc::v3::ProcessingResponse;

  /// The stream's side: starts the next write of `out`, or finishes once
  /// nothing is left to say. Called with the lock held; releases it.
  class writer {
   public:
    virtual void settle(std::unique_lock<std::mutex>& lk) = 0;

   protected:
    ~writer() = default;
  };

  std::shared_ptr<epp_server::state> st;
  std::mutex mtx;
  writer* reactor = nullptr;
  std::deque<response> out; // answers not yet written, in order
  bool writing = false;
  bool reading = true;
  bool broken = false;
  bool finished = false;
  // The request being picked for.
  std::map<std::string, std::string> headers;
  std::optional<std::vector<std::string>> subset;
  std::string body;
  // Answers owed once the endpoint is known: the headers' (streamed, or a
  // request without a body) and the last body chunk's.
  bool headers_owed = false;
  bool body_owed = false;
  // Streamed: answers to earlier chunks, held until the headers' answer
  // has gone (answers go in the order of what they answer).
  size_t chunks_owed = 0;
  bool picking = false; // parse or placement in progress
  std::optional<uint64_t> booking;
  std::optional<uint64_t> prefill_booking; // P/D: the prefill worker's
  bool prefilled = false;
  std::string picked;

  void send(response r) { out.push_back(std::move(r)); }
  /// An immediate answer instead of the request (nothing is owed after
  /// it), counted by `outcome`.
  void refuse(const runtime::http_response& r, const std::string& outcome);
  /// The prefill worker's part is over once the decode worker answers.
  void release_prefill();
  void release_booking();
};

/// A body chunk's plain answer (continue, unchanged).
epp_flow::response body_continue();

/// The request is whole: parses and tokenizes it on the pool, places it,
/// and queues the answers owed (then asks the writer to settle). Called
/// with the lock held; the caller settles after.
void start_pick(const std::shared_ptr<epp_flow>& flow);

} // namespace outrider::router
