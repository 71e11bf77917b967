#pragma once

#include <absl/container/btree_set.h>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "actors/indexer/key_bits.hpp"
#include "actors/indexer/tiered_index.hpp"
#include "actors/router/core/flow_queue.hpp"
#include "actors/router/core/placement_types.hpp"
#include "actors/router/core/router_config.hpp"
#include "actors/router/core/session_table.hpp"
#include "actors/router/core/worker_selector.hpp"
#include "cluster/booking_note.hpp"
#include "cluster/kv/block_hash.hpp"
#include "cluster/kv/kv_event.hpp"
#include "cluster/worker_record.hpp"

namespace outrider::router {

/// The router's placement, without actors: the worker set, the global KV
/// index, predicted blocks and load books, and the choice of a rank per
/// request (`--router-mode`). Time and randomness are injected so that
/// tests are deterministic. Single-threaded: owned by the router actor.
class placement {
 public:
  using clock = std::chrono::steady_clock;
  using clock_fn = std::function<clock::time_point()>;

  enum class join { joined, unchanged, refused_model, refused_block_size };
  /// A joining rank's GPU table is made for its share of the record's
  /// cache, at most this many blocks (4,096 slots, about 100 KB a rank).
  static constexpr uint64_t max_expected_blocks = 2048;

  placement(router_config cfg, clock_fn now, uint64_t seed);

  /// A worker's record appeared (or changed: a new instance replaces it).
  join add_worker(const cluster::worker_record& r);
  void remove_worker(const std::string& worker_id);
  /// The slot the events went to; none when the worker or rank is
  /// unknown (the events are dropped).
  std::optional<uint32_t> apply_events(const worker_events& ev);
  /// An engine's own report of its KV cache; counts for
  /// `engine_load_fresh` (ranks not in it keep what they had).
  void engine_reported(const engine_load& l);

  /// Picks a rank and books the request's load there: the lapsed
  /// predictions go (`expire_predictions`), then `decide`, then `book`.
  route_decision place(const route_request& req) {
    expire_predictions();
    return book(req, decide(req));
  }
  /// Drops the predictions lapsed by now: the pruned search reads them as
  /// bits, so a `decide` must come after it at the same time (`place`
  /// does both).
  void expire_predictions() { lapse_predictions(now_()); }

 private:
  // The search's answer: the candidates scored (placement_search.cpp).
  struct scored {
    std::vector<candidate> cands;
    std::vector<uint32_t> gpu_blocks;       // the index's GPU run, per cand
    std::vector<uint32_t> offloaded_blocks; // offloaded only, after it
  };

 public:
  /// A decision not booked yet: `ready` with a rank chosen among the
  /// candidates scored, or else busy / no worker in `d`.
  struct choice {
    route_decision d;
    bool ready = false;
    std::vector<uint64_t> seq; // the prompt's block keys
    uint32_t prompt_blocks = 0;
    scored found;
    size_t chosen = 0; // in found.cands
  };
  /// The decision proper: hashes the prompt, matches it against the index
  /// and the predictions, and selects a rank. Books nothing (the session
  /// remembers its rank, the round-robin turn and the random draws move
  /// on); `book` it before anything else changes the placement.
  choice decide(const route_request& req);
  /// Books a decision: the chosen rank's run, the blocks predicted there
  /// and its load (a choice not ready comes back as its decision).
  route_decision book(const route_request& req, choice sel);
  /// The request's prompt is computed / it is done: its booking shrinks or
  /// goes. The slot whose load changed, if any.
  std::optional<uint32_t> prefilled(uint64_t key);
  std::optional<uint32_t> release(uint64_t key);

  /// Other routers' bookings (--share-bookings): counted in their rank's
  /// load, and their prompts' blocks predicted there, as if placed here.
  /// The slot whose load changed, if any (placement_remote.cpp).
  std::optional<uint32_t> remote(const cluster::booking_note& n);
  /// Drops the bookings of routers silent since `cutoff`, and any older
  /// than cfg.remote_booking_ttl (a lost release). How many went.
  size_t expire_remote(clock::time_point cutoff);
  /// Finishes the index's table growths and moves that events left
  /// pending (flat_table::tidy), up to `budget` slots a table: the
  /// router's tick calls it, so that an index whose events stopped holds
  /// no arrays it does not use. Whether work is left.
  bool tidy(size_t budget);
  /// The prompt's block keys as this router predicts them.
  std::vector<uint64_t> sequence_of(const route_request& req) const;
  /// What local booking `key` put where, to tell the other routers.
  std::optional<cluster::booking_note> note_of(uint64_t key) const;

  /// Takes the settings of `next` that may change while running
  /// (`take_live_settings`) and re-orders the ranks by the new weights;
  /// the rest of `next` is ignored (it needs a restart: `restart_needed`).
  void retune(const router_config& next);
  const router_config& config() const { return cfg_; }

