#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace outrider::sidecar {

/// The KV forwarder's sequencing, without sockets: which live batch to
/// apply, which is a duplicate, when a gap needs a replay, and what a replay
/// answer means (batches to apply, or history lost). Single-threaded: owned
/// by one forwarder.
class kv_sequencer {
 public:
  /// What to do with a batch of sequence `seq`.
  enum class verdict {
    apply,     ///< the next expected batch
    duplicate, ///< already applied (seen again after a replay)
    gap,       ///< batches before it are missing: replay first
  };

  /// What a replay answer (the sequence numbers it held, in order) means.
  struct replay_plan {
    /// The engine's oldest batch is past what we need: the rank's history
    /// from `lost_from` to `resume - 1` is gone and the rank must be reset.
    bool lost = false;
    uint64_t lost_from = 0;
    uint64_t resume = 0;
    /// Indices into the answer of the batches to apply, in order.
    std::vector<size_t> apply;
  };

  explicit kv_sequencer(uint64_t next = 0) : next_(next) {}

  /// The sequence number expected next.
  uint64_t next() const { return next_; }

  verdict classify(uint64_t seq) const;

  /// Marks `seq` applied (it must be `next()`); the next one is `seq + 1`.
  void applied(uint64_t seq);

  /// Plans a replay answer that covered [next(), ...]. Moves `next()` past
  /// lost history and past every batch the plan applies.
  replay_plan plan_replay(const std::vector<uint64_t>& seqs);

  /// A live batch `seq` is ahead and no replay covered the gap (no answer,
  /// no replay endpoint): the history before it is lost, the rank must be
  /// reset, and the stream continues at `seq` (which the plan applies).
  replay_plan plan_unanswered(uint64_t seq);

  /// The indexer expects `expected`: start over from there. Returns false
  /// when we already were there (nothing to do).
  bool resync(uint64_t expected);

 private:
  uint64_t next_;
};

} // namespace outrider::sidecar
