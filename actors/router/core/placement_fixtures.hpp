#pragma once

// Shared by the placement unit tests: a hand-moved clock, prompts, a
// worker record, and a rank's stored blocks.

#include <catch2/catch.hpp>

#include "actors/router/core/placement.hpp"

namespace outrider::router::test {

// A clock the test moves by hand.
struct manual_clock {
  placement::clock::time_point t{};
  placement::clock_fn fn() {
    return [this] { return t; };
  }
};

// `n` tokens counting up from `base`: prompts of 4-token blocks that share
// nothing unless their ranges overlap.
inline std::vector<uint32_t> counting_prompt(uint32_t base, size_t n = 16) {
  std::vector<uint32_t> t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = base + static_cast<uint32_t>(i);
  return t;
}

// Places a request of these tokens and nothing else.
inline route_decision place_prompt(placement& p, std::vector<uint32_t> tokens) {
  route_request req;
  req.tokens = std::move(tokens);
  return p.place(req);
}

inline cluster::worker_record worker(const std::string& id) {
  cluster::worker_record r;
  r.worker_id = id;
  r.instance_id = "i-" + id;
  r.model = "m";
  r.relay_endpoint = id + ":1";
  r.kv_block_size = 4;
  r.data_parallel_size = 1;
  return r;
}

// Worker `id` reports the blocks of `tokens` as stored (4 tokens a block,
// engine hashes from `first_hash` on).
inline void report_stored(placement& p, const std::string& id,
                          const std::vector<uint32_t>& tokens,
                          uint64_t first_hash) {
  worker_events ev;
  ev.worker_id = id;
  kv::block_stored s;
  s.block_size = 4;
  s.token_ids = tokens;
  for (uint64_t i = 0; i < tokens.size() / 4; ++i)
    s.block_hashes.push_back(first_hash + i);
  ev.events.emplace_back(s);
  REQUIRE(p.apply_events(ev));
}

} // namespace outrider::router::test