  /// Scores every eligible rank from now on (router_config::exhaustive):
  /// the reference the tests and bench/decision_bench compare against.
  void search_all(bool on) { cfg_.exhaustive = on; }

  slot_load load(uint32_t slot) const;
  /// Every live (worker, rank), by worker id and rank.
  std::vector<slot_view> view() const;
  size_t slots() const { return slots_.size(); }
  /// Workers requests can be placed on (refused ones are not counted).
  size_t workers() const { return workers_.size(); }
  size_t index_entries() const { return index_.entries(); }
  /// (rank, block) predictions held, over every rank (tests, benches).
  size_t predicted_blocks() const;
  const indexer::tiered_index& index() const { return index_; }
  /// Per live worker and rank, the engine block hashes the index holds
  /// (sorted): what two routers fed the same events must agree on.
  std::map<std::string, std::map<int, std::vector<uint64_t>>>
  held_blocks() const;

 private:
  struct slot_info {
    std::string worker_id;
    engine::worker_role role = engine::worker_role::aggregated;
    std::string endpoint;
    std::string engine_endpoint;
    std::string protocol;
    std::string bootstrap_endpoint;
    int rank = 0;
    bool alive = false;
    std::string http_endpoint; // the rank's (record's port + rank), or ""
    uint64_t prefill_tokens = 0;
    uint64_t decode_blocks = 0;
    int64_t engine_used = -1; // engine_reported
    uint64_t engine_total = 0;
    uint64_t record_total = 0;        // per rank, from the worker's record
    clock::time_point engine_until{}; // believed until then
    // This router's bookings not prefilled yet, in the order the engine
    // admits them ((priority, key) -> prefill tokens): the first is the
    // prompt the engine is computing.
    std::map<std::pair<int32_t, uint64_t>, uint64_t> unprefilled;
    // Its bookings not prefilled yet with blocks the index held when they
    // were placed (booking::covered): watched for evictions.
    std::vector<uint64_t> covering;
    // Its place in by_load_ (while alive).
    double load_key = 0;
    uint32_t tiebreak = 0;
    // Its place in by_room_ (while alive).
    uint64_t room_key = 0;
  };
  int64_t engine_used(const slot_info& s) const;
  uint64_t total_blocks(const slot_info& s) const;
  /// KV blocks no running request holds on the rank (-1: unknown).
  int64_t unheld_blocks(const slot_info& s) const;
  uint64_t free_blocks(uint32_t slot) const;
  /// Blocks the index holds on the slot and its queued prompts will store.
  uint64_t taken_blocks(uint32_t slot) const;
  /// What a cache of `total` blocks (0: unknown, unbounded) can take.
  static uint64_t room_in(uint64_t total, uint64_t taken);
  /// Every candidate is past the queue threshold or its KV share.
  bool all_busy(const std::vector<candidate>& cands,
                const route_request& req) const;
  struct booking {
    uint32_t slot = 0;
    uint64_t prefill_tokens = 0;
    uint64_t decode_blocks = 0;
    int32_t priority = 0;
    bool prefilled = false;
    std::vector<uint64_t> pending; // its blocks counted as pending
    // Its blocks the index held there when it was placed: not predicted
    // (the index has them), unless evicted before it is prefilled (the
    // engine computes them again for it).
    std::vector<uint64_t> covered;
  };

