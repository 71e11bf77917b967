#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <unordered_map>
#include <vector>

#include "actors/indexer/prefix_index.hpp"
#include "cluster/kv/kv_event.hpp"

namespace outrider::indexer {

/// How much a cached block is worth by where it lives: a GPU block is
/// reused as it is, a CPU or storage copy must first be loaded back
/// (`--kv-tier-weights`, docs/router.md). REMOTE copies and copies held by
/// another owner's tier are not the publishing worker's unless credited.
struct tier_policy {
  std::array<double, kv::medium_count> weight{1.0, 0.8, 0.25};
  bool credit_remote = false;
  bool credit_foreign = false;
};

/// A slot's run of leading prompt blocks: on GPU, and credited over every
/// tier (GPU blocks 1.0 each, then blocks only offloaded by their tier's
/// weight, while some tier holds the next block).
struct tiered_overlap {
  slot_id slot = 0;
  uint32_t gpu_blocks = 0;
  uint32_t any_blocks = 0; // leading blocks some tier holds
  double credit = 0;       // gpu_blocks + the weighted offloaded ones
};

/// The router's index across tiers: one prefix_index per medium (GPU as
/// engines report it; CPU and storage reference-counted, since chunk
/// events re-announce shared prefixes), with the rules of docs/router.md,
/// "What the index keeps":
/// - a store's key is made of its tokens and identity (LoRA, salt, media);
/// - a store's parent is looked up in every tier (an offloaded chunk's
///   parent may live on GPU);
/// - a tokenless offload placeholder is a tier copy of the block its hash
///   names, if that is known in any tier; else counted and left out;
/// - blocks of groups that cannot serve a prefix (sliding window, mamba)
///   are counted and left out, their removals too;
/// - REMOTE copies and foreign owners' copies are left out unless the
///   policy credits them;
/// - a slot's tier holds at most its cap (set_cap), oldest first.
/// Without offload events the CPU and storage tiers stay empty and
/// matching costs what the GPU index alone costs. Not thread-safe.
class tiered_index {
 public:
  struct counters {
    uint64_t placeholders_unresolved = 0;
    uint64_t other_groups = 0; // events of non-prefix groups left out
    uint64_t not_credited = 0; // REMOTE or foreign-owned, left out
  };

  explicit tiered_index(uint64_t seed, tier_policy policy = {});

  void apply(slot_id slot, const std::vector<kv::kv_event>& events,
             std::vector<uint64_t>* touched = nullptr);
  void clear_slot(slot_id slot);
  void set_cap(slot_id slot, kv::medium m, size_t cap);
  /// prefix_index::tidy on every tier.
  bool tidy(size_t budget) {
    bool left = false;
    for (auto& t : tiers_)
      left = t.tidy(budget) || left;
    return left;
  }
  /// prefix_index::expect, for one tier.
  void expect(slot_id slot, kv::medium m, size_t blocks) {
    tiers_[static_cast<size_t>(m)].expect(slot, blocks);
  }

  /// Per slot holding the first block in some tier, its runs.
  std::vector<tiered_overlap> find(const std::vector<uint64_t>& keys) const;
  /// The GPU tier's runs grouped by length (prefix_index::find_groups).
  match_groups find_groups(const std::vector<uint64_t>& keys,
                           const key_bits* also = nullptr) const {
    return tiers_[0].find_groups(keys, also);
  }
  /// The slots whose run goes on past their GPU run in an offload tier,
  /// as `find` gives them; none at once without offload events (with
  /// them, this costs what `find` costs).
  std::vector<tiered_overlap>
  find_offloaded(const std::vector<uint64_t>& keys) const;
  /// The GPU tier alone (what prefix_index::find_matches gives).
  std::vector<overlap> find_matches(const std::vector<uint64_t>& keys) const {
    return tiers_[0].find_matches(keys);
  }

  const prefix_index& tier(kv::medium m) const {
    return tiers_[static_cast<size_t>(m)];
  }
  /// Engine blocks a slot holds on GPU (the engine's cache proper).
  size_t held(slot_id slot) const { return tiers_[0].held(slot); }
  /// Engine blocks a slot holds in every tier.
  size_t held_all(slot_id slot) const;
  size_t entries() const;
  /// The GPU tier's engine hashes of a slot, sorted.
  std::vector<uint64_t> engine_hashes(slot_id slot) const {
    return tiers_[0].engine_hashes(slot);
  }
  const counters& stats() const { return stats_; }
  /// Summed over tiers.
  prefix_index::counters tier_stats() const;
  const tier_policy& policy() const { return policy_; }

 private:
  bool credited(kv::locality l, const std::string& ownership) const;
  bool other_group(slot_id slot, std::optional<uint32_t> group) const;
  std::optional<uint64_t> key_anywhere(slot_id slot, uint64_t hash) const;
  bool offloaded() const;

  uint64_t seed_;
  tier_policy policy_;
  std::array<prefix_index, kv::medium_count> tiers_;
  // Per slot: the groups whose kind cannot serve a prefix.
  std::unordered_map<slot_id, std::set<uint32_t>> other_groups_;
  counters stats_;
};

} // namespace outrider::indexer
