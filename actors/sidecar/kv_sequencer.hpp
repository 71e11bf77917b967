#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
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

  /// A live batch no replay explains (a stray): ahead of next() with no
  /// replay to cover the gap, or behind next() and not the echo of a
  /// replay. One stray proves nothing (a bogus sequence, say 2^63, would
  /// freeze the stream for good if followed); a run of consecutive ones
  /// does: the publisher really is there (it moved on, or restarted its
  /// numbering). Strays are held until their run is confirmed.
  struct stray_plan {
    /// The run is confirmed: reset the rank (`reset`), then apply `apply`
    /// in order, calling applied() for each.
    bool adopt = false;
    replay_plan reset;
    std::vector<std::pair<uint64_t, std::string>> apply;
    /// Held strays given up because another run began.
    size_t dropped = 0;
  };

  /// Consecutive strays that confirm a run ahead (beyond `near_gap`) and
  /// behind.
  static constexpr size_t confirm_ahead = 2;
  static constexpr size_t confirm_behind = 3;

  /// `near_gap`: a gap ahead of at most this many batches is taken at once
  /// (the engine dropped some; nothing bogus about it).
  explicit kv_sequencer(uint64_t next = 0, uint64_t near_gap = 4096)
    : next_(next), echo_lo_(next), echo_hi_(next), near_gap_(near_gap) {}

  /// The sequence number expected next.
  uint64_t next() const { return next_; }

  verdict classify(uint64_t seq) const;

  /// Marks `seq` applied (it must be `next()`); the next one is `seq + 1`.
  void applied(uint64_t seq);

  /// Plans a replay answer that covered [next(), ...]. Moves `next()` past
  /// lost history and past every batch the plan applies.
  replay_plan plan_replay(const std::vector<uint64_t>& seqs);

  /// The indexer expects `expected`: start over from there. Returns false
  /// when we already were there (nothing to do).
  bool resync(uint64_t expected);

  /// Whether a duplicate `seq` is what a replay already applied, seen
  /// again on the live stream (else it is a stray).
  bool echo(uint64_t seq) const { return seq >= echo_lo_ && seq < echo_hi_; }

  /// A stray batch: held, or its run confirmed (see stray_plan).
  stray_plan stray(uint64_t seq, std::string payload);

  /// A batch arrived in sequence: the held strays were bogus. Returns how
  /// many were given up.
  size_t settle();

  /// Strays held now (at most confirm_behind).
  size_t held() const { return held_.size(); }

 private:
  uint64_t next_;
  uint64_t echo_lo_, echo_hi_; // the live echo of the last replay
  uint64_t near_gap_;
  std::vector<std::pair<uint64_t, std::string>> held_;
};

} // namespace outrider::sidecar
