#include "actors/indexer/prefix_index.hpp"

#include <chrono>
#include <map>
#include <random>
#include <set>

#include <catch2/catch.hpp>

#include "cluster/kv/block_hash.hpp"

using namespace outrider;
using namespace outrider::indexer;

namespace {

constexpr uint32_t bs = 4;

std::vector<uint32_t> block_tokens(uint32_t seed) {
  return {seed, seed + 1, seed + 2, seed + 3};
}

// A brute-force model: per slot, the token sequences of the prefixes it
// holds, straight from the engine's chains.
struct model {
  // slot -> engine hash -> (engine parent, tokens of the whole prefix)
  std::map<slot_id, std::map<uint64_t, std::vector<uint32_t>>> prefixes;

  void store(slot_id s, uint64_t hash, std::optional<uint64_t> parent,
             const std::vector<uint32_t>& tokens) {
    std::vector<uint32_t> prefix;
    if (parent) {
      auto i = prefixes[s].find(*parent);
      if (i == prefixes[s].end())
        return; // the index skips these too
      prefix = i->second;
    }
    prefix.insert(prefix.end(), tokens.begin(), tokens.end());
    prefixes[s][hash] = prefix;
  }

  // How many leading blocks of `prompt` slot `s` holds.
  uint32_t match(slot_id s, const std::vector<uint32_t>& prompt) const {
    auto i = prefixes.find(s);
    if (i == prefixes.end())
      return 0;
    uint32_t n = 0;
    for (size_t len = bs; len <= prompt.size(); len += bs) {
      bool found = false;
      for (const auto& [h, p] : i->second)
        if (p.size() == len && std::equal(p.begin(), p.end(), prompt.begin()))
          found = true;
      if (!found)
        break;
      ++n;
    }
    return n;
  }
};

} // namespace

TEST_CASE("the prefix index matches a brute-force model under random events") {
  std::mt19937_64 rng{2026};
  prefix_index index{kv::block_hash_seed};
  model m;
  // Few distinct token blocks so that prefixes are shared across slots.
  std::vector<std::vector<uint32_t>> prompts;
  for (int p = 0; p < 12; ++p) {
    std::vector<uint32_t> prompt;
    for (int b = 0; b < 6; ++b) {
      auto t = block_tokens(static_cast<uint32_t>(100 * (rng() % 4) + b * 7));
      prompt.insert(prompt.end(), t.begin(), t.end());
    }
    prompts.push_back(prompt);
  }
  uint64_t next_hash = 1;
  // Slots in the inline mask and beyond it (the sparse words).
  const std::vector<slot_id> slots{0, 1, 63, 64, 200};
  for (int step = 0; step < 3000; ++step) {
    slot_id slot = slots[rng() % slots.size()];
    auto dice = rng() % 20;
    if (dice < 12) {
      // Store a prefix chain of a prompt, as an engine would, maybe
      // continuing a chain it already has.
      const auto& p = prompts[rng() % prompts.size()];
      size_t blocks = 1 + rng() % (p.size() / bs);
      std::optional<uint64_t> parent;
      kv::block_stored s;
      s.block_size = bs;
      for (size_t b = 0; b < blocks; ++b) {
        auto h = next_hash++;
        std::vector<uint32_t> t(p.begin() + static_cast<ptrdiff_t>(b * bs),
                                p.begin() +
                                  static_cast<ptrdiff_t>((b + 1) * bs));
        m.store(slot, h, parent, t);
        s.block_hashes.push_back(h);
        s.token_ids.insert(s.token_ids.end(), t.begin(), t.end());
        parent = h;
      }
      index.apply(slot, {s});
    } else if (dice < 19) {
      auto& mine = m.prefixes[slot];
      if (mine.empty())
        continue;
      auto it = mine.begin();
      std::advance(it, static_cast<long>(rng() % mine.size()));
      index.apply(slot, {kv::block_removed{{it->first}}});
      mine.erase(it);
    } else {
      index.apply(slot, {kv::all_blocks_cleared{}});
      m.prefixes[slot].clear();
    }
    if (step % 50 != 0)
      continue;
    // One entry per (slot, distinct prefix), however many engine hashes
    // stand for it.
    size_t distinct = 0;
    for (const auto& [s, chains] : m.prefixes) {
      std::set<std::vector<uint32_t>> seen;
      for (const auto& [h, p] : chains)
        seen.insert(p);
      distinct += seen.size();
    }
    CHECK(index.entries() == distinct);
    for (const auto& prompt : prompts) {
      auto seq = kv::sequence_hashes(prompt.data(), prompt.size(), bs);
      std::map<slot_id, uint32_t> got;
      for (auto o : index.find_matches(seq))
        got[o.slot] = o.blocks;
      for (slot_id s : slots) {
        INFO("step " << step << " slot " << s);
        CHECK(got[s] == m.match(s, prompt));
        // The walk down one slot's blocks (shortcut where a block's
        // holders are its parent's) answers as a lookup per block does.
        std::vector<uint8_t> held;
        CHECK(index.holds_along(seq, s, held) == m.match(s, prompt));
        REQUIRE(held.size() == seq.size());
        for (size_t b = 0; b < seq.size(); ++b)
          CHECK((held[b] != 0) == index.holds(seq[b], s));
      }
    }
  }
}

