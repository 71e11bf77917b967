#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "actors/router/core/disagg_policy.hpp"
#include "actors/router/core/flow_queue.hpp"
#include "cluster/trace/tracer.hpp"
#include "runtime/live_value.hpp"
#include "runtime/metrics.hpp"

namespace grpc {
class ChannelCredentials;
} // namespace grpc

namespace outrider::router {

/// How the dispatcher sends requests; given whole at construction.
struct dispatch_config {
  /// Times a broken stream moves to another worker.
  int migration_limit = 3;
  /// Conditional disaggregation; null: every worker prefills its own. Its
  /// thresholds may be replaced live (SIGHUP); whether it is on may not.
  runtime::live_ptr<disagg_config> disagg;
  /// The router's queue threshold (the prefill-load policy's default).
  std::optional<double> queue_threshold;
  /// `--dispatch direct`: straight to the engines, not through the relays.
  bool direct = false;
  /// `--dispatch mux` (the default): through the relays, every request to
  /// one relay on one multiplexed stream (proto/relay_mux.proto).
  bool relay_mux = true;
  /// Every engine call of a request ends by this long after it began.
  std::chrono::milliseconds request_timeout{std::chrono::minutes{30}};
  /// How calls to the sidecars' relays are secured (--tls-*; null:
  /// plaintext); engines are spoken to in plaintext.
  std::shared_ptr<grpc::ChannelCredentials> relay_credentials;
  std::string relay_server_name; // --tls-server-name
  /// Flow control of the queue (while every worker is busy): the cap of a
  /// priority band and the round-robin quantum (--flow-band-cap,
  /// --flow-quantum), and how long a request may wait (--queue-timeout).
  flow_config flow;
  std::chrono::milliseconds queue_timeout{std::chrono::seconds{60}};
  /// Spans of each request's placement, attempts and prefill leg, under
  /// the frontend's span (`generate_params::traceparent`); never null.
  std::shared_ptr<trace::tracer> tracer = trace::tracer::make({});
};

/// The dispatcher's metric handles, built once.
struct dispatch_stats {
  runtime::histogram* ttft = nullptr;
  runtime::histogram* itl = nullptr;
  runtime::histogram* overhead = nullptr;
  runtime::counter* migrations = nullptr;
  runtime::gauge* queue_depth = nullptr;
  runtime::gauge* in_flight = nullptr;
  runtime::counter* decode_load_engine = nullptr;
  runtime::counter* decode_load_books = nullptr;
  std::map<std::string, runtime::counter*> disagg_outcomes;
  runtime::counter& disagg(const std::string& outcome) {
    return *disagg_outcomes.at(outcome);
  }
  static dispatch_stats make();
};

} // namespace outrider::router
