#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/indexer/kv_batch.hpp"
#include "actors/indexer/local_index.hpp"
#include "cluster/kv/kv_event.hpp"

namespace outrider::indexer {

using apply_atom = caf::atom_constant<caf::atom("apply")>;
using resync_atom = caf::atom_constant<caf::atom("resync")>;
using instance_atom = caf::atom_constant<caf::atom("instance")>;
using next_seq_atom = caf::atom_constant<caf::atom("nextseq")>;
using reset_rank_atom = caf::atom_constant<caf::atom("resetrank")>;
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;
using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;
/// To itself: try the store again after a failed write.
using retry_store_atom = caf::atom_constant<caf::atom("retrystor")>;

/// Runs on the indexer's thread with one snapshot batch per rank (every
/// block as a store, parents first; `seq` = the rank's last applied batch),
/// so a subscriber can be registered with no batch missed or repeated.
using snapshot_callback =
  std::function<void(std::vector<std::shared_ptr<const kv_batch>>)>;

/// The sidecar's durable KV index.
/// - `(apply, batch)`: applies a batch if it is the rank's next sequence
///   (written to RocksDB first, then to the listener); otherwise answers the
///   sender `(resync, rank, expected_seq)`.
/// - `(instance, id)`: true when `id` is the instance the index belongs to;
///   otherwise the index is reset for it (listener told: all cleared).
/// - `(nextseq, rank)`: the next sequence number the rank expects.
/// - `(resetrank, rank, next_seq)`: forgets a rank (history lost).
/// - `(blocks)`: total indexed blocks.
/// - `(snapshot)`: the whole index as JSON (operators, tests).
/// - `(subscribe, callback)`: calls `callback` with a snapshot (see above).
/// - `(retrystor, rank)`: to itself, after a failed write (see on_store).
using indexer_actor = caf::typed_actor<
  caf::reacts_to<apply_atom, std::shared_ptr<const kv_batch>>,
  caf::replies_to<instance_atom, std::string>::with<bool>,
  caf::replies_to<next_seq_atom, int32_t>::with<uint64_t>,
  caf::reacts_to<reset_rank_atom, int32_t, uint64_t>,
  caf::replies_to<snapshot_atom>::with<std::string>,
  caf::replies_to<subscribe_atom, snapshot_callback>::with<bool>,
  caf::reacts_to<retry_store_atom, int32_t>>;

struct indexer_config {
  std::string data_dir;
  /// The most blocks a rank keeps per offload tier, oldest evicted first
  /// (`tier_bound`; `--kv-slot-cap`).
  size_t tier_cap = size_t{1} << 20;
  /// Told when the store stops writing (false, why) and writes again
  /// (true): the lifecycle withdraws the worker meanwhile. May be empty.
  std::function<void(bool, std::string)> on_store;
  std::shared_ptr<kv_listener> listener; // may be null
};

/// Spawns the indexer. Fails (exits with an error) when the store cannot be
/// opened.
indexer_actor spawn_indexer(caf::actor_system& sys, indexer_config cfg);

} // namespace outrider::indexer

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(
  std::shared_ptr<const outrider::indexer::kv_batch>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(outrider::indexer::snapshot_callback)