  // The search for candidates (placement_search.cpp): every eligible
  // rank, or only those that can have the lowest cost.
  bool eligible(uint32_t slot, const route_request& req) const;
  bool busy(const candidate& c, const route_request& req) const;
  bool prunable() const;
  std::vector<candidate> candidates(const route_request& req) const;
  scored score_all(const route_request& req, const std::vector<uint64_t>& seq);
  scored score_pruned(const route_request& req,
                      const std::vector<uint64_t>& seq, uint32_t prompt_blocks);
  /// The overlap (index or predicted) and offload credit of a candidate.
  void fill(candidate& c, uint32_t gpu_blocks,
            const indexer::tiered_overlap* offloaded,
            const std::vector<uint64_t>& seq, clock::time_point now) const;
  /// How many leading blocks of `seq` the index holds on the slot's GPU.
  uint32_t index_run(uint32_t slot, const std::vector<uint64_t>& seq) const;
  /// Per block of `seq`, whether the index holds it on the slot's GPU, in
  /// `held_`: one walk down the prompt for the chosen rank, read for its
  /// run and its booking's covered blocks alike. Returns the run.
  uint32_t walk_held(uint32_t slot, const std::vector<uint64_t>& seq);
  static constexpr uint32_t unknown_run = UINT32_MAX;
  /// How many blocks ahead a walk down the prompt asks for the index's
  /// table slots (each lookup a cache miss in an index of fleet size).
  static constexpr size_t walk_ahead = indexer::prefix_index::walk_ahead;
  /// Keeps by_load_ and by_room_ in step with the slot's books (and
  /// whether it lives).
  void reorder(uint32_t slot);
  /// The most free blocks the slot can have until its books, its index or
  /// its engine's report change: free_blocks' with either total it may
  /// take (an engine's report lapses with time alone).
  uint64_t room_bound(uint32_t slot) const;
  /// Keeps by_room_ in step with the slot.
  void reroom(uint32_t slot);
  /// The bits of predictions lapsed by `now` go.
  void lapse_predictions(clock::time_point now);
  selector_config selector() const; // with the workers' block size
  size_t choose(const std::vector<candidate>& cands, uint32_t prompt_blocks);
  /// The session's worker instead of `pick`, as its mode allows; records
  /// where the session goes.
  size_t follow_session(const std::vector<candidate>& cands,
                        uint32_t prompt_blocks, size_t pick,
                        const route_request& req, route_decision& d);
  void explain(route_decision& d, const std::vector<candidate>& cands,
               size_t chosen, uint32_t prompt_blocks) const;
  /// Books the prompt's blocks on the booking's slot: those `held_` marks
  /// as covered, the others as predicted (walk_held first).
  void predict(uint64_t key, booking& b, const std::vector<uint64_t>& seq);
  /// Counts `h` as pending on the booking's slot.
  void predict_one(booking& b, uint64_t h);
  /// Predicts the covered blocks of the slot's unprefilled bookings that
  /// a batch (`touched`: the keys it stored or removed) or a reset took
  /// from the index there.
  void uncover(uint32_t slot, const std::vector<uint64_t>& touched, bool reset);
  void settle(uint64_t key, booking& b);
  bool predicted(uint32_t slot, uint64_t hash, clock::time_point now) const;
  std::optional<uint32_t> unbook(uint64_t key, bool finished);

  router_config cfg_;
  clock_fn now_;
  std::mt19937_64 rng_;
  uint32_t block_size_ = 0; // the first worker's; others must match
  indexer::tiered_index index_;
  session_table sessions_;
  std::map<std::string, cluster::worker_record> workers_;
  std::map<std::string, std::vector<uint32_t>> worker_slots_;
  std::vector<slot_info> slots_;
  // Blocks a rank will hold once the requests just routed there are
  // prefilled: counted before their events arrive, so that a burst sharing
  // a prefix is not scattered. Entries expire.
  // A block stays predicted while a request routed there with it has not
  // been prefilled (`pending`: how many such requests), then for
  // prediction_ttl more (`until`), or until its KV event has arrived.
  struct prediction {
    uint32_t pending = 0;
    // The index stored the block on this rank while requests computing
    // it were pending: once none is, the prediction has nothing left to
    // stand for (it goes then, not after the TTL).
    bool indexed = false;
    clock::time_point until{};
  };
  std::vector<indexer::flat_table<prediction>> predictions_;
  std::unordered_map<uint64_t, booking> bookings_;
  // Live slots ordered by the load part of their cost (queued prefill and
  // held decode, weighted), then a tie-break drawn at each change: the
  // pruned search walks it from the least loaded. A B-tree (Abseil's):
  // every booking and release moves its rank, and at fleet size a
  // red-black tree's node-per-rank walk was an eighth of a decision.
  absl::btree_set<std::tuple<double, uint32_t, uint32_t>> by_load_;
  // Live slots by room_bound, the roomiest first: past the few with the
  // most room, a bound on every other rank's free blocks, so that the
  // pruned search can bound what a prompt evicts where caches are full
  // (without it, a fleet of full caches was scored rank by rank: 6.6 ms a
  // decision at 10,000 workers, docs/benchmarks.md).
  absl::btree_set<std::pair<uint64_t, uint32_t>, std::greater<>> by_room_;
  std::mt19937 tie_rng_;
  // The predicted blocks again, as bits per key (the pruned search ANDs
  // them with the index's), and when each settled booking's prediction
  // lapses (then its bits go, unless predicted again since).
  indexer::key_bits predicted_bits_;
  struct lapse {
    clock::time_point at;
    uint32_t slot = 0;
    std::vector<uint64_t> keys;
  };
  std::deque<lapse> lapses_;
  std::vector<uint8_t> held_; // walk_held's answer, reused
  uint64_t next_key_ = 1;
  // Other routers' bookings live in bookings_ too, under keys of their own.
  struct remote_ref {
    uint64_t key = 0; // in bookings_
    clock::time_point at;
  };
  std::map<std::pair<std::string, uint64_t>, remote_ref> remote_;
  std::map<std::string, clock::time_point> routers_seen_;
  uint64_t next_remote_key_ = uint64_t{1} << 63;
  uint64_t round_robin_ = 0;
};

} // namespace outrider::router
