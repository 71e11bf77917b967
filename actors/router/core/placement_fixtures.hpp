#pragma once

// Shared by the placement unit tests: a hand-moved clock and a worker
// record.

#include "actors/router/core/placement.hpp"

namespace outrider::router::test {

// A clock the test moves by hand.
struct manual_clock {
  placement::clock::time_point t{};
  placement::clock_fn fn() {
    return [this] { return t; };
  }
};

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

} // namespace outrider::router::test