TEST_CASE("unknown parents and removals are counted, never crash") {
  prefix_index index{kv::block_hash_seed};
  auto t = block_tokens(1);
  index.apply(0, {kv::block_stored{{5}, 4, t, bs}});
  CHECK(index.stats().unknown_parent == 1);
  CHECK(index.entries() == 0);
  index.apply(0, {kv::block_removed{{77}}});
  CHECK(index.stats().unknown_removal == 1);
  index.apply(1, {kv::block_stored{{1}, std::nullopt, t, bs}});
  index.apply(2, {kv::block_stored{{9}, std::nullopt, t, bs}});
  CHECK(index.distinct_blocks() == 1);
  CHECK(index.entries() == 2);
  index.clear_slot(1);
  CHECK(index.entries() == 1);
  auto seq = kv::sequence_hashes(t.data(), t.size(), bs);
  auto m = index.find_matches(seq);
  REQUIRE(m.size() == 1);
  CHECK(m[0].slot == 2);
  CHECK(index.find_matches({}).empty());
}

TEST_CASE("slots beyond the first 64 match like the others") {
  prefix_index index{kv::block_hash_seed};
  std::vector<uint32_t> p;
  for (uint32_t i = 0; i < 12; ++i)
    p.push_back(i + 1);
  std::map<slot_id, uint32_t> depth{
    {0, 3}, {63, 1}, {64, 2}, {130, 3}, {200, 2}};
  uint64_t h = 1;
  for (auto [slot, blocks] : depth) {
    kv::block_stored s{{}, std::nullopt, {}, bs};
    for (uint32_t b = 0; b < blocks; ++b) {
      s.block_hashes.push_back(h++);
      s.token_ids.insert(s.token_ids.end(), p.begin() + b * bs,
                         p.begin() + (b + 1) * bs);
    }
    index.apply(slot, {s});
  }
  auto seq = kv::sequence_hashes(p.data(), p.size(), bs);
  std::map<slot_id, uint32_t> got;
  for (auto o : index.find_matches(seq))
    got[o.slot] = o.blocks;
  CHECK(got == depth);
  index.clear_slot(130);
  index.clear_slot(0);
  got.clear();
  for (auto o : index.find_matches(seq))
    got[o.slot] = o.blocks;
  CHECK(got == std::map<slot_id, uint32_t>{{63, 1}, {64, 2}, {200, 2}});
  CHECK(index.entries() == 5);
  CHECK(index.distinct_blocks() == 2);
}

TEST_CASE("a slot expected to hold n blocks gets its table once, at its "
          "first block and after a clear") {
  prefix_index index{kv::block_hash_seed};
  index.expect(3, 545);
  CHECK(index.table_slots(3) == 0); // nothing until a block comes
  index.put(3, 1, 101);
  CHECK(index.table_slots(3) == 682); // 545 at 80% load
  for (uint64_t h = 2; h <= 545; ++h) {
    index.put(3, h, 100 + h);
    REQUIRE(index.table_slots(3) == 682);
  }
  CHECK(index.held(3) == 545);
  index.clear_slot(3);
  CHECK(index.table_slots(3) == 0);
  index.put(3, 7, 107);
  CHECK(index.table_slots(3) == 682);
  // A slot with no expectation starts small and grows as it fills.
  index.put(4, 2, 102); // (engine hashes 0 and 1 are held beside the arrays)
  CHECK(index.table_slots(4) == 16);
}

TEST_CASE("an index whose events stop finishes its tables' growth on tidy") {
  using namespace std::chrono;
  prefix_index index{kv::block_hash_seed};
  // 82,850 distinct blocks on one slot: the block table (118,342 slots)
  // is just past its 70% limit and has asked for its next arrays.
  auto key = [](uint64_t i) { return i * 0x9e3779b97f4a7c15ULL + 11; };
  for (uint64_t i = 0; i < 82850; ++i)
    index.put(0, i + 2, key(i));
  CHECK(index.tidy(1)); // pending: the helper at work, or the move
  auto deadline = steady_clock::now() + seconds(20);
  while (index.tidy(65536) && steady_clock::now() < deadline) {
  }
  CHECK_FALSE(index.tidy(65536));
  CHECK(index.entries() == 82850);
  for (uint64_t i = 0; i < 82850; ++i)
    REQUIRE(index.holds(key(i), 0));
}
