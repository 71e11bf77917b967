#pragma once

// Waits drawn at random, so that many subscriptions that failed together
// (records that appeared together, relays that time out alike) retry apart.

#include <chrono>
#include <random>

namespace outrider::router {

/// A wait drawn uniformly from [lo, hi] (per-thread generator).
inline std::chrono::milliseconds between(std::chrono::milliseconds lo,
                                         std::chrono::milliseconds hi) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  std::uniform_int_distribution<long> pick{lo.count(), hi.count()};
  return std::chrono::milliseconds{pick(rng)};
}

/// A wait in [d/2, d]. Without it 2,000 records of relays that never
/// answer (a connect that hangs to gRPC's 20 s timeout) failed and reopened
/// in the same instant, again and again, and a real request waited seconds
/// behind each burst on a busy machine.
inline std::chrono::milliseconds jittered(std::chrono::milliseconds d) {
  return between(d / 2, d);
}

} // namespace outrider::router
