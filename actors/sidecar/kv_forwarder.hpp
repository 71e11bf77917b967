#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <caf/all.hpp>

#include "actors/indexer/indexer_actor.hpp"
#include "cluster/engine/engine_adapter.hpp"
#include "cluster/kv/kv_decoder.hpp"
#include "cluster/trace/tracer.hpp"
#include "runtime/actor_slot.hpp"

namespace zmq {
class context_t;
}

namespace outrider::sidecar {

using poll_atom = caf::atom_constant<caf::atom("poll")>;
using caught_up_atom = caf::atom_constant<caf::atom("caughtup")>;
using kv_gap_atom = caf::atom_constant<caf::atom("kvgap")>;

/// One rank's KV forwarder: a ZMQ SUB on the engine's live socket and a
/// DEALER for replays. It replays from the index's next sequence first,
/// then follows the live stream, replaying whatever a gap skipped; history
/// the engine no longer has resets the rank. Decoded batches go to the
/// indexer in sequence. Runs detached (its sockets belong to its thread).
/// Tells `parent` `(caughtup, rank)` after the first replay and
/// `(kvgap, rank)` when history was lost.
using kv_forwarder_actor =
  caf::typed_actor<caf::reacts_to<poll_atom>,
                   caf::reacts_to<indexer::resync_atom, int32_t, uint64_t>>;

struct forwarder_config {
  engine::kv_source source;
  uint64_t next_seq = 0;
  caf::actor parent;
  runtime::slot_ptr<indexer::indexer_actor> indexer;
  int64_t max_message_bytes = 16 << 20; // ZeroMQ's maxmsgsize
  size_t max_batch_events = kv::default_max_batch_events;
  std::shared_ptr<zmq::context_t> zmq;
  /// A rank reset (history lost) is a span of its own; never null.
  std::shared_ptr<trace::tracer> tracer = trace::tracer::make({});
};

kv_forwarder_actor spawn_kv_forwarder(caf::actor_system& sys,
                                      forwarder_config cfg);

} // namespace outrider::sidecar
